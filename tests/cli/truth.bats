#!/usr/bin/env bats
# What DIALS reads from nb's files is what was simulated (docs/physics.md
# 2.6): for a rotation sweep with gain 2, stills, a detector of four panels
# and a 450 um silicon sensor, each field that each format has (CBF, SMV,
# NXmx, model.expt, XDS.INP, CrystFEL .geom) is read back through dxtbx
# (h5py where dxtbx 3.12 reads nothing) and compared with the plan: gain,
# trusted range and pedestal, sensor thickness, material and attenuation,
# per-shot crystal and wavelength, the panels' hierarchy.  Shards'
# model.expt files join (--join) into the whole run's.  The data are made
# once (setup_file); without DIALS, h5py or libhdf5 the tests that need them
# skip saying why.

load helper

PY=${NB_TEST_PYTHON:-/usr/bin/python3}
SWEEP="-cell 78 78 37 90 90 90 -misset 10 20 30 -detpixels 256 -pixel 0.172 -distance 120 -lambda 1 -N 10
 -default_F 100 -osc 1 -phisteps 2 -nframes 4"
STILLS="-cell 60 70 80 90 90 90 -lambda 1 -distance 80 -detpixels 128 -pixel 0.2 -default_F 100 -N 8 -nframes 4
 -stills -stills_bandwidth 0.4 -stills_spikes 3 -misset_seed 7"

setup_file() {
    export DATA="$BATS_FILE_TMPDIR/data"
    mkdir -p "$DATA"
    cd "$DATA" || return 1
    PATH="$NB_BIN:$PATH"
    # shellcheck disable=SC2086
    nb-geom $SWEEP -q | nb-sim -q | nb-noise -q -seed 1 -gain 2 -o sweep.nbs
    nb-convert -q -o sweep_###.cbf -o model.expt -o XDS.INP -o sweep.geom sweep.nbs
    nb-convert -q -o smv_###.img -o smv.expt sweep.nbs
    nb-convert -q -o alone.expt sweep.nbs
    nb-convert -q -o sweep.nxs -o nxs.expt sweep.nbs 2>nxs.err || true
    # shellcheck disable=SC2086
    nb-geom $STILLS -q -o stills_plan.nbs
    nb-sim -q stills_plan.nbs | nb-noise -q -seed 2 -o stills.nbs
    nb-convert -q -o shot_#.cbf -o stills.expt -o truth.jsonl stills.nbs
    nb-convert -q -o stills.nxs -o stills_nxs.expt stills.nbs 2>/dev/null || true
}

need_dials() {
    command -v dials.import >/dev/null 2>&1 || skip "DIALS is not installed (dials.import)"
    "$PY" -c 'import dxtbx' 2>/dev/null || skip "dxtbx is not importable by $PY"
}

need_nxmx() {
    [ -s "$DATA/sweep.nxs" ] || skip "this build or system has no libhdf5: $(cat "$DATA/nxs.err")"
    "$PY" -c 'import h5py, hdf5plugin' 2>/dev/null || skip "h5py and hdf5plugin are not importable by $PY"
}

@test "truth: gain 2 (nb-noise -gain 2) as dxtbx reads it from the CBF and model.expt, in the SMV header, NXmx's data_scaling_factor and the .geom" {
    need_dials
    cd "$DATA"
    grep -q "^GAIN=2;" smv_001.img
    grep -q "^adu_per_photon = 2$" sweep.geom
    "$PY" - <<'PY'
from dxtbx.model.experiment_list import ExperimentListFactory as F
cbf = F.from_filenames(["sweep_001.cbf"])[0].detector
assert cbf[0].get_gain() == 2.0, cbf[0].get_gain()
for name in ("model.expt", "smv.expt", "alone.expt"):
    d = F.from_json_file(name, check_format=False)[0].detector
    assert d[0].get_gain() == 2.0, (name, d[0].get_gain())
PY
}

@test "truth: gain in NXmx: /entry/data/data_scaling_factor (and data_scale_factor, newer dxtbx's spelling) is 1/gain" {
    need_nxmx
    cd "$DATA"
    "$PY" - <<'PY'
import h5py
f = h5py.File("sweep.nxs", "r")
assert f["/entry/data/data_scaling_factor"][()] == 0.5, f["/entry/data/data_scaling_factor"][()]
assert f["/entry/data/data_scale_factor"][()] == 0.5
PY
}

@test "truth: model.expt's trusted range and pedestal are those dxtbx reads from the CBF, SMV and NXmx beside it, and the CBF's when written alone" {
    need_dials
    need_nxmx
    cd "$DATA"
    "$PY" - <<'PY'
from dxtbx.model.experiment_list import ExperimentListFactory as F
def panel(name):
    if name.endswith(".expt"):
        return F.from_json_file(name, check_format=False)[0].detector[0]
    return F.from_filenames([name])[0].detector[0]
for model, image in (("model.expt", "sweep_001.cbf"), ("smv.expt", "smv_001.img"), ("nxs.expt", "sweep.nxs"),
                     ("alone.expt", "sweep_001.cbf")):
    m, i = panel(model), panel(image)
    assert m.get_trusted_range() == i.get_trusted_range(), (model, m.get_trusted_range(), i.get_trusted_range())
    assert m.get_pedestal() == i.get_pedestal(), (model, m.get_pedestal(), i.get_pedestal())
    print(model, m.get_trusted_range(), m.get_pedestal())
assert panel("alone.expt").get_trusted_range() == (-1.0, 65495.0), panel("alone.expt").get_trusted_range()
PY
}

@test "truth: the detector type is a pixel-array detector in model.expt, NXmx and the CBF's own field" {
    need_dials
    need_nxmx
    cd "$DATA"
    grep -q "_diffrn_detector.type 'nb toolkit simulated pixel-array detector'" sweep_001.cbf
    "$PY" - <<'PY'
from dxtbx.model.experiment_list import ExperimentListFactory as F
for name in ("model.expt", "nxs.expt", "stills.expt"):
    for p in F.from_json_file(name, check_format=False)[0].detector:
        assert p.get_type() == "SENSOR_PAD", (name, p.get_type())
assert F.from_filenames(["sweep.nxs"])[0].detector[0].get_type() == "SENSOR_PAD"
PY
}

@test "truth: without a simulated sensor model.expt states none, and NXmx's stand-in makes DIALS's efficiency 1 within 1e-3 at every corner" {
    need_dials
    need_nxmx
    cd "$DATA"
    "$PY" - <<'PY'
import math
from dxtbx.model.experiment_list import ExperimentListFactory as F
from scitbx import matrix
m = F.from_json_file("model.expt", check_format=False)[0].detector[0]
assert m.get_thickness() == 0 and m.get_mu() == 0, (m.get_thickness(), m.get_mu())
e = F.from_filenames(["sweep.nxs"])[0]
p = e.detector[0]
mu, t = p.get_mu(), p.get_thickness()
n = matrix.col(p.get_normal())
nx, ny = p.get_image_size()
worst = 1
for x, y in ((0, 0), (nx, 0), (0, ny), (nx, ny), (nx / 2, ny / 2)):
    s1 = matrix.col(p.get_pixel_lab_coord((x, y)))
    cos = abs(s1.dot(n)) / s1.length()
    worst = min(worst, 1 - math.exp(-mu * t / cos))  # DIALS's qe_correction
print("NXmx stand-in:", p.get_material(), t, "mm, mu", mu, "/mm: efficiency >=", worst)
assert worst >= 0.999, worst
PY
}

@test "truth: a 450 um silicon sensor (-detector_material Si): NXmx, CBF, model.expt and XDS.INP state its thickness and attenuation" {
    need_dials
    need_nxmx
    nb-geom $SWEEP -nframes 1 -detector_thick 450 -detector_material Si -q -o plan.nbs
    mu=$(plan_key plan.nbs DETECTOR_MU)
    nb-sim -q plan.nbs | nb-noise -q -seed 1 | nb-convert -q -o s_###.cbf -o s.nxs -o s.expt -o XDS.INP
    grep -q "^SENSOR_THICKNESS= 0.4500$" XDS.INP
    grep -q "^SILICON= " XDS.INP
    "$PY" - "$mu" <<'PY'
import sys
from dxtbx.model.experiment_list import ExperimentListFactory as F
mu = float(sys.argv[1]) * 1e-3  # 1/mm
xds = [l for l in open("XDS.INP") if l.startswith("SILICON=")][0]
assert abs(float(xds.split()[1]) - mu) < 1e-5 * mu, (xds, mu)
for name in ("s.nxs", "s_001.cbf", "s.expt"):
    el = F.from_json_file(name) if name.endswith(".expt") else F.from_filenames([name])
    p = el[0].detector[0]
    print(name, p.get_type(), p.get_material(), p.get_thickness(), p.get_mu(), "simulated mu", mu)
    assert p.get_material() == "Si", (name, p.get_material())
    assert abs(p.get_thickness() - 0.45) < 1e-9, (name, p.get_thickness())
    assert abs(p.get_mu() - mu) < 0.01 * mu, (name, p.get_mu(), mu)
    assert p.get_px_mm_strategy().name() == "ParallaxCorrectedPxMmStrategy", name
PY
}

@test "truth: stills: model.expt holds one experiment per image, each its frame's crystal (truth.jsonl's A within 1e-9), wavelength and image" {
    need_dials
    cd "$DATA"
    "$PY" - <<'PY'
import json, re
from dxtbx.model.experiment_list import ExperimentListFactory as F
rows = [json.loads(l) for l in open("truth.jsonl")]
el = F.from_json_file("stills.expt")
assert len(el) == len(rows) == 4, (len(el), len(rows))
assert len(el.crystals()) == 4 and len(el.beams()) == 4 and len(el.detectors()) == 1
for e, o in zip(el, rows):
    assert e.identifier == o["identifier"] and re.match(r"^nb-[0-9a-f]{8}-%d$" % o["frame"], e.identifier), e.identifier
    assert e.imageset.paths()[0].endswith("/shot_%d.cbf" % o["frame"]), e.imageset.paths()
    A, want = e.crystal.get_A(), o["A"]
    worst = max(abs(a - b) for a, b in zip(A, want)) / max(abs(b) for b in want)
    assert worst < 1e-9, (o["frame"], worst)
    assert abs(e.beam.get_wavelength() - o["wavelength"]) < 1e-12, (e.beam.get_wavelength(), o["wavelength"])
    cbf = F.from_filenames(["shot_%d.cbf" % o["frame"]])[0].beam.get_wavelength()
    assert abs(cbf - o["wavelength"]) < 1e-6, (cbf, o["wavelength"])
    assert e.goniometer is None and e.scan is None
# the shots differ
assert len(set(round(e.beam.get_wavelength(), 9) for e in el)) == 4
PY
}

@test "truth: stills in NXmx: each experiment names the file and its frame's index, whose pixels are the frame's" {
    need_dials
    need_nxmx
    cd "$DATA"
    "$PY" - <<'PY'
from dxtbx.model.experiment_list import ExperimentListFactory as F
el = F.from_json_file("stills_nxs.expt")
assert len(el) == 4
for k, e in enumerate(el):
    assert e.imageset.paths()[0].endswith("/stills.nxs") and list(e.imageset.indices()) == [k], e.imageset.indices()
    nxs = e.imageset.get_raw_data(0)[0].as_numpy_array()
    cbf = F.from_filenames(["shot_%d.cbf" % (k + 1)])[0].imageset.get_raw_data(0)[0].as_numpy_array()
    assert (nxs == cbf).all(), k
PY
}

@test "truth: shards' stills model.expt joined (--join) with their NXmx master are the whole run's, naming the master" {
    need_dials
    need_nxmx
    for k in 1 2; do
        nb-sim -q --shard $k/2 "$DATA/stills_plan.nbs" | nb-noise -q -seed 2 | nb-convert -q -o part$k.nxs -o part$k.expt
    done
    nb-convert -q --join 'part*.nxs' --join 'part*.expt' -o master.nxs -o joined.expt
    nb-convert -q --join part2.expt --join part1.expt -o parts.expt
    "$PY" - "$DATA/stills_nxs.expt" <<'PY'
import sys
from dxtbx.model.experiment_list import ExperimentListFactory as F
whole, joined, parts = F.from_json_file(sys.argv[1]), F.from_json_file("joined.expt"), F.from_json_file("parts.expt")
# the shards' experiments are the whole run's: its identifiers, in frame order
assert [e.identifier for e in joined] == [e.identifier for e in whole], [e.identifier for e in joined]
assert [e.identifier for e in parts] == [e.identifier for e in whole], [e.identifier for e in parts]
for k, (w, j, p) in enumerate(zip(whole, joined, parts)):
    assert j.crystal.get_A() == w.crystal.get_A() and j.beam.get_wavelength() == w.beam.get_wavelength()
    assert j.imageset.paths()[0].endswith("/master.nxs") and list(j.imageset.indices()) == [k]
    assert p.imageset.paths()[0].endswith("/part%d.nxs" % (1 + k // 2)), p.imageset.paths()
    want = w.imageset.get_raw_data(0)[0].as_numpy_array()
    assert (j.imageset.get_raw_data(0)[0].as_numpy_array() == want).all(), k
    assert (p.imageset.get_raw_data(0)[0].as_numpy_array() == want).all(), k
PY
}

@test "truth: a rotation's shards joined: CBF templates into one scan, NXmx parts into the master's frames" {
    need_dials
    need_nxmx
    nb-geom $SWEEP -nframes 5 -q -o plan.nbs
    nb-sim -q plan.nbs | nb-convert -q -o whole.nxs -o whole.expt
    for k in 1 2 3; do
        nb-sim -q --shard $k/3 plan.nbs | nb-convert -q -o f_###.cbf -o c$k.expt
        nb-sim -q --shard $k/3 plan.nbs | nb-convert -q -o p$k.nxs -o n$k.expt
    done
    nb-convert -q --join 'c*.expt' -o cbf.expt
    nb-convert -q --join 'p*.nxs' --join 'n*.expt' -o master.nxs -o joined.expt
    run_nb nb-convert --join 'n*.expt' -o bad.expt
    expect_status 2
    expect_has "the parts' images are different files"
    "$PY" - <<'PY'
from dxtbx.model.experiment_list import ExperimentListFactory as F
w = F.from_json_file("whole.expt")[0]
for name in ("cbf.expt", "joined.expt"):
    e = F.from_json_file(name)[0]
    assert e.scan.get_image_range() == (1, 5) and e.scan.get_oscillation() == w.scan.get_oscillation(), (name, e.scan)
    assert e.crystal.get_A() == w.crystal.get_A()
    for i in range(5):
        a = e.imageset.get_raw_data(i)[0].as_numpy_array()
        assert abs(a.sum() - w.imageset.get_raw_data(i)[0].as_numpy_array().sum()) < 1e-3 * a.sum(), (name, i)
# a shard's NXmx frames are numbered from 1 in their file, as dxtbx numbers them; its files by their names
p, c = F.from_json_file("n2.expt")[0], F.from_json_file("c2.expt")[0]
first, last = c.scan.get_image_range()
assert first > 1 and c.scan.get_oscillation() == p.scan.get_oscillation() == (first - 1.0, 1.0), (c.scan, p.scan)
assert p.scan.get_image_range() == (1, last - first + 1), p.scan
PY
}

@test "truth: a detector of panels: model.expt nests each panel as dxtbx reads NXmx, so dials.import takes it as reference_geometry" {
    need_dials
    need_nxmx
    # examples/tiles.geom with tile 2's axes made exactly perpendicular (dxtbx
    # refuses a module whose axes are not)
    sed 's|^q2/ss = .*|q2/ss = -0.0871557x +0.9961947y|' "$NB_ROOT/examples/tiles.geom" > tiles.geom
    nb-geom -q -panels tiles.geom -cell 78 78 37 90 90 90 -lambda 1 -N 10 -default_F 100 -osc 1 -nframes 2 -o tiles.nbs
    nb-sim -q tiles.nbs | nb-noise -q -seed 3 | nb-convert -q -o tiles.nxs -o tiles.expt -o tile_##.cbf --format expt -o alone.model
    dials.import tiles.nxs reference_geometry=tiles.expt output.experiments=ref.expt >import.log 2>&1 || { tail -5 import.log; return 1; }
    "$PY" - <<'PY'
from dxtbx.model.experiment_list import ExperimentListFactory as F
m = F.from_json_file("tiles.expt")[0]
f = F.from_filenames(["tiles.nxs"])[0]
alone = F.from_json_file("alone.model", check_format=False)[0]
assert len(m.detector) == len(f.detector) == 4
assert m.detector.is_similar_to(f.detector, static_only=True)
def groups(d):
    return [(c.get_name(), [p.get_name() for p in c]) for c in d.hierarchy()]
assert groups(m.detector) == groups(f.detector), (groups(m.detector), groups(f.detector))
cbf = F.from_filenames(["tile_p2_01.cbf"])[0].detector[0]
for a, b, c in zip(m.detector, f.detector, alone.detector):
    for u, v in ((a.get_origin(), b.get_origin()), (a.get_fast_axis(), b.get_fast_axis()), (a.get_slow_axis(), b.get_slow_axis())):
        assert max(abs(x - y) for x, y in zip(u, v)) < 1e-6, (u, v)
    assert a.get_trusted_range() == b.get_trusted_range() == c.get_trusted_range() == cbf.get_trusted_range()
print(groups(m.detector))
PY
}

@test "truth: model.expt written alone finds, as the CBF's detector, the same spots (spot finding with each)" {
    need_dials
    cd "$DATA"
    dials.import sweep_001.cbf output.experiments="$BATS_TEST_TMPDIR/own.expt" >/dev/null 2>&1
    dials.import sweep_001.cbf reference_geometry=alone.expt use_beam_reference=False use_gonio_reference=False \
        output.experiments="$BATS_TEST_TMPDIR/ref.expt" >/dev/null 2>&1
    cd "$BATS_TEST_TMPDIR"
    # the minimum spot size fixed: DIALS picks 3 for model.expt's pixel-array
    # detector and 6 for the CBF's, which dxtbx 3.12's full-CBF reader types
    # SENSOR_UNKNOWN whatever the file says (README, DIALS notes)
    for e in own ref; do
        dials.find_spots $e.expt output.reflections=$e.refl spotfinder.filter.min_spot_size=3 \
            spotfinder.threshold.dispersion.global_threshold=20 >$e.log 2>&1 || { tail -5 $e.log; return 1; }
    done
    "$PY" - <<'PY'
from dials.array_family import flex
a, b = flex.reflection_table.from_file("own.refl"), flex.reflection_table.from_file("ref.refl")
print(len(a), "spots with the CBF's detector,", len(b), "with model.expt's")
assert len(a) > 50 and len(a) == len(b), (len(a), len(b))
xa, xb = sorted(a["xyzobs.px.value"]), sorted(b["xyzobs.px.value"])
assert max(max(abs(u - v) for u, v in zip(p, q)) for p, q in zip(xa, xb)) < 1e-9
PY
}

@test "truth: a rotation's model.expt refuses frames that do not follow one another, and --join refuses overlaps, gaps and other detectors" {
    nb-geom $SWEEP -detpixels 64 -nframes 4 -q -o plan.nbs
    nb-sim -q --frames 3:4 plan.nbs -o b.nbs
    nb-sim -q --frames 1:2 plan.nbs -o a.nbs
    run_nb nb-convert -o x.expt b.nbs a.nbs
    run_nb sh -c 'cat b.nbs a.nbs | nb-convert -o x.expt'
    expect_status 1
    expect_has "frame 1 follows frame 4"
    [ ! -e x.expt ] || false
    nb-sim -q --frames 1:1 plan.nbs | nb-convert -q -o f_##.cbf -o one.expt
    nb-sim -q --frames 3:3 plan.nbs | nb-convert -q -o f_##.cbf -o three.expt
    nb-sim -q --frames 1:2 plan.nbs | nb-convert -q -o f_##.cbf -o two.expt
    run_nb nb-convert --join one.expt --join three.expt -o j.expt
    expect_status 1
    expect_has "the parts of 'j.expt' leave a gap"
    run_nb nb-convert --join one.expt --join two.expt -o j.expt
    expect_status 1
    expect_has "overlap"
    nb-geom $SWEEP -detpixels 64 -nframes 4 -distance 150 -q | nb-sim -q --frames 2:2 | nb-convert -q -o g_##.cbf -o far.expt
    run_nb nb-convert --join one.expt --join far.expt -o j.expt
    expect_status 1
    expect_has "describe different detectors"
    run_nb nb-convert --join one.expt --join two.expt -o two.expt
    expect_status 2
    expect_has "'two.expt' is both a part to join and the output"
    run_nb nb-convert --join one.expt -o j.nxs
    expect_status 2
    expect_has "joins NXmx parts: give them with --join PART.nxs"
    [ ! -e j.expt ] || false
}

@test "truth: identifiers: the same command writes the same list; another plan's experiments load beside its, as a truth's and a fit's" {
    need_dials
    cd "$BATS_TEST_TMPDIR"
    # the seed given: without one nb-geom takes the clock's (as the reference),
    # and two runs a second apart are two plans, rightly named apart
    for k in one two; do
        # shellcheck disable=SC2086
        nb-geom $STILLS -seed 5 -q | nb-sim -q | nb-convert -q -o $k.expt -o $k.jsonl
    done
    cmp one.expt two.expt
    cmp one.jsonl two.jsonl
    # another plan: the same flags but the shots' seed
    # shellcheck disable=SC2086
    nb-geom ${STILLS/-misset_seed 7/-misset_seed 8} -seed 5 -q | nb-sim -q | nb-convert -q -o other.expt
    "$PY" - <<'PY'
from dxtbx.model.experiment_list import ExperimentList, ExperimentListFactory as F
one, other = F.from_json_file("one.expt", check_format=False), F.from_json_file("other.expt", check_format=False)
assert len(set(e.identifier for e in one)) == 4 and len(set(e.identifier for e in other)) == 4
both = ExperimentList()
both.extend(one)
both.extend(other)  # dxtbx refuses an identifier twice
assert len(both) == 8, len(both)
PY
}

@test "truth: identifiers: a DIALS list's are kept through nb-geom -expt, the plan, the render and every list and truth.jsonl written" {
    need_dials
    cd "$BATS_TEST_TMPDIR"
    "$PY" - "$DATA/stills.expt" <<'PY'
import json, sys, uuid
el = json.load(open(sys.argv[1]))
for k, e in enumerate(el["experiment"]):
    e["identifier"] = str(uuid.UUID(int=0x5eed + k))  # as dials.import names them
    e.pop("nb_frame")
json.dump(el, open("dials.expt", "w"))
PY
    nb-geom -q -expt dials.expt -default_F 100 -N 8 -o kept.nbs
    nb-sim -q kept.nbs | nb-convert -q -o kept.expt -o kept.jsonl
    nb-sim -q --shard 2/2 kept.nbs | nb-convert -q -o part2.expt
    nb-sim -q --shard 1/2 kept.nbs | nb-convert -q -o part1.expt
    nb-convert -q --join part2.expt --join part1.expt -o joined.expt
    "$PY" - <<'PY'
import json, uuid
from dxtbx.model.experiment_list import ExperimentListFactory as F
want = [str(uuid.UUID(int=0x5eed + k)) for k in range(4)]
for name in ("kept.expt", "joined.expt"):
    got = [e.identifier for e in F.from_json_file(name, check_format=False)]
    assert got == want, (name, got)
assert [json.loads(l)["identifier"] for l in open("kept.jsonl")] == want
PY
}

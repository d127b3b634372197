#!/usr/bin/env bats
# Serial-crystallography stills (nb-geom -stills) and the ground truth
# (nb-convert -o truth.jsonl): the flags and their refusals, each shot drawn
# from the seed and its frame alone (a shard renders the frame the whole run
# did, bit for bit), the shot's values in the IMAGE keys and in the truth,
# and with DIALS: the spots dials.find_spots finds on 12 stills lie on the
# truth's reflections, and a rotation frame's A is model.expt's crystal
# turned to mid-frame.  The uniformity of the orientations is checked in
# tests/unit/test_stills.c.

load helper

PY=${NB_TEST_PYTHON:-/usr/bin/python3}

# 12 small stills with every per-shot variation (spectrum, size, fluence)
STILLS="-cell 60 70 80 90 90 90 -lambda 1 -distance 80 -detpixels 96 -pixel 0.2 -default_F 100 -round_xtal
        -nframes 12 -stills -stills_bandwidth 0.4 -stills_spikes 4 -stills_N 6:12 -stills_fluence 1e29:3e29"

need_dials() {
    command -v dials.find_spots >/dev/null 2>&1 || skip "DIALS is not installed (dials.find_spots)"
    "$PY" -c 'import dxtbx' 2>/dev/null || skip "dxtbx is not importable by $PY"
}

@test "stills: nb-geom records the stills' settings in the PLAN" {
    nb-geom $STILLS -misset_seed 5 -o plan.nbs
    [ "$(plan_key plan.nbs STILLS)" = 1 ]
    [ "$(plan_key plan.nbs STILLS_BANDWIDTH)" = 0.004 ]
    [ "$(plan_key plan.nbs STILLS_SPIKES)" = 4 ]
    [ "$(plan_key plan.nbs STILLS_N)" = "6 12" ]
    [ "$(plan_key plan.nbs STILLS_FLUENCE)" = "1e+29 3e+29" ]
    [ "$(plan_key plan.nbs NFRAMES)" = 12 ]
}

@test "stills: a rotation series' plan has no STILLS keys" {
    nb-geom $SMALL -osc 1 -nframes 3 -o plan.nbs
    run ! grep -a -q '^STILLS' plan.nbs
}

@test "stills: -stills_* without -stills, or -stills with a rotation, is a usage error" {
    run nb-geom $SMALL -stills_N 3:5
    expect_status 2
    expect_has "need -stills"
    run nb-geom $SMALL -nframes 3 -stills -osc 1
    expect_status 2
    expect_has "a still has no rotation"
    run nb-geom $SMALL -stills -stills_N 5:3
    expect_status 2
    expect_has "1 <= A <= B"
    run nb-geom $SMALL -stills -stills_spikes 4
    expect_status 2
    expect_has "needs -stills_bandwidth"
}

@test "stills: frame i of a shard (--frames i:i, --shard) is frame i of the whole run, bit for bit" {
    nb-geom $STILLS -misset_seed 5 -o plan.nbs
    nb-sim -q plan.nbs | nb-convert -q -o all_##.bin
    nb-sim -q --frames 7:7 plan.nbs | nb-convert -q -o one_##.bin
    nb-sim -q --shard 3/4 plan.nbs | nb-convert -q -o shard_##.bin
    [ -s all_07.bin ]
    cmp all_07.bin one_07.bin
    cmp all_07.bin shard_07.bin
    cmp all_08.bin shard_08.bin
    # a shard's frames are no copies of each other: each shot is its own
    run ! cmp -s all_07.bin all_08.bin
}

@test "stills: the double path renders the same shots as the fast path" {
    nb-geom $STILLS -misset_seed 5 -o plan.nbs
    nb-sim -q --frames 2:2 plan.nbs -o fast.nbs
    nb-sim -q --frames 2:2 -precision double plan.nbs -o double.nbs
    [ "$(nb_key fast.nbs STILL_ROTATION)" = "$(nb_key double.nbs STILL_ROTATION)" ]
    [ "$(nb_key fast.nbs STILL_SPECTRUM)" = "$(nb_key double.nbs STILL_SPECTRUM)" ]
    [ "$(nb_key fast.nbs MAX_I_X)" = "$(nb_key double.nbs MAX_I_X)" ]
    [ "$(nb_key fast.nbs MAX_I_Y)" = "$(nb_key double.nbs MAX_I_Y)" ]
    approx "$(nb_key fast.nbs MAX_I)" "$(nb_key double.nbs MAX_I)" 1e-3
}

@test "stills: another seed gives other orientations, the same seed the same" {
    nb-geom $STILLS -misset_seed 5 -o a.nbs
    nb-geom $STILLS -misset_seed 5 -o b.nbs
    nb-geom $STILLS -misset_seed 6 -o c.nbs
    nb-sim -q --frames 1:1 a.nbs -o a1.nbs
    nb-sim -q --frames 1:1 b.nbs -o b1.nbs
    nb-sim -q --frames 1:1 c.nbs -o c1.nbs
    [ -n "$(nb_key a1.nbs STILL_ROTATION)" ]
    [ "$(nb_key a1.nbs STILL_ROTATION)" = "$(nb_key b1.nbs STILL_ROTATION)" ]
    [ "$(nb_key a1.nbs STILL_ROTATION)" != "$(nb_key c1.nbs STILL_ROTATION)" ]
}

@test "stills: truth.jsonl holds one object per frame with the shot the IMAGE record says" {
    nb-geom $STILLS -misset_seed 5 -o plan.nbs
    nb-sim -q plan.nbs -o img.nbs
    nb-convert -q -o truth.jsonl img.nbs
    [ "$(wc -l < truth.jsonl)" = 12 ]
    for i in 1 5 12; do
        fl=$(nb_key img.nbs STILL_FLUENCE "$i")
        na=$(nb_key img.nbs STILL_NA "$i")
        "$PY" - "$i" "$fl" "$na" <<'PY'
import json, sys
i, fl, na = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
o = [json.loads(l) for l in open("truth.jsonl")][i - 1]
assert o["frame"] == i and o["kind"] == "still", o["frame"]
assert o["fluence"] == fl, (o["fluence"], fl)
assert o["N"] == [na, na, na] and 6 <= na <= 12, (o["N"], na)
assert len(o["spectrum"]) == 4 and abs(sum(w for _, w in o["spectrum"]) - 1) < 1e-9, o["spectrum"]
assert all(abs(l - 1) < 0.02 for l, _ in o["spectrum"]), o["spectrum"]
assert len(o["reflections"]) > 0
PY
    done
}

@test "stills: with --truth-min-photons 0 the reflections hold every photon of the image" {
    nb-geom $STILLS -misset_seed 5 -nframes 2 -o plan.nbs
    nb-sim -q plan.nbs | nb-convert -q -o img_#.bin -o truth.jsonl --truth-min-photons 0
    "$PY" - <<'PY'
import json, struct
for line in open("truth.jsonl"):
    o = json.loads(line)
    data = open("img_%d.bin" % o["frame"], "rb").read()
    total = sum(struct.unpack("<%df" % (len(data) // 4), data))
    got = sum(r[6] for r in o["reflections"])
    assert abs(got - total) <= 1e-6 * total, (o["frame"], got, total)
    for r in o["reflections"]:
        assert 0 < r[4] < 96 and 0 < r[5] < 96, r
PY
}

@test "stills: the truth of a curved detector is refused and leaves no file" {
    nb-geom $SMALL -curved_det -o plan.nbs
    nb-sim -q plan.nbs -o img.nbs
    run nb-convert -o truth.jsonl img.nbs
    expect_status 1
    expect_has "curved detector"
    [ ! -e truth.jsonl ]
    no_files_but plan.nbs img.nbs
}

@test "stills: derivatives of stills with a per-shot spectrum are rendered with each shot's spikes" {
    nb-geom $STILLS -misset_seed 5 -o plan.nbs
    run -0 nb-sim -q --grad distance,lambda plan.nbs -o out.nbs
    [ "$(grep -a -c '^GRAD_OF=lambda' out.nbs)" -eq 12 ] || false
}

@test "stills: 90 % of the spots dials.find_spots finds on 12 stills lie within 1.5 px of the truth's reflections" {
    need_dials
    # the round crystal shape: the square shape's side maxima are spots of
    # their own, away from their reflection's photon centroid (docs/physics.md 16.3)
    nb-geom -cell 78 78 37 90 90 90 -detpixels 384 -pixel 0.172 -distance 120 -lambda 1 -default_F 100 \
        -round_xtal -mosaic 0.2 -mosaic_domains 3 -nframes 12 -stills -stills_bandwidth 0.3 -stills_spikes 5 \
        -stills_N 8:14 -stills_fluence 1e29:3e29 -misset_seed 42 -q |
        nb-sim -q | nb-noise -q -seed 5 | nb-convert -q -o still_###.cbf -o truth.jsonl
    dials.import still_*.cbf output.experiments=imported.expt >import.log 2>&1 || { tail -20 import.log; return 1; }
    dials.find_spots imported.expt nproc=2 spotfinder.threshold.dispersion.global_threshold=20 >find.log 2>&1 ||
        { tail -20 find.log; return 1; }
    "$PY" - <<'PY'
import json, math
from dials.array_family import flex
from dxtbx.model.experiment_list import ExperimentListFactory
el = ExperimentListFactory.from_json_file("imported.expt", check_format=False)
assert len(el) == 12, "12 stills expected, got %d experiments" % len(el)
truth = {}
for line in open("truth.jsonl"):
    o = json.loads(line)
    truth[o["frame"]] = o["reflections"]
assert sorted(truth) == list(range(1, 13)), sorted(truth)
refl = flex.reflection_table.from_file("strong.refl")
xyz, ids, panel = refl["xyzobs.px.value"], refl["id"], refl["panel"]
near = 0
for i in range(len(refl)):
    iset = el[ids[i]].imageset
    path = iset.get_path(iset.indices()[0]) if len(iset.indices()) == 1 else iset.get_path(ids[i])
    frame = int(path[-7:-4])
    x, y = xyz[i][0], xyz[i][1]
    d = min((math.hypot(r[4] - x, r[5] - y) for r in truth[frame] if r[3] == panel[i]), default=1e9)
    near += d <= 1.5
share = near / len(refl)
print("%d of %d spots within 1.5 px of a reflection of their frame (%.1f %%)" % (near, len(refl), 100 * share))
assert len(refl) > 100, len(refl)
assert share >= 0.9, share
PY
}

@test "stills: a rotation frame's A in truth.jsonl is model.expt's crystal turned to mid-frame" {
    need_dials
    nb-geom -cell 50 60 70 80 95 100 -misset 10 20 30 -detpixels 64 -pixel 0.2 -distance 80 -lambda 1 -N 5 \
        -default_F 100 -phi 5 -osc 2 -nframes 4 -q | nb-sim -q | nb-convert -q -o truth.jsonl -o model.expt
    "$PY" - <<'PY'
import json
from scitbx import matrix
from dxtbx.model.experiment_list import ExperimentListFactory
e = ExperimentListFactory.from_json_file("model.expt", check_format=False)[0]
A0 = matrix.sqr(e.crystal.get_A())
axis = matrix.col(e.goniometer.get_rotation_axis())
start, osc = e.scan.get_oscillation()
rows = [json.loads(l) for l in open("truth.jsonl")]
assert [o["frame"] for o in rows] == [1, 2, 3, 4]
for o in rows:
    phi = start + (o["frame"] - 0.5) * osc
    assert abs(o["phi_deg"] - phi) < 1e-9, (o["phi_deg"], phi)
    A = axis.axis_and_angle_as_r3_rotation_matrix(phi, deg=True) * A0
    worst = max(abs(a - b) for a, b in zip(A.elems, o["A"]))
    assert worst < 1e-9 * max(abs(a) for a in A.elems), (o["frame"], worst)
print("A of 4 frames within 1e-9 of model.expt's")
PY
}

@test "stills: each shot's wavelength (its spectrum's mean) is in its CBF header and in the NXmx file, as dxtbx reads them" {
    need_dials
    nb-geom $STILLS -misset_seed 5 -nframes 4 -q | nb-sim -q | nb-noise -q -seed 3 |
        nb-convert -q -o shot_#.cbf -o truth.jsonl -o stills.nxs 2>nxs.err || true
    if [ ! -s stills.nxs ] && grep -q libhdf5 nxs.err; then skip "this build or system has no libhdf5: $(cat nxs.err)"; fi
    [ -s stills.nxs ] || { cat nxs.err; return 1; }
    "$PY" - <<'PY'
import json
from dxtbx.format.FormatNXmx import FormatNXmx
from dxtbx.model.experiment_list import ExperimentListFactory
rows = [json.loads(l) for l in open("truth.jsonl")]
nxs = FormatNXmx("stills.nxs")
means = []
for o in rows:
    spec = o["spectrum"]
    mean = sum(l * w for l, w in spec) / sum(w for _, w in spec)
    means.append(mean)
    cbf = ExperimentListFactory.from_filenames(["shot_%d.cbf" % o["frame"]])[0].beam.get_wavelength()
    assert abs(cbf - mean) < 1e-6, (o["frame"], cbf, mean)
    got = nxs.get_beam(o["frame"] - 1).get_wavelength()
    assert abs(got - mean) < 1e-9, (o["frame"], got, mean)
assert max(means) - min(means) > 1e-5, means  # the shots' spectra differ
print("4 shots' wavelengths:", means)
PY
}

#!/usr/bin/env bats
# End to end with DIALS: a 30-frame rotation sweep (cell 78 78 37, a misset,
# 512^2 pixels of 0.172 mm at 150 mm, 1 A, N = 10, 1-degree frames of 4 phi
# steps, mosaic 0.2 degrees x 5 domains, noise) goes through dials.import as
# one sweep, dials.find_spots and dials.index, which must recover the cell
# within 0.5 %; the XDS.INP and CrystFEL .geom sidecars describe the same
# geometry as dxtbx reads from the images.  The sweep is made once
# (setup_file) and shared by the tests.

load helper

PY=${NB_TEST_PYTHON:-/usr/bin/python3}

setup_file() {
    export SWEEP_DIR="$BATS_FILE_TMPDIR/sweep"
    mkdir -p "$SWEEP_DIR"
    command -v dials.import >/dev/null 2>&1 || return 0
    cd "$SWEEP_DIR" || return 1
    PATH="$NB_BIN:$PATH"
    nb-geom -cell 78 78 37 90 90 90 -misset 10 20 30 -detpixels 512 -pixel 0.172 -distance 150 -lambda 1 \
        -N 10 -default_F 100 -osc 1 -phisteps 4 -mosaic 0.2 -mosaic_domains 5 -nframes 30 -q |
        nb-sim -q | nb-noise -q | nb-convert -q -o sweep_###.cbf -o XDS.INP -o sweep.geom
}

need_dials() {
    command -v dials.import >/dev/null 2>&1 || skip "DIALS is not installed (dials.import)"
    "$PY" -c 'import dxtbx' 2>/dev/null || skip "dxtbx is not importable by $PY"
}

@test "dials: the 30 frames are written, numbered 001..030" {
    need_dials
    for i in $(seq -f %03g 1 30); do [ -s "$SWEEP_DIR/sweep_$i.cbf" ] || { echo "no sweep_$i.cbf"; return 1; }; done
    [ ! -e "$SWEEP_DIR/sweep_000.cbf" ]
    [ ! -e "$SWEEP_DIR/sweep_031.cbf" ]
}

@test "dials: import, find_spots and index the sweep; the cell comes back within 0.5 %" {
    need_dials
    skip_dials_processing_if_sanitized
    cd "$SWEEP_DIR"
    dials.import sweep_*.cbf output.experiments=imported.expt >import.log 2>&1 || { tail -20 import.log; return 1; }
    "$PY" - <<'PY'
from dxtbx.model.experiment_list import ExperimentListFactory
el = ExperimentListFactory.from_json_file("imported.expt", check_format=False)
assert len(el.imagesets()) == 1, "one sweep expected, got %d image sets" % len(el.imagesets())
scan = el[0].scan
assert scan.get_image_range() == (1, 30), scan.get_image_range()
osc = scan.get_oscillation()
assert abs(osc[0]) < 1e-6 and abs(osc[1] - 1.0) < 1e-6, osc
beam = el[0].beam
assert abs(beam.get_wavelength() - 1.0) < 1e-6, beam.get_wavelength()
PY
    # the CBF counts from 0 and the images have no background: a global threshold keeps the
    # spots' faint tails, which would join the dense spots into blobs, out
    dials.find_spots imported.expt nproc=2 spotfinder.threshold.dispersion.global_threshold=20 >find.log 2>&1 ||
        { tail -20 find.log; return 1; }
    dials.index imported.expt strong.refl >index.log 2>&1 || { tail -30 index.log; return 1; }
    "$PY" - <<'PY'
from dxtbx.model.experiment_list import ExperimentListFactory
el = ExperimentListFactory.from_json_file("indexed.expt", check_format=False)
p = el[0].crystal.get_unit_cell().parameters()
got = sorted(p[:3])
want = [37.0, 78.0, 78.0]
for g, w in zip(got, want):
    assert abs(g - w) / w < 0.005, ("cell", p)
for a in p[3:]:
    assert abs(a - 90.0) / 90.0 < 0.005, ("angles", p)
print("indexed cell", " ".join("%.3f" % x for x in p))
PY
    grep -A6 "RMSDs by experiment" index.log | tail -1
}

@test "dials: XDS.INP agrees with the geometry dxtbx reads from the images (its own XDS conversion)" {
    need_dials
    cd "$SWEEP_DIR"
    [ -s imported.expt ] || dials.import sweep_*.cbf output.experiments=imported.expt >/dev/null 2>&1
    grep -q "^NAME_TEMPLATE_OF_DATA_FRAMES= sweep_???.cbf$" XDS.INP
    grep -q "^DATA_RANGE= 1 30$" XDS.INP
    grep -q "^DETECTOR= PILATUS" XDS.INP
    "$PY" - <<'PY'
import math
from dxtbx.model.experiment_list import ExperimentListFactory
from dxtbx.serialize.xds import to_xds
inp = {}
for line in open("XDS.INP"):
    line = line.split("!")[0]
    # several KEY= value pairs may share a line
    parts = line.replace("=", "= ").split()
    key = None
    for tok in parts:
        if tok.endswith("="):
            key = tok[:-1]
            inp[key] = []
        elif key:
            inp[key].append(tok)
num = lambda k: [float(x) for x in inp[k]]
x = to_xds(ExperimentListFactory.from_json_file("imported.expt").imagesets()[0])
def close(a, b, tol, what):
    assert abs(a - b) <= tol, (what, a, b)
close(num("ORGX")[0], x.detector_origin[0], 0.01, "ORGX")
close(num("ORGY")[0], x.detector_origin[1], 0.01, "ORGY")
close(num("DETECTOR_DISTANCE")[0], x.detector_distance, 0.001, "distance")
close(num("OSCILLATION_RANGE")[0], x.oscillation_range, 1e-6, "oscillation")
close(num("STARTING_ANGLE")[0], x.starting_angle, 1e-6, "starting angle")
close(num("X-RAY_WAVELENGTH")[0], x.wavelength, 1e-6, "wavelength")
assert [int(v) for v in (inp["NX"][0], inp["NY"][0])] == list(x.detector_size), "NX NY"
close(num("QX")[0], x.pixel_size[0], 1e-6, "QX")
# the frames differ by a rotation: compare the angles between the vectors
def unit(v):
    n = math.sqrt(sum(c * c for c in v)); return [c / n for c in v]
ours = {k: unit(num(k)) for k in ("INCIDENT_BEAM_DIRECTION", "ROTATION_AXIS", "DIRECTION_OF_DETECTOR_X-AXIS", "DIRECTION_OF_DETECTOR_Y-AXIS")}
theirs = {"INCIDENT_BEAM_DIRECTION": unit(x.beam_vector), "ROTATION_AXIS": unit(x.rotation_axis),
          "DIRECTION_OF_DETECTOR_X-AXIS": unit(x.detector_x_axis), "DIRECTION_OF_DETECTOR_Y-AXIS": unit(x.detector_y_axis)}
dot = lambda a, b: sum(p * q for p, q in zip(a, b))
keys = sorted(ours)
for i in range(len(keys)):
    for j in range(i + 1, len(keys)):
        close(dot(ours[keys[i]], ours[keys[j]]), dot(theirs[keys[i]], theirs[keys[j]]), 1e-5, (keys[i], keys[j]))
# and the handedness: (x-axis cross y-axis) . beam
cross = lambda a, b: [a[1]*b[2]-a[2]*b[1], a[2]*b[0]-a[0]*b[2], a[0]*b[1]-a[1]*b[0]]
close(dot(cross(ours["DIRECTION_OF_DETECTOR_X-AXIS"], ours["DIRECTION_OF_DETECTOR_Y-AXIS"]), ours["ROTATION_AXIS"]),
      dot(cross(theirs["DIRECTION_OF_DETECTOR_X-AXIS"], theirs["DIRECTION_OF_DETECTOR_Y-AXIS"]), theirs["ROTATION_AXIS"]), 1e-5, "handedness")
print("XDS.INP: ORGX %s ORGY %s DISTANCE %s as dxtbx" % (inp["ORGX"][0], inp["ORGY"][0], inp["DETECTOR_DISTANCE"][0]))
PY
}

@test "dials: the CrystFEL .geom puts the direct beam where the plan does" {
    need_dials
    cd "$SWEEP_DIR"
    nb-geom -cell 78 78 37 90 90 90 -detpixels 512 -pixel 0.172 -distance 150 -lambda 1 -default_F 1 -o plan.nbs -q
    "$PY" - "$(plan_key plan.nbs FBEAM)" "$(plan_key plan.nbs SBEAM)" <<'PY'
import re, sys
fbeam, sbeam = float(sys.argv[1]), float(sys.argv[2])
g = {}
for line in open("sweep.geom"):
    line = line.split(";")[0].strip()
    if "=" in line:
        k, v = [t.strip() for t in line.split("=", 1)]
        g[k] = v
vec = lambda s: [float(re.search(r"([+-][0-9.]+)" + a, s).group(1)) for a in "xyz"]
fs, ss = vec(g["p0/fs"]), vec(g["p0/ss"])
cx, cy, res = float(g["p0/corner_x"]), float(g["p0/corner_y"]), float(g["res"])
# the beam (x = y = 0) meets the panel at corner + a fs + b ss (pixels)
det = fs[0] * ss[1] - fs[1] * ss[0]
a = (-cx * ss[1] + cy * ss[0]) / det
b = (-fs[0] * cy + fs[1] * cx) / det
assert abs(a / res - fbeam) < 1e-6 and abs(b / res - sbeam) < 1e-6, (a / res, fbeam, b / res, sbeam)
assert abs(float(g["p0/clen"]) - 0.150) < 1e-9, g["p0/clen"]
assert abs(float(g["photon_energy"]) - 12398.42) < 0.01, g["photon_energy"]
print("geom: beam at fast %.3f, slow %.3f pixels" % (a, b))
PY
}

#!/usr/bin/env bats
# End to end with DIALS: a 30-frame rotation sweep (cell 78 78 37, a misset,
# 512^2 pixels of 0.172 mm at 150 mm, 1 A, N = 10, 1-degree frames of 4 phi
# steps, mosaic 0.2 degrees x 5 domains, noise) goes through dials.import as
# one sweep, dials.find_spots and dials.index, which must recover the cell
# within 0.5 %.  The sweep is made once (setup_file) and shared by the tests.

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
        nb-sim -q | nb-noise -q | nb-convert -q -o sweep_###.cbf
}

need_dials() {
    command -v dials.import >/dev/null 2>&1 || skip "DIALS is not installed (dials.import)"
    "$PY" -c 'import dxtbx' 2>/dev/null || skip "dxtbx is not importable by $PY"
}

@test "dials: the 30 frames are written, numbered 001..030" {
    need_dials
    for i in $(seq -f %03g 1 30); do [ -s "$SWEEP_DIR/sweep_$i.cbf" ] || { echo "no sweep_$i.cbf"; return 1; }; done
    [ ! -e "$SWEEP_DIR/sweep_000.cbf" ] && [ ! -e "$SWEEP_DIR/sweep_031.cbf" ]
}

@test "dials: import, find_spots and index the sweep; the cell comes back within 0.5 %" {
    need_dials
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
    dials.find_spots imported.expt nproc=2 >find.log 2>&1 || { tail -20 find.log; return 1; }
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

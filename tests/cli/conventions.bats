#!/usr/bin/env bats
# One beam-centre convention (docs/physics.md 2.6): what nb-convert writes, nb-geom -img
# and dxtbx read back as the geometry nb-sim rendered; CBF counts from 0 with the
# simulation's polarization; nb-convert --import of CBF and TIFF; and -o model.expt, the
# simulated truth, against DIALS's indexing of a 30-frame sweep.  DIALS steps skip without
# DIALS.

load helper

PY=${NB_TEST_PYTHON:-/usr/bin/python3}
# off-centre beam on a detector that is not square, so swapped or mirrored axes show
GEOM="-cell 78 78 37 90 90 90 -N 10 -default_F 100 -lambda 1 -distance 150 -pixel 0.172 \
      -detpixels_f 96 -detpixels_s 64 -Xbeam 7.5 -Ybeam 6.1"

need_dials() {
    command -v dials.import >/dev/null 2>&1 || skip "DIALS is not installed (dials.import)"
    "$PY" -c 'import dxtbx, numpy' 2>/dev/null || skip "dxtbx and numpy are not importable by $PY"
}

# the difference in pixels between two beam positions given in metres
px_diff() {
    awk -v a="$1" -v b="$2" -v p="$3" 'BEGIN { d = (a - b) / p; if (d < 0) d = -d; printf "%.6f\n", d }'
}

within_millipixel() {
    local d
    d=$(px_diff "$1" "$2" "$3")
    echo "$4: $d pixel"
    awk -v d="$d" 'BEGIN { exit !(d < 0.001) }'
}

@test "SMV: nb-geom -img reads the beam of nb-convert's SMV back as rendered, under every convention" {
    local c px
    for c in -mosflm -denzo -adxv -xds -dials; do
        nb-geom $GEOM $c -q -o plan.nbs
        nb-sim -q plan.nbs | nb-convert -o x_0001.img
        nb-geom -img x_0001.img $c -cell 78 78 37 90 90 90 -default_F 1 -q -o back.nbs
        px=$(plan_key plan.nbs PIXEL_SIZE)
        within_millipixel "$(plan_key back.nbs FBEAM)" "$(plan_key plan.nbs FBEAM)" "$px" "$c Fbeam"
        within_millipixel "$(plan_key back.nbs SBEAM)" "$(plan_key plan.nbs SBEAM)" "$px" "$c Sbeam"
        within_millipixel "$(plan_key back.nbs ORGX)" "$(plan_key plan.nbs ORGX)" 1 "$c ORGX"
    done
}

@test "SMV: the header says how its beam centre is written; a later -Xbeam still overrides it" {
    nb-geom $GEOM -q -o plan.nbs
    nb-sim -q plan.nbs | nb-convert -o x_0001.img
    grep -a -q '^BEAM_CENTER_CONVENTION=dxtbx;' x_0001.img
    nb-geom -img x_0001.img -Xbeam 3 -cell 78 78 37 90 90 90 -default_F 1 -q -o back.nbs
    approx "$(plan_key back.nbs XBEAM)" 0.003
    approx "$(plan_key back.nbs YBEAM)" "$(plan_key plan.nbs YBEAM)" 1e-6
}

@test "SMV --smv-beam reference: nanoBragg's header, read back under the convention it was written in" {
    nb-geom $GEOM -q -o plan.nbs
    nb-sim -q plan.nbs | nb-convert --smv-beam reference -o r_0001.img
    run ! grep -a -q 'BEAM_CENTER_CONVENTION' r_0001.img
    nb-geom -img r_0001.img -cell 78 78 37 90 90 90 -default_F 1 -q -o back.nbs
    local px
    px=$(plan_key plan.nbs PIXEL_SIZE)
    within_millipixel "$(plan_key back.nbs FBEAM)" "$(plan_key plan.nbs FBEAM)" "$px" "Fbeam"
    within_millipixel "$(plan_key back.nbs SBEAM)" "$(plan_key plan.nbs SBEAM)" "$px" "Sbeam"
}

@test "dxtbx reads the beam of nb-convert's SMV and CBF where nb-sim rendered it, and the XDS.INP origin" {
    need_dials
    local c
    for c in -mosflm -xds -dials; do
        nb-geom $GEOM $c -q -o plan.nbs
        nb-sim -q plan.nbs | nb-noise -q -seed 1 | nb-convert -o x_0001.img -o x_0001.cbf -o XDS.INP
        "$PY" - "$(plan_key plan.nbs FBEAM)" "$(plan_key plan.nbs SBEAM)" "$(plan_key plan.nbs PIXEL_SIZE)" \
            "$(plan_key plan.nbs ORGX)" "$(plan_key plan.nbs ORGY)" "$c" <<'EOF'
import sys
from dxtbx.model.experiment_list import ExperimentListFactory
fb, sb, px, orgx, orgy = map(float, sys.argv[1:6])
want = (fb / px, sb / px)
for f in ("x_0001.img", "x_0001.cbf"):
    el = ExperimentListFactory.from_filenames([f])
    got = el[0].detector[0].get_beam_centre_px(el[0].beam.get_s0())
    d = max(abs(g - w) for g, w in zip(got, want))
    print(sys.argv[6], f, "beam", got, "rendered", want, "off by %.2e pixel" % d)
    assert d < 1e-3, d
line = [l for l in open("XDS.INP") if l.startswith("ORGX=")][0].split()
x, y = float(line[1]), float(line[3])
# XDS numbers pixel centres 1, 2, ...: its origin (the beam, on a detector square to it)
# is dxtbx's beam centre plus half a pixel
print("XDS.INP ORGX ORGY", x, y)
assert abs(x - (got[0] + 0.5)) < 1e-3 and abs(y - (got[1] + 0.5)) < 1e-3, (x, y, got)
assert abs(x - orgx) < 1e-3 and abs(y - orgy) < 1e-3, (x, y, orgx, orgy)
EOF
    done
}

@test "CBF: counts from 0 (dxtbx's raw data less its pedestal = the counts less their ADC offset), the simulation's polarization, frames from 1" {
    need_dials
    nb-geom $GEOM -nframes 2 -osc 1 -q -o plan.nbs
    nb-sim -q plan.nbs | nb-noise -q -seed 5 -o noisy.nbs
    nb-convert -o s_##.cbf -o m.expt noisy.nbs
    grep -a -q '^# Polarization 0.5000' s_01.cbf
    grep -a -q '^# Software: nb toolkit .*, frame 1' s_01.cbf
    grep -a -q '^# Software: nb toolkit .*, frame 2' s_02.cbf
    grep -a -q '^# Count_cutoff 65495 counts' s_01.cbf
    "$PY" - <<'EOF'
import struct
import numpy as np
from dxtbx.model.experiment_list import ExperimentListFactory
b = open("noisy.nbs", "rb").read()
o, counts = 0, []
while o < len(b):
    typ = b[o + 12:o + 20].rstrip(b"\0").decode()
    h, = struct.unpack_from("<I", b, o + 20)
    p, = struct.unpack_from("<Q", b, o + 24)
    keys = dict(l.split("=", 1) for l in b[o + 32:o + 32 + h].decode().splitlines() if "=" in l)
    if typ == "IMAGE":
        dt, n, off = keys["ARRAY.counts"].split()
        c = np.frombuffer(b[o + 32 + h:o + 32 + h + p], "<i4", int(n), int(off)).reshape(64, 96)
        counts.append(c - float(keys["COUNTS_ADC"]))
    o += 36 + h + p
assert len(counts) == 2
el = ExperimentListFactory.from_filenames(["s_01.cbf", "s_02.cbf"])
d = el[0].detector[0]
for i in range(2):
    raw = el[0].imageset.get_raw_data(i)[0].as_numpy_array() - d.get_pedestal()
    assert np.array_equal(raw, counts[i]), "frame %d: raw - pedestal differs from the counts" % (i + 1)
print("pedestal", d.get_pedestal(), "trusted", d.get_trusted_range())
# the CBF's imgCIF categories carry the simulation's polarization (unpolarized: 0.5),
# as does the experiment list of the truth over the same files
assert el[0].beam.get_polarization_fraction() == 0.5, el[0].beam.get_polarization_fraction()
m = ExperimentListFactory.from_json_file("m.expt")
assert abs(m[0].beam.get_polarization_fraction() - 0.5) < 1e-12, m[0].beam.get_polarization_fraction()
raw = m[0].imageset.get_raw_data(1)[0].as_numpy_array() - m[0].detector[0].get_pedestal()
assert np.array_equal(raw, counts[1])
assert m[0].scan.get_image_range() == (1, 2), m[0].scan.get_image_range()
EOF
}

@test "CBF: dxtbx reads the simulation's polarization (-polar K: fraction 0.5 (1 + K); -nopolar: 0.5) and the geometry of model.expt" {
    need_dials
    local k want
    for k in 0 0.9 -nopolar; do
        if [ "$k" = -nopolar ]; then
            nb-geom $GEOM -osc 1 -nopolar -q -o plan.nbs
            want=0.500000
        else
            # a polarization vector off the lab axes, so the plane's normal is tested too
            nb-geom $GEOM -osc 1 -polar "$k" -polar_vector 0 0.6 0.8 -q -o plan.nbs
            want=$(awk -v k="$k" 'BEGIN { printf "%.6f", 0.5 * (1 + k) }')
        fi
        nb-sim -q plan.nbs | nb-convert -o p_0001.cbf -o m.expt -o XDS.INP
        grep -a -q "^_diffrn_radiation.polarizn_source_ratio $want" p_0001.cbf
        grep -a -q "^# Polarization ${want%00}" p_0001.cbf
        grep -q "^FRACTION_OF_POLARIZATION= ${want%00}" XDS.INP
        "$PY" - "$want" <<'EOF'
import sys
import numpy as np
from dxtbx.model.experiment_list import ExperimentListFactory
want = float(sys.argv[1])
el = ExperimentListFactory.from_filenames(["p_0001.cbf"])
m = ExperimentListFactory.from_json_file("m.expt", check_format=False)
b, t = el[0].beam, m[0].beam
print(el[0].imageset.get_format_class().__name__, "polarization", b.get_polarization_fraction(),
      "normal", b.get_polarization_normal(), "truth", t.get_polarization_fraction(), t.get_polarization_normal())
assert abs(b.get_polarization_fraction() - want) < 1e-9, b.get_polarization_fraction()
assert abs(t.get_polarization_fraction() - want) < 1e-9, t.get_polarization_fraction()
# the plane's normal, up to its sign
assert abs(abs(np.dot(b.get_polarization_normal(), t.get_polarization_normal())) - 1) < 1e-9
assert np.allclose(b.get_s0(), t.get_s0(), atol=1e-12)
d, e = el[0].detector[0], m[0].detector[0]
for f in ("get_origin", "get_fast_axis", "get_slow_axis", "get_pixel_size", "get_image_size", "get_trusted_range"):
    assert np.allclose(getattr(d, f)(), getattr(e, f)(), atol=1e-6), (f, getattr(d, f)(), getattr(e, f)())
assert np.allclose(el[0].goniometer.get_rotation_axis(), m[0].goniometer.get_rotation_axis(), atol=1e-9)
assert np.allclose(el[0].scan.get_oscillation(), m[0].scan.get_oscillation())
EOF
    done
}

@test "CBF of a sensor with a thickness: a miniCBF (dxtbx's parallax correction), and a warning how DIALS gets its polarization" {
    need_dials
    nb-geom $GEOM -osc 1 -detector_thick 450 -detector_abs 500 -q -o plan.nbs
    nb-sim -q plan.nbs -o img.nbs
    run_nb nb-convert -o t_0001.cbf img.nbs
    expect_status 0
    expect_has "'t_0001.cbf': with a sensor thickness the CBF is a miniCBF, from which DIALS takes polarization 0.999: give it 'dials.import ... polarization_fraction=0.5' or read -o model.expt"
    run ! grep -a -q '^_diffrn_radiation' t_0001.cbf
    dials.import t_0001.cbf polarization_fraction=0.5 output.experiments=t.expt >import.log 2>&1 || { tail -20 import.log; return 1; }
    "$PY" - <<'EOF'
from dxtbx.model.experiment_list import ExperimentListFactory
e = ExperimentListFactory.from_json_file("t.expt", check_format=False)[0]
s = type(e.detector[0].get_px_mm_strategy()).__name__
print(s, e.detector[0].get_thickness(), e.beam.get_polarization_fraction())
assert s == "ParallaxCorrectedPxMmStrategy" and abs(e.detector[0].get_thickness() - 0.45) < 1e-9
assert e.beam.get_polarization_fraction() == 0.5
EOF
}

@test "nb-convert --import reads back CBF, SMV and TIFF counts as written; refuses a PNG and a CBF that is not one, by name" {
    nb-geom $GEOM -q -o plan.nbs
    nb-sim -q plan.nbs | nb-noise -q -seed 3 -o noisy.nbs
    # TIFF where this nb-convert writes it (built with libtiff)
    local f files=(a.cbf a.img)
    if can_write_tiff; then files+=(a.tif); fi
    nb-convert -o a.png $(printf -- '-o %s ' "${files[@]}") noisy.nbs
    for f in "${files[@]}"; do
        nb-convert --import "$f" -o "in_$f.nbs" plan.nbs
        nb-convert -o "back_$f.bin" "in_$f.nbs"
    done
    # the same photons (counts less their offset), whatever the file they came from
    cmp back_a.cbf.bin back_a.img.bin
    if [ -e a.tif ]; then cmp back_a.tif.bin back_a.img.bin; fi
    [ "$(pixels back_a.cbf.bin | sort -g | tail -1)" != 0 ]
    [ "$(nb_key in_a.cbf.nbs COUNTS_ADC)" = 0 ]
    [ "$(nb_key in_a.img.nbs COUNTS_ADC)" = 40 ]
    run_nb nb-convert --import a.png plan.nbs
    expect_status 2
    expect_has "nb-convert: --import: cannot read 'a.png': PNG is a write-only format"
    # no magic bytes of any format: read as its name says (an nb stream named .cbf is read as a stream)
    printf 'neither a CBF nor raw floats' > fake.cbf
    run_nb nb-convert --import fake.cbf plan.nbs
    expect_status 1
    expect_has "'fake.cbf' is not a CBF file"
}

@test "model.expt: DIALS indexes a 30-frame CBF sweep to the orientation of the truth within 0.05 degrees, the cell within 0.1 %" {
    need_dials
    skip_dials_processing_if_sanitized
    # 20 phi steps a frame: nanoBragg samples each step at its start, so the images show the
    # crystal turned by half a step (0.025 degrees here) about the spindle (docs/physics.md 2.6)
    nb-geom -cell 78 78 37 90 90 90 -misset 10 20 30 -detpixels 512 -pixel 0.172 -distance 150 -lambda 1 \
        -N 10 -default_F 100 -osc 1 -phisteps 20 -nframes 30 -q |
        nb-sim -q | nb-noise -q | nb-convert -q -o sweep_###.cbf -o model.expt
    dials.import sweep_*.cbf output.experiments=imported.expt >import.log 2>&1 || { tail -20 import.log; return 1; }
    # the images have no background: a global threshold keeps the spots' faint tails out
    dials.find_spots imported.expt nproc=2 spotfinder.threshold.dispersion.global_threshold=20 >find.log 2>&1 ||
        { tail -20 find.log; return 1; }
    dials.index imported.expt strong.refl >index.log 2>&1 || { tail -30 index.log; return 1; }
    "$PY" - <<'EOF'
import numpy as np
from dxtbx.model.experiment_list import ExperimentListFactory as F
def basis(path):
    return np.array(F.from_json_file(path, check_format=False)[0].crystal.get_real_space_vectors())
A0, A1 = basis("model.expt"), basis("indexed.expt")
# DIALS's basis in the truth's: a whole-number matrix of determinant 1
M = np.rint(A1 @ np.linalg.inv(A0))
assert abs(np.linalg.det(M) - 1) < 1e-9, M
P = M @ A0
# the rotation taking the truth's vectors onto DIALS's (Kabsch)
U, S, Vt = np.linalg.svd(P.T @ A1)
R = Vt.T @ np.diag([1, 1, np.sign(np.linalg.det(Vt.T @ U.T))]) @ U.T
angle = np.degrees(np.arccos(np.clip((np.trace(R) - 1) / 2, -1, 1)))
cell = np.linalg.norm(A1, axis=1) / np.linalg.norm(P, axis=1) - 1
print("basis", M.astype(int).tolist(), "misorientation %.4f deg" % angle, "cell", cell * 100, "%")
assert angle < 0.05, angle
assert (abs(cell) < 0.001).all(), cell
EOF
}

@test "model.expt without images beside it: a model alone, which nb-geom -panels reads back as the same detector" {
    nb-geom $GEOM -osc 1 -nframes 3 -q -o plan.nbs
    nb-sim -q plan.nbs | nb-convert -o model.expt
    grep -q '"image_range": \[1, 3\]' model.expt
    grep -q '"polarization_fraction": 0.5' model.expt
    run ! grep -q '"template"' model.expt
    nb-geom -panels model.expt -cell 78 78 37 90 90 90 -lambda 1 -default_F 1 -q -o back.nbs
    approx "$(plan_key back.nbs PIX0)" "$(plan_key plan.nbs PIX0)" 1e-9
    approx "$(plan_key back.nbs FDET)" "$(plan_key plan.nbs FDET)" 1e-9
}

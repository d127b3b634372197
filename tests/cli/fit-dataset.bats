#!/usr/bin/env bats
# nb-fit's dataset fit (--refine-frame, --refine-F): per-frame and shared
# parameters over stills, a verdict per frame (exit 3), structure factors,
# nb-geom -expt as the start, mpirun.

load helper

# three stills of a P 21 21 21 crystal (small: seconds), and starts made by
# turning the crystal (in its own frame: -misset) and lengthening the cell
# 0.3 %
REST="-lambda 1 -distance 100 -pixel 0.4 -detpixels 192 -round_xtal -N 12 -fluence 1e27 -oversample 2 -default_F 100 -nframes 3 -stills -misset_seed 7"
TRUTH="-cell 34 52 53 90 90 90"
START="-cell 34.102 52.156 53.159 90 90 90 -misset 0.2 -0.15 0.1"
OBS="--observed still_1.cbf --observed still_2.cbf --observed still_3.cbf"

setup() {
    cd "$BATS_TEST_TMPDIR"
    nb-geom -q $TRUTH $REST | nb-sim -q | nb-noise -q -seed 3 | nb-convert -q -o still_#.cbf -o model.expt
    nb-geom -q $REST $START -o start.nbs
}

PY=/usr/bin/python3
EVALUATE="$NB_ROOT/bench/dataset/evaluate.py"
need_numpy() { "$PY" -c 'import numpy' 2>/dev/null || skip "$PY has no numpy (python3-numpy)"; }

# the value nb-fit printed for NAME
value() { awk -v n="$1" '$1 == n && $2 == "=" { print $3 }' fit.err; }
# |value/truth - 1| <= rel
within() { awk -v v="$(value "$1")" -v t="$2" -v r="$3" 'BEGIN { e = v / t - 1; if (e < 0) e = -e; exit !(v != "" && e <= r) }'; }

@test "fit-dataset: turns and a shared cell recovered from a 0.3 degree, 0.3 % start; status 0" {
    run -0 nb-fit $OBS --refine cell_a,cell_b,cell_c --refine-frame misset_x,misset_y,misset_z,scale -o fit.nbs start.nbs
    echo "$output" > fit.err
    echo "$output"
    within cell_a 34 0.0005
    within cell_b 52 0.0005
    within cell_c 53 0.0005
    [[ "$output" == *"3 frames fitted, 0 failed"* ]] || false
}

@test "fit-dataset: the refined experiments match the truth's crystals (evaluate.py)" {
    need_numpy
    nb-fit -q $OBS --refine cell_a,cell_b,cell_c --refine-frame misset_x,misset_y,misset_z,scale start.nbs |
        nb-convert -q -o fit.expt
    run -0 "$PY" "$EVALUATE" --json eval.json model.expt fit.expt
    echo "$output"
    "$PY" -c 'import json,sys; s=json.load(open("eval.json")); sys.exit(not (s["orientation_deg"]["max"] < 0.01 and s["cell_rel_max_abs"] < 5e-4))'
    # and the start was 0.27 degrees off
    nb-convert -q -o start.expt start.nbs
    run -0 "$PY" "$EVALUATE" --json start.json model.expt start.expt
    "$PY" -c 'import json,sys; s=json.load(open("start.json")); sys.exit(not s["orientation_deg"]["median"] > 0.25)'
}

@test "fit-dataset: frames whose image is another's fail, are named, exit 3, and the stream is whole" {
    run -3 nb-fit --observed still_2.cbf --observed still_1.cbf --observed still_3.cbf \
        --refine cell_a,cell_b,cell_c --refine-frame misset_x,misset_y,misset_z,scale -o fit.nbs start.nbs
    echo "$output"
    [[ "$output" == *"frame 1 failed:"* ]] || false
    [[ "$output" == *"frame 2 failed:"* ]] || false
    [[ "$output" != *"frame 3 failed"* ]] || false
    [[ "$output" == *"3 frames fitted, 2 failed"* ]] || false
    # no ABORT: the refined plan renders and converts
    run -0 nb-convert -q -o fit.expt fit.nbs
    run -0 nb-sim -q -o fit-image.nbs fit.nbs
}

@test "fit-dataset: nb-geom -expt is a start, and nb-convert -o fit.expt writes one experiment per frame" {
    need_numpy
    "$PY" "$NB_ROOT/bench/dataset/perturb.py" --angle 0.3 --cell-scale 1.003 --seed 4 -o start.expt model.expt
    nb-geom -q -expt start.expt -N 12 -round_xtal -fluence 1e27 -oversample 2 -default_F 100 -o expt-start.nbs
    run -0 nb-fit $OBS --refine cell_a,cell_b,cell_c --refine-frame misset_x,misset_y,misset_z,scale -o fit.nbs expt-start.nbs
    nb-convert -q -o fit.expt fit.nbs
    run -0 "$PY" "$EVALUATE" --json eval.json model.expt fit.expt
    echo "$output"
    "$PY" -c 'import json,sys; s=json.load(open("eval.json")); sys.exit(not (s["measured"] == 3 and s["orientation_deg"]["max"] < 0.01))'
}

@test "fit-dataset: a far start (3 degrees, 10 mm) is found by the global stage" {
    need_numpy
    "$PY" "$NB_ROOT/bench/dataset/perturb.py" --angle 3 --cell-scale 1.003 --distance 10 --seed 5 -o far.expt model.expt
    nb-geom -q -expt far.expt -N 12 -round_xtal -fluence 1e27 -oversample 2 -default_F 100 -o far.nbs
    run nb-fit $OBS --refine distance,cell_a,cell_b,cell_c --refine-frame misset_x,misset_y,misset_z,scale -o fit.nbs far.nbs
    echo "$output" > fit.err
    echo "$output"
    [ "$status" -eq 0 ] || [ "$status" -eq 3 ] || false
    nb-convert -q -o fit.expt fit.nbs
    run -0 "$PY" "$EVALUATE" --gate G2 --fit-log fit.err --fit-status "$status" model.expt fit.expt
    echo "$output"
}

@test "fit-dataset: --refine-F writes 'h k l F sigma multiplicity' that follow the true F" {
    need_numpy
    "$PY" "$NB_ROOT/bench/dataset/wilson_hkl.py" --cell 34 52 53 90 90 90 --dmin 2 --space-group P212121 --seed 2 \
        -o F.hkl --flat-out flat.hkl --asu-out F_asu.hkl
    nb-geom -q $TRUTH $REST -hkl F.hkl | nb-hkl -q | nb-sim -q | nb-noise -q -seed 4 | nb-convert -q -o wilson_#.cbf
    nb-geom -q $TRUTH $REST -hkl flat.hkl | nb-hkl -q -o flat.nbs
    run -0 nb-fit --observed wilson_1.cbf --observed wilson_2.cbf --observed wilson_3.cbf --refine-F \
        --refine-frame scale --space-group 'P 21 21 21' --F-out F_fit.hkl -o fit.nbs flat.nbs
    awk 'NF != 6 || $6 < 1 || $4 < 0 || $5 <= 0 { bad = 1 } END { exit bad || NR < 100 }' F_fit.hkl
    # the strong ones (multiplicity and F) correlate with the truth
    "$PY" - <<'EOF'
import numpy as np
t = {}
for line in open("F_asu.hkl"):
    if line.startswith("#"):
        continue
    h, k, l, F = line.split()[:4]
    t[(abs(int(h)), abs(int(k)), abs(int(l)))] = float(F)
a, b = [], []
for line in open("F_fit.hkl"):
    h, k, l, F, s, m = line.split()
    key = (abs(int(h)), abs(int(k)), abs(int(l)))
    if key in t and float(F) > 3 * float(s):
        a.append(float(F)); b.append(t[key])
cc = np.corrcoef(a, b)[0, 1]
print("CC", cc, "over", len(a))
assert len(a) > 50 and cc > 0.8
EOF
    # the refined F are the output's HKL record: it renders
    run -0 nb-sim -q -o /dev/null fit.nbs
}

@test "fit-dataset: names in the wrong list, unsupported names and counts are refused" {
    run -2 nb-fit $OBS --refine-frame distance start.nbs
    [[ "$output" == *"'distance' is the detector's, shared by every frame"* ]] || false
    run -2 nb-fit $OBS --refine misset_x --refine-frame scale start.nbs
    [[ "$output" == *"'misset_x' is a frame's own"* ]] || false
    run -1 nb-fit $OBS --refine-frame mosaic start.nbs
    [[ "$output" == *"'mosaic' is not supported in a dataset fit"* ]] || false
    run -2 nb-fit $OBS --refine cell_a --refine-frame cell_a start.nbs
    [[ "$output" == *"named twice"* ]] || false
    run -2 nb-fit --observed still_1.cbf --refine-frame scale start.nbs
    [[ "$output" == *"3 frames to fit but 1 observed image given"* ]] || false
    run -2 nb-fit $OBS --frames 3:1 --refine-frame scale start.nbs
    [[ "$output" == *"option --frames 3:1: frames are numbered from 1 and A <= B"* ]] || false
}

@test "fit-dataset: --frames fits its frames alone; parts' experiments join (a Slurm array's)" {
    run -0 nb-fit --observed still_2.cbf --frames 2:2 --refine-frame misset_x,misset_y,misset_z,scale -o fit.nbs start.nbs
    [[ "$output" == *"1 frame fitted, 0 failed"* ]] || false
    nb-convert -q --frames 2:2 -o part_2.expt fit.nbs
    nb-fit -q --observed still_1.cbf --frames 1:1 --refine-frame misset_x,misset_y,misset_z,scale start.nbs |
        nb-convert -q --frames 1:1 -o part_1.expt
    nb-fit -q --observed still_3.cbf --frames 3:3 --refine-frame misset_x,misset_y,misset_z,scale start.nbs |
        nb-convert -q --frames 3:3 -o part_3.expt
    run -0 nb-convert -q --join 'part_*.expt' -o joined.expt
    [ "$(grep -c '"nb-frame-' joined.expt)" -eq 3 ] || false
    run -2 nb-convert -q --frames 2:4 -o too_far.expt fit.nbs
    [[ "$output" == *"the plan has 3 frames"* ]] || false
}

@test "fit-dataset: mpirun -n 2 gives one process's answer" {
    need_mpi
    nb-fit -q $OBS --refine cell_a,cell_b,cell_c --refine-frame misset_x,misset_y,misset_z,scale -o one.nbs start.nbs 2>one.err
    nb_mpirun 2 "$NB_BIN/nb-fit" -q $OBS --refine cell_a,cell_b,cell_c --refine-frame misset_x,misset_y,misset_z,scale \
        -o two.nbs start.nbs 2>two.err
    nb-convert -q -o one.expt one.nbs
    nb-convert -q -o two.expt two.nbs
    run -0 "$PY" "$EVALUATE" --compare one.expt two.expt --rtol 1e-6
    echo "$output"
}

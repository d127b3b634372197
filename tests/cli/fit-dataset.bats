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

# the three stills with Wilson F (seed 2): F.hkl, flat.hkl (the same indices
# at the rms F), F_asu.hkl, wilson_#.cbf and the truth's wilson.expt
wilson_stills() {
    "$PY" "$NB_ROOT/bench/dataset/wilson_hkl.py" --cell 34 52 53 90 90 90 --dmin 2 --space-group P212121 --seed 2 \
        -o F.hkl --flat-out flat.hkl --asu-out F_asu.hkl
    nb-geom -q $TRUTH $REST -hkl F.hkl | nb-hkl -q | nb-sim -q | nb-noise -q -seed 4 |
        nb-convert -q -o wilson_#.cbf -o wilson.expt
}

@test "fit-dataset: turns and a shared cell recovered from a 0.3 degree, 0.3 % start; status 0" {
    run -0 nb-fit $OBS --refine cell_a,cell_b,cell_c --refine-frame rot_x,rot_y,rot_z,scale -o fit.nbs start.nbs
    echo "$output" > fit.err
    echo "$output"
    within cell_a 34 0.0005
    within cell_b 52 0.0005
    within cell_c 53 0.0005
    [[ "$output" == *"3 frames fitted, 0 failed"* ]] || false
}

@test "fit-dataset: the refined experiments match the truth's crystals (evaluate.py)" {
    need_numpy
    nb-fit -q $OBS --refine cell_a,cell_b,cell_c --refine-frame rot_x,rot_y,rot_z,scale start.nbs |
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
        --refine cell_a,cell_b,cell_c --refine-frame rot_x,rot_y,rot_z,scale -o fit.nbs start.nbs
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
    run -0 nb-fit $OBS --refine cell_a,cell_b,cell_c --refine-frame rot_x,rot_y,rot_z,scale -o fit.nbs expt-start.nbs
    nb-convert -q -o fit.expt fit.nbs
    # the start list's identifiers kept through the plan and the fit
    "$PY" -c 'import json, sys
ids = [[e["identifier"] for e in json.load(open(f))["experiment"]] for f in sys.argv[1:]]
sys.exit(not (ids[0] == ids[1] and len(set(ids[0])) == 3 and all(ids[0])))' start.expt fit.expt
    run -0 "$PY" "$EVALUATE" --json eval.json model.expt fit.expt
    echo "$output"
    "$PY" -c 'import json,sys; s=json.load(open("eval.json")); sys.exit(not (s["measured"] == 3 and s["orientation_deg"]["max"] < 0.01))'
}

@test "fit-dataset: a far start (3 degrees, 10 mm) is found by the global stage" {
    need_numpy
    "$PY" "$NB_ROOT/bench/dataset/perturb.py" --angle 3 --cell-scale 1.003 --distance 10 --seed 5 -o far.expt model.expt
    nb-geom -q -expt far.expt -N 12 -round_xtal -fluence 1e27 -oversample 2 -default_F 100 -o far.nbs
    run nb-fit $OBS --refine distance,cell_a,cell_b,cell_c --refine-frame rot_x,rot_y,rot_z,scale -o fit.nbs far.nbs
    echo "$output" > fit.err
    echo "$output"
    [ "$status" -eq 0 ] || [ "$status" -eq 3 ] || false
    nb-convert -q -o fit.expt fit.nbs
    run -0 "$PY" "$EVALUATE" --gate G2 --fit-log fit.err --fit-status "$status" model.expt fit.expt
    echo "$output"
}

@test "fit-dataset: --refine-F writes 'h k l F sigma multiplicity' that follow the true F" {
    need_numpy
    wilson_stills
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

@test "fit-dataset: --refine-F from a plan without F starts flat at the level the pixels ask for; -v says once how each image is read" {
    # the truth's F are all 100: the flat start finds them within 2 %
    nb-geom -q $TRUTH ${REST/-default_F 100/} > noF.nbs
    run -0 nb-fit -v $OBS --refine-F --refine-frame scale --F-out F_fit.hkl -o fit.nbs noF.nbs
    local F
    F=$(echo "$output" | sed -n 's/^--refine-F: no structure factors in the plan: a flat start, F = //p')
    echo "flat start: F = $F"
    awk -v F="$F" 'BEGIN { exit !(F > 98 && F < 102) }' || false
    [[ "$output" == *"3 frames fitted, 0 failed"* ]] || false
    # the refined F follow: the median of those over 3 sigma within 5 % of 100
    awk '$4 > 3 * $5 { print $4 }' F_fit.hkl | sort -g |
        awk '{ v[NR] = $1 } END { m = v[int(NR / 2) + 1]; exit !(NR > 100 && m > 95 && m < 105) }' || false
    # each file read at every prediction of its regions, said once
    [ "$(echo "$output" | grep -c "'still_1.cbf' read as CBF")" -eq 1 ] || false
    [ "$(echo "$output" | grep -c "'still_3.cbf' read as CBF")" -eq 1 ] || false
    # the images missing are the errors they are with F
    run -2 nb-fit --refine-F -o none.nbs noF.nbs
    [[ "$output" == *"no observed image: give --observed FILE"* ]] || false
    run -2 nb-fit --refine-F --observed still_1.cbf -o none.nbs noF.nbs
    [[ "$output" == *"3 frames to fit but 1 observed image given"* ]] || false
    [ ! -e none.nbs ] || false
    # without --refine-F a plan without F is still an error that says so
    run -2 nb-fit $OBS --refine-frame scale -o nofit.nbs noF.nbs
    [[ "$output" == *"no structure factors"* ]] || false
    [ ! -e nofit.nbs ] || false
}

@test "fit-dataset: mpirun -n 2 starts --refine-F from the same flat F as one process" {
    need_mpi
    nb-geom -q $TRUTH ${REST/-default_F 100/} > noF.nbs
    nb-fit -v $OBS --refine-F --refine-frame scale -o one.nbs noF.nbs 2>one.err
    nb_mpirun 2 "$NB_BIN/nb-fit" -v $OBS --refine-F --refine-frame scale -o two.nbs noF.nbs 2>two.err
    local one two
    one=$(grep 'a flat start, F = ' one.err)
    two=$(grep 'a flat start, F = ' two.err)
    echo "one: $one; two: $two"
    [ -n "$one" ] || false
    [ "$one" = "$two" ] || false
}

@test "fit-dataset: --refine-F takes the experiment list's space group, writes MTZ, and reads one's symmetry" {
    need_numpy
    need_ccp4
    wilson_stills
    # the truth's list, its crystals stated in P 21 21 21 as DIALS writes it
    "$PY" -c 'import json; e = json.load(open("wilson.expt"))
for c in e["crystal"]: c["space_group_hall_symbol"] = " P 2ac 2ab"
json.dump(e, open("p212121.expt", "w"))'
    nb-geom -q -expt p212121.expt -N 12 -round_xtal -fluence 1e27 -oversample 2 -default_F 100 | nb-hkl -q -hkl flat.hkl -o start.nbs
    # the plan keeps it, and the list it writes back states it
    nb-convert -q -o back.expt start.nbs
    [ "$(grep -c '"space_group_hall_symbol": " P 2ac 2ab"' back.expt)" -eq 3 ] || false
    W="--observed wilson_1.cbf --observed wilson_2.cbf --observed wilson_3.cbf"
    run -0 nb-fit -v $W --refine-F --refine-frame scale --F-out F_fit.mtz -o fit.nbs start.nbs
    [[ "$output" == *"reflections of P 21 21 21 refined"* ]] || false
    # the refined experiments say so
    nb-convert -q -o fit.expt fit.nbs
    [ "$(grep -c '"space_group_hall_symbol": " P 2ac 2ab"' fit.expt)" -eq 3 ] || false
    # the same reflections as the text file (the fit is deterministic)
    run -0 nb-fit $W --refine-F --refine-frame scale --F-out F_fit.hkl -o fit2.nbs start.nbs
    [ "$(wc -l < F_fit.hkl)" -gt 100 ] || false
    # the MTZ file as the field's readers see it: CCP4's (nb-hkl) and cctbx's where DIALS is installed
    run -0 nb-hkl -v -hkl F_fit.mtz < start.nbs
    [[ "$output" == *"column F (F, amplitudes)"* ]] || false
    if "$PY" -c 'import iotbx.mtz' 2>/dev/null; then
        "$PY" -c 'import iotbx.mtz
m = iotbx.mtz.object("F_fit.mtz")
assert str(m.space_group_info()) == "P 21 21 21", m.space_group_info()
assert m.column_labels() == ["H", "K", "L", "F", "SIGF", "N"], m.column_labels()
a = [x for x in m.as_miller_arrays() if x.info().labels == ["F", "SIGF"]][0]
assert a.is_in_asu() and min(a.sigmas()) > 0
text = {}
for line in open("F_fit.hkl"):
    h, k, l, F, s, n = line.split()
    text[tuple(abs(int(i)) for i in (h, k, l))] = float(F)
mtz = {tuple(abs(i) for i in hkl): F for hkl, F in zip(a.indices(), a.data())}
assert set(mtz) == set(text), (len(mtz), len(text))
assert all(abs(mtz[k] - text[k]) <= 1e-4 * max(1.0, text[k]) for k in text)'
    fi
    # a plan of flags states no group: --space-group takes the MTZ file's, or a Hall symbol
    nb-geom -q $TRUTH $REST -hkl flat.hkl | nb-hkl -q -o flat.nbs
    run -0 nb-fit -v $W --refine-F --refine-frame scale --space-group F_fit.mtz -o fit3.nbs flat.nbs
    [[ "$output" == *"$(wc -l < F_fit.hkl) reflections of P 21 21 21 refined"* ]] || false
    run -0 nb-fit -v $W --refine-F --refine-frame scale --space-group ' P 2ac 2ab' -o fit4.nbs flat.nbs
    [[ "$output" == *"reflections of P 21 21 21 refined"* ]] || false
    run -0 nb-fit -v $W --refine-F --refine-frame scale -o fit5.nbs flat.nbs
    [[ "$output" == *"reflections of P 1 refined"* ]] || false
    run -2 nb-fit $W --refine-F --refine-frame scale --space-group F.hkl -o fit6.nbs flat.nbs
    [[ "$output" == *"--space-group 'F.hkl': a file, but not an MTZ file"* ]] || false
    [ ! -e fit6.nbs ] || false
    # crystals of two symmetries in one list are refused, naming them
    "$PY" -c 'import json; e = json.load(open("p212121.expt")); e["crystal"][1]["space_group_hall_symbol"] = " P 1"
json.dump(e, open("mixed.expt", "w"))'
    run -1 nb-geom -q -expt mixed.expt -N 12
    [[ "$output" == *"experiment 1's crystal is in space group ' P 1', experiment 0's in ' P 2ac 2ab'"* ]] || false
}

@test "fit-dataset: names in the wrong list, unsupported names and counts are refused" {
    run -2 nb-fit $OBS --refine-frame distance start.nbs
    [[ "$output" == *"'distance' is the detector's, shared by every frame"* ]] || false
    run -2 nb-fit $OBS --refine rot_x --refine-frame scale start.nbs
    [[ "$output" == *"'rot_x' is a frame's own"* ]] || false
    run -2 nb-fit $OBS --refine-frame misset_x,scale start.nbs
    [[ "$output" == *"a frame's own turn about the lab's x axis is rot_x"* ]] || false
    run -1 nb-fit $OBS --refine twotheta --refine-frame scale start.nbs
    [[ "$output" == *"'twotheta' is not supported in a dataset fit"* ]] || false
    run -2 nb-fit $OBS --refine-frame mosaic start.nbs
    [[ "$output" == *"mosaic: the plan has no mosaic domains to spread"* ]] || false
    run -2 nb-fit --observed 'still_#_#.cbf' --refine-frame scale start.nbs
    [[ "$output" == *"holds '#' in two places"* ]] || false
    run -1 nb-fit --observed 'still_##.cbf' --refine-frame scale start.nbs
    [[ "$output" == *"still_01.cbf"* ]] || false
    run -2 nb-fit $OBS --refine cell_a --refine-frame cell_a start.nbs
    [[ "$output" == *"named twice"* ]] || false
    run -2 nb-fit --observed still_1.cbf --refine-frame scale start.nbs
    [[ "$output" == *"3 frames to fit but 1 observed image given"* ]] || false
    run -2 nb-fit $OBS --frames 3:1 --refine-frame scale start.nbs
    [[ "$output" == *"option --frames 3:1: frames are numbered from 1 and A <= B"* ]] || false
    run -2 nb-fit $OBS --refine-frame scale --residual r.bin -o r.nbs start.nbs
    [[ "$output" == *"option --residual: a dataset fit writes no residual image"* ]] || false
    [ ! -e r.bin ] || false
    [ ! -e r.nbs ] || false
}

@test "fit-dataset: --frames fits its frames alone; parts' experiments join (a Slurm array's)" {
    run -0 nb-fit --observed still_2.cbf --frames 2:2 --refine-frame rot_x,rot_y,rot_z,scale -o fit.nbs start.nbs
    [[ "$output" == *"1 frame fitted, 0 failed"* ]] || false
    nb-convert -q --frames 2:2 -o part_2.expt fit.nbs
    nb-fit -q --observed still_1.cbf --frames 1:1 --refine-frame rot_x,rot_y,rot_z,scale start.nbs |
        nb-convert -q --frames 1:1 -o part_1.expt
    nb-fit -q --observed still_3.cbf --frames 3:3 --refine-frame rot_x,rot_y,rot_z,scale start.nbs |
        nb-convert -q --frames 3:3 -o part_3.expt
    run -0 nb-convert -q --join 'part_*.expt' -o joined.expt
    [ "$(grep -c '"nb_frame": ' joined.expt)" -eq 3 ] || false
    run -2 nb-convert -q --frames 2:4 -o too_far.expt fit.nbs
    [[ "$output" == *"the plan has 3 frames"* ]] || false
}

@test "fit-dataset: each frame's mosaic spread is found from half of it (the plan's domains scaled); the refined plan renders it" {
    local MOS="-lambda 1 -distance 100 -pixel 0.4 -detpixels 192 -round_xtal -N 12 -fluence 1e27 -oversample 2 -default_F 100 -nframes 3 -stills -mosaic_domains 10 -misset_seed 7"
    nb-geom -q $TRUTH -mosaic 0.6 $MOS | nb-sim -q -o truth.nbs
    nb-noise -q -seed 3 truth.nbs | nb-convert -q -o mos_#.cbf
    nb-geom -q $MOS $START -mosaic 0.3 -o mos-start.nbs
    run -0 nb-fit -v --observed 'mos_#.cbf' --refine cell_a,cell_b,cell_c \
        --refine-frame rot_x,rot_y,rot_z,mosaic,scale -o fit.nbs mos-start.nbs
    echo "$output" > fit.err
    [[ "$output" == *"3 frames fitted, 0 failed"* ]] || false
    within cell_a 34 0.0005
    within cell_c 53 0.0005
    # each frame's spread (its sigma about 0.0015 degrees)
    local spreads
    spreads=$(grep -o 'mosaic = [0-9.e-]*' fit.err | awk '{ print $3 }')
    echo "$spreads"
    [ "$(echo "$spreads" | wc -l)" -eq 3 ] || false
    for m in $spreads; do awk -v m="$m" 'BEGIN { exit !(m > 0.594 && m < 0.606) }' || false; done
    # the refined plan holds them and renders them: each frame's RMS photons
    # within 1.5 % of the truth's (the start's, at half the spread, 15 % off)
    LC_ALL=C grep -a -q frame_mosaic fit.nbs || false
    nb-sim -q -o fit-image.nbs fit.nbs
    nb-sim -q -o start-image.nbs mos-start.nbs
    for n in 1 2 3; do
        local t f s
        t=$(nb_key truth.nbs RMS $n) f=$(nb_key fit-image.nbs RMS $n) s=$(nb_key start-image.nbs RMS $n)
        echo "frame $n: RMS truth $t fit $f start $s"
        awk -v t="$t" -v f="$f" 'BEGIN { e = f / t - 1; exit !(e < 0.015 && e > -0.015) }' || false
        awk -v t="$t" -v s="$s" 'BEGIN { e = s / t - 1; exit !(e > 0.1 || e < -0.1) }' || false
    done
}

@test "fit-dataset: slurm-fit.sbatch's tasks (one --observed name with '#') keep their plans; their experiments join" {
    need_numpy
    for k in 1 2; do
        SLURM_ARRAY_TASK_ID=$k SLURM_ARRAY_TASK_MIN=1 SLURM_ARRAY_TASK_COUNT=2 NB="$NB_BIN" \
            REFINE=rot_x,rot_y,rot_z,cell_a,cell_b,cell_c,scale \
            bash "$NB_ROOT/pipelines/slurm-fit.sbatch" start.nbs parts --observed 'still_#.cbf'
    done
    run -0 nb-convert -q --join 'parts/fit_*.expt' -o joined.expt
    [ "$(grep -c '"nb_frame": ' joined.expt)" -eq 3 ] || false
    run -0 "$PY" "$EVALUATE" --json eval.json model.expt joined.expt
    echo "$output"
    "$PY" -c 'import json,sys; s=json.load(open("eval.json")); sys.exit(not (s["measured"] == 3 and s["orientation_deg"]["max"] < 0.01))'
    # each task's refined plan: its frames' values (task 2: frames 2 and 3)
    run -0 nb-sim -q --frames 2:3 -o part-image.nbs parts/fit_2.nbs
    # a task whose nb-fit fails leaves nothing, with nb-fit's status
    run -1 env SLURM_ARRAY_TASK_ID=1 SLURM_ARRAY_TASK_MIN=1 SLURM_ARRAY_TASK_COUNT=1 NB="$NB_BIN" \
        bash "$NB_ROOT/pipelines/slurm-fit.sbatch" start.nbs bad --observed 'nosuch_#.cbf'
    [[ "$output" == *"nosuch_1.cbf"* ]] || false
    [ ! -e bad/fit_1.nbs ] || false
    [ ! -e bad/fit_1.expt ] || false
}

@test "fit-dataset: --device cuda where there is no GPU fails, saying so, and writes nothing; auto fits on the CPU" {
    if nb-sim -q --device cuda -o /dev/null start.nbs 2>/dev/null; then
        skip "this machine has a GPU (gpu.bats fits on it)"
    fi
    run -1 nb-fit --device cuda $OBS --refine-frame scale -o gpu.nbs start.nbs
    # no device, or a build without the backend: either is named
    [[ "$output" == *"--device cuda: "*"CUDA"* ]] || false
    [ ! -e gpu.nbs ] || false
    run -0 nb-fit --device auto $OBS --refine-frame scale -o auto.nbs start.nbs
    [ -s auto.nbs ] || false
    run -2 nb-fit --device tpu $OBS --refine-frame scale start.nbs
    [[ "$output" == *"cpu, cuda or auto"* ]] || false
}

@test "fit-dataset: mpirun -n 2 gives one process's answer" {
    need_mpi
    nb-fit -q $OBS --refine cell_a,cell_b,cell_c --refine-frame rot_x,rot_y,rot_z,scale -o one.nbs start.nbs 2>one.err
    nb_mpirun 2 "$NB_BIN/nb-fit" -q $OBS --refine cell_a,cell_b,cell_c --refine-frame rot_x,rot_y,rot_z,scale \
        -o two.nbs start.nbs 2>two.err
    nb-convert -q -o one.expt one.nbs
    nb-convert -q -o two.expt two.nbs
    run -0 "$PY" "$EVALUATE" --compare one.expt two.expt --rtol 1e-6
    echo "$output"
}

@test "fit-dataset: the global stage keeps a start that is right (the truth's own list); every frame says so" {
    need_numpy
    nb-geom -q -expt model.expt -N 12 -round_xtal -fluence 1e27 -oversample 2 -default_F 100 -o truth-start.nbs
    run -0 nb-fit -v $OBS --refine-frame rot_x,rot_y,rot_z,cell_a,cell_b,cell_c,scale -o fit.nbs truth-start.nbs
    [ "$(echo "$output" | grep -c 'global stage: kept its start')" -eq 3 ] || false
    [[ "$output" == *"3 frames fitted, 0 failed"* ]] || false
    nb-convert -q -o fit.expt fit.nbs
    run -0 "$PY" "$EVALUATE" --json eval.json model.expt fit.expt
    echo "$output"
    "$PY" -c 'import json,sys; s=json.load(open("eval.json")); sys.exit(not (s["orientation_deg"]["max"] < 0.005 and s["cell_rel_max_abs"] < 2e-4))'
}

@test "fit-dataset: a faint still with nothing of its own refined feeds F; with its turns refined it is too few to judge" {
    # a hundred times fainter: no predicted spot of 10 photons
    FAINT="${REST/-fluence 1e27/-fluence 6e24}"
    nb-geom -q $TRUTH $FAINT -o faint.nbs
    nb-sim -q faint.nbs | nb-noise -q -seed 5 | nb-convert -q -o faint_#.cbf
    F_OBS="--observed faint_1.cbf --observed faint_2.cbf --observed faint_3.cbf"
    run -0 nb-fit $F_OBS --refine-F --refine-frame scale -o fitF.nbs faint.nbs
    echo "$output"
    [[ "$output" == *"3 frames fitted, 0 failed"* ]] || false
    run -3 nb-fit $F_OBS --refine-frame rot_x,rot_y,rot_z,scale -o fitT.nbs faint.nbs
    echo "$output"
    [ "$(echo "$output" | grep -c 'too few to judge its own values')" -eq 3 ] || false
}

@test "fit-dataset: a frame the model does not explain fails though the spots it predicts are in the image" {
    # the plan's crystals 7 degrees off the images' (nanoBragg reads -misset_seed's 7 and the next words as
    # -misset when three words follow it): a fit of the scales alone drives them towards 0, predicting
    # few spots, all of them where the image has some; the strong spots it does not predict fail it
    nb-geom -q $TRUTH $REST -o misread.nbs
    run -3 nb-fit $OBS --refine-frame scale -o fit.nbs misread.nbs
    echo "$output"
    [[ "$output" == *"3 frames fitted, 3 failed"* ]] || false
    [ "$(echo "$output" | grep -c 'of its 100 strongest observed spots')" -ge 2 ] || false
}

@test "fit-dataset: a fit stopped at --iterations says so for each frame without -v" {
    run -0 nb-fit $OBS --iterations 1 --refine-frame rot_x,rot_y,rot_z,scale -o fit.nbs start.nbs
    echo "$output"
    [ "$(echo "$output" | grep -c 'stopped at --iterations 1 before it converged')" -ge 1 ] || false
    run -0 nb-fit $OBS --refine-frame rot_x,rot_y,rot_z,scale -o fit.nbs start.nbs
    [[ "$output" != *"stopped at --iterations"* ]] || false
}

@test "fit-dataset: --refine-F with a shared cell: the MTZ states the refined cell, its history says which; a second run from the fit measures as many reflections" {
    need_numpy
    need_ccp4
    "$PY" -c 'import iotbx.mtz' 2>/dev/null || skip "cctbx (DIALS's python) is not installed: the MTZ's cell is read with iotbx.mtz"
    wilson_stills
    nb-hkl -q -hkl flat.hkl start.nbs > flat-start.nbs
    W="--observed wilson_1.cbf --observed wilson_2.cbf --observed wilson_3.cbf"
    run -0 nb-fit $W --refine-F --space-group P212121 --refine cell_a,cell_b,cell_c \
        --refine-frame rot_x,rot_y,rot_z,scale --F-out F_fit.mtz -o fit.nbs flat-start.nbs
    echo "$output" > fit.err
    echo "$output"
    "$PY" - "$(value cell_a)" "$(value cell_b)" "$(value cell_c)" <<'PY'
import sys, iotbx.mtz
m = iotbx.mtz.object("F_fit.mtz")
cell = m.crystals()[0].unit_cell().parameters()
want = [float(x) for x in sys.argv[1:4]]
print("MTZ cell", cell, "refined", want)
assert all(abs(c - w) < 1e-3 for c, w in zip(cell[:3], want)), (cell, want)
assert abs(cell[0] - 34.102) > 0.05  # not the start's
assert any("refined shared cell" in line for line in m.history()), list(m.history())
open("first.count", "w").write("%d\n" % m.n_reflections())
PY
    # the refined plan as a start: its F are refined, its regions are predicted with a flat F all the
    # same, so every reflection measured the first time is measured again
    run -0 nb-fit $W --refine-F --space-group P212121 --refine-frame scale --F-out again.hkl -o again.nbs fit.nbs
    local first again
    first=$(cat first.count) again=$(wc -l < again.hkl)
    echo "reflections: $first from the flat start, $again from the fit"
    [ "$first" -gt 100 ] || false
    [ "$again" -ge $((first * 98 / 100)) ] || false
}

@test "fit-dataset: mpirun -n 2 refines the stills' turns jointly with F as one process does" {
    need_mpi
    need_numpy
    wilson_stills
    nb-geom -q -expt wilson.expt -N 12 -round_xtal -fluence 1e27 -oversample 2 | nb-hkl -q -hkl flat.hkl -o flat-start.nbs
    W="--observed wilson_1.cbf --observed wilson_2.cbf --observed wilson_3.cbf"
    ARGS="--refine-F --space-group P212121 --refine-frame rot_x,rot_y,rot_z,scale"
    nb-fit -v $W $ARGS --F-out one.hkl -o one.nbs flat-start.nbs 2>one.err
    grep -q "joint refinement with F" one.err || { cat one.err; false; }
    nb_mpirun 2 "$NB_BIN/nb-fit" -q $W $ARGS --F-out two.hkl -o two.nbs flat-start.nbs 2>two.err
    nb-convert -q -o one.expt one.nbs
    nb-convert -q -o two.expt two.nbs
    run -0 "$PY" "$EVALUATE" --compare one.expt two.expt --rtol 1e-6 --compare-hkl one.hkl two.hkl
    echo "$output"
}

@test "fit-dataset: a still indexed in another setting of its lattice (a and b swapped, 0.6 % apart) takes the true one" {
    need_numpy
    "$PY" "$NB_ROOT/bench/dataset/wilson_hkl.py" --cell 50 50.3 70 90 90 90 --dmin 2 --space-group P212121 --seed 5 \
        -o F.hkl --flat-out flat.hkl --asu-out F_asu.hkl
    nb-geom -q -cell 50 50.3 70 90 90 90 -hkl F.hkl $REST | nb-hkl -q | nb-sim -q | nb-noise -q -seed 6 |
        nb-convert -q -o twin_#.cbf -o twin.expt
    # still 2 as an indexing could have it: a' = b, b' = a, c' = -c (determinant 1, the same cell to 0.6 %)
    "$PY" - <<'PY'
import json
e = json.load(open("twin.expt"))
x = e["crystal"][1]
x["real_space_a"], x["real_space_b"], x["real_space_c"] = x["real_space_b"], x["real_space_a"], [-v for v in x["real_space_c"]]
json.dump(e, open("twin-start.expt", "w"))
PY
    nb-geom -q -expt twin-start.expt -N 12 -round_xtal -fluence 1e27 -oversample 2 | nb-hkl -q -hkl F.hkl -o twin.nbs
    run -0 nb-fit -v --observed twin_1.cbf --observed twin_2.cbf --observed twin_3.cbf \
        --refine-frame rot_x,rot_y,rot_z,scale -o fit.nbs twin.nbs
    [ "$(echo "$output" | grep -c 'another setting of its lattice')" -eq 1 ] || false
    # (0 1 0 / 1 0 0 / 0 0 -1), or that with one of P 21 21 21's two-folds: the same image
    [[ "$output" == *"frame 2: another setting of its lattice ("* ]] || false
    nb-convert -q -o fit.expt fit.nbs
    run -0 "$PY" "$EVALUATE" --space-group P212121 --json eval.json twin.expt fit.expt
    echo "$output"
    "$PY" -c 'import json,sys; s=json.load(open("eval.json")); sys.exit(not s["orientation_deg"]["max"] < 0.01)'
    # with F flat nothing tells the settings apart: none is tried
    nb-geom -q -expt twin-start.expt -N 12 -round_xtal -fluence 1e27 -oversample 2 -default_F 100 -o flat.nbs
    run nb-fit -v --observed twin_1.cbf --observed twin_2.cbf --observed twin_3.cbf \
        --refine-frame rot_x,rot_y,rot_z,scale -o flatfit.nbs flat.nbs
    [[ "$output" != *"another setting"* ]] || false
}

#!/usr/bin/env bats
# A plan from a DIALS experiment list (nb-geom -expt FILE): a list of three
# stills and a sweep, both written by nb-convert -o model.expt, become plans
# whose model.expt (of the plan alone, and of its images) holds every number
# of the list again within 1e-9 relative; the stills' plan has a crystal per
# frame (FRAME_CRYSTALS) and renders each frame as the -stills plan it came
# from did (bit for bit in double precision, within 1e-6 relative on the
# fast path; the sweep's bit for bit); nb-sim --grad moves the plan the list made, for
# the flags it adds and refuses those it gives; flags that say what the list
# says are refused by name; malformed lists and lists of two detectors or
# beam directions are refused.  With dxtbx: it reads the lists back.

load helper

PY=${NB_TEST_PYTHON:-/usr/bin/python3}
DETECTOR="-distance 50 -detpixels 64 -pixel 0.2"
ADDED="-N 5 -default_F 100 -oversample 1"

# every number of list $1 in list $2, within 1e-9 of its vector's (or its own) size
same_lists() {
    "$PY" - "$1" "$2" <<'EOF'
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
bad = []
def num(x): return isinstance(x, (int, float)) and not isinstance(x, bool)
def cmp(x, y, path):
    if isinstance(x, dict):
        if not isinstance(y, dict): bad.append(path); return
        for k in x:
            if k not in y: bad.append(path + "/" + k)
            else: cmp(x[k], y[k], path + "/" + k)
    elif isinstance(x, list) and x and all(num(v) for v in x):
        s = max(abs(v) for v in x + y)
        if len(x) != len(y) or any(abs(u - v) > 1e-9 * s for u, v in zip(x, y)): bad.append(path)
    elif isinstance(x, list):
        if not isinstance(y, list) or len(x) != len(y): bad.append(path); return
        for i, (u, v) in enumerate(zip(x, y)): cmp(u, v, "%s[%d]" % (path, i))
    elif num(x):
        if not num(y) or abs(x - y) > 1e-9 * max(abs(x), abs(y)): bad.append(path)
    elif x != y: bad.append(path)
cmp(a, b, "")
# the numbers that matter are there
assert a["crystal"] and a["detector"][0]["panels"] and a["beam"], "an empty list"
print("differ:", bad[:5])
sys.exit(1 if bad else 0)
EOF
}

# the largest relative difference between the frames of two series of .bin images
max_rel() {
    "$PY" - "$@" <<'EOF'
import sys, numpy as np
worst = 0.0
n = len(sys.argv) // 2
for a, b in zip(sys.argv[1:1 + n], sys.argv[1 + n:]):
    x, y = np.fromfile(a, np.float32).astype(float), np.fromfile(b, np.float32).astype(float)
    assert x.size == 64 * 64 and x.max() > 0
    worst = max(worst, float(np.max(np.abs(x - y)) / x.max()))
print(worst)
EOF
}

stills_list() {
    nb-geom -q -stills -cell 70 80 90 90 95 90 -misset random -misset_seed 7 -lambda 1 $DETECTOR -nframes 3 \
        $ADDED -stills_N 4:6 -o stills.nbs
    nb-sim -q stills.nbs | nb-convert -q -o model.expt
}

sweep_list() {
    nb-geom -q -cell 70 80 90 90 95 90 -misset 10 20 30 -lambda 1.1 $DETECTOR -phi 10 -osc 1 -nframes 3 \
        $ADDED -o sweep.nbs
    nb-sim -q sweep.nbs | nb-convert -q -o sweep.expt
}

@test "expt: a list of stills becomes a plan of frame crystals whose model.expt is the list again" {
    "$PY" -c 'import json' 2>/dev/null || skip "$PY cannot import json"
    stills_list
    run_nb nb-geom -q -expt model.expt $ADDED
    expect_status 0
    mv stdout.bin plan.nbs
    [ "$(plan_key plan.nbs FRAME_CRYSTALS)" = 3 ] || false
    [ "$(plan_key plan.nbs NFRAMES)" = 3 ] || false
    [ "$(plan_key plan.nbs OSC)" = 0 ] || false
    nb-convert -q -o back.expt plan.nbs
    run same_lists model.expt back.expt
    expect_status 0
    # with the IMAGE records in the stream
    nb-hkl -q plan.nbs | nb-sim -q | nb-convert -q -o back2.expt
    run same_lists model.expt back2.expt
    expect_status 0
}

@test "expt: a sweep becomes a rotation series whose model.expt is the list again" {
    sweep_list
    nb-geom -q -expt sweep.expt $ADDED -o plan.nbs
    [ "$(plan_key plan.nbs NFRAMES)" = 3 ] || false
    run plan_key plan.nbs FRAME_CRYSTALS
    [ -z "$output" ] || false
    nb-convert -q -o back.expt plan.nbs
    run same_lists sweep.expt back.expt
    expect_status 0
    nb-hkl -q plan.nbs | nb-sim -q | nb-convert -q -o back2.expt
    run same_lists sweep.expt back2.expt
    expect_status 0
}

@test "expt: each frame renders as the plan the list came from" {
    "$PY" -c 'import numpy' 2>/dev/null || skip "numpy is not importable by $PY"
    stills_list
    sweep_list
    # stills of one N (the list gives no N: the plan from it takes -N for every frame)
    nb-geom -q -stills -cell 70 80 90 90 95 90 -misset random -misset_seed 7 -lambda 1 $DETECTOR -nframes 3 \
        $ADDED -o fixed.nbs
    nb-sim -q fixed.nbs | nb-convert -q -o fixed.expt
    nb-geom -q -expt fixed.expt $ADDED -o plan.nbs
    nb-sim -q -precision double fixed.nbs | nb-convert -q -o a_#.bin
    nb-sim -q -precision double plan.nbs | nb-convert -q -o b_#.bin
    run max_rel a_1.bin a_2.bin a_3.bin b_1.bin b_2.bin b_3.bin
    expect_status 0
    [ "$output" = 0.0 ] || false
    nb-sim -q fixed.nbs | nb-convert -q -o c_#.bin
    nb-sim -q plan.nbs | nb-convert -q -o d_#.bin
    run max_rel c_1.bin c_2.bin c_3.bin d_1.bin d_2.bin d_3.bin
    expect_status 0
    "$PY" -c "import sys; sys.exit(0 if float('$output') < 1e-6 else 1)"
    nb-geom -q -expt sweep.expt $ADDED -o splan.nbs
    nb-sim -q sweep.nbs | nb-convert -q -o e_#.bin
    nb-sim -q splan.nbs | nb-convert -q -o f_#.bin
    run max_rel e_1.bin e_2.bin e_3.bin f_1.bin f_2.bin f_3.bin
    expect_status 0
    [ "$output" = 0.0 ] || false
}

@test "expt: a frame's wavelength is its experiment's, in its sources and its headers" {
    stills_list
    "$PY" - <<'EOF'
import json
d = json.load(open("model.expt"))
d["beam"][1]["wavelength"] = 1.05
json.dump(d, open("twolambda.expt", "w"))
EOF
    nb-geom -q -expt twolambda.expt $ADDED -o plan.nbs
    nb-sim -q --frames 2:2 plan.nbs | nb-convert -q -o frame.img
    run grep -a -c '^WAVELENGTH=1.05;' frame.img
    [ "$output" = 1 ] || false
    nb-convert -q -o back.expt plan.nbs
    run same_lists twolambda.expt back.expt
    expect_status 0
}

@test "expt: nb-sim --grad moves the plan the list made: what the list gives as well as what flags add" {
    stills_list
    nb-geom -q -expt model.expt $ADDED -o plan.nbs
    run_nb nb-sim -q --frames 2:2 --grad Na,fluence,distance,misset_x,rot_y,cell_a,lambda plan.nbs
    expect_status 0
    [ "$(nb_key stdout.bin GRAD_OF 1)" = Na ] || false
    [ "$(nb_key stdout.bin GRAD_OF 4)" = misset_x ] || false
    [ "$(grep -a -c '^GRAD_OF=' stdout.bin)" -eq 7 ] || false
}

@test "expt: flags that say what the list says are refused by name" {
    stills_list
    run_nb nb-geom -expt model.expt -cell 70 80 90 90 90 90
    expect_status 2
    expect_has "nb-geom: -cell contradicts -expt: the experiment list gives the crystals"
    run_nb nb-geom -expt model.expt -lambda 1
    expect_status 2
    expect_has "-lambda contradicts -expt: the experiment list gives the beam"
    run_nb nb-geom -expt model.expt -distance 100
    expect_status 2
    expect_has "-distance contradicts -expt: the experiment list gives the detector"
    run_nb nb-geom -expt model.expt -panels model.expt
    expect_status 2
    expect_has "-panels contradicts -expt"
    run_nb nb-geom -expt model.expt -nframes 2
    expect_status 2
    expect_has "-nframes contradicts -expt: the experiment list gives the frames"
    run_nb nb-geom -expt model.expt -stills
    expect_status 2
    expect_has "-stills contradicts -expt"
    run_nb nb-geom -expt model.expt -xds
    expect_status 2
    expect_has "-xds contradicts -expt: the experiment list gives the laboratory frame"
    [ ! -s stdout.bin ] || false
}

@test "expt: malformed lists, other detectors or beams, several sweeps are refused" {
    stills_list
    sweep_list
    printf '{"experiment": [' > cut.expt
    run_nb nb-geom -expt cut.expt
    expect_status 1
    expect_has "'cut.expt': JSON error"
    printf '{"experiment": []}' > empty.expt
    run_nb nb-geom -expt empty.expt
    expect_status 1
    expect_has "no experiment in the list"
    "$PY" - <<'EOF'
import json
d = json.load(open("model.expt"))
det = json.loads(json.dumps(d["detector"][0]))
det["panels"][0]["origin"][2] = -60.0
d["detector"].append(det)
d["experiment"][2]["detector"] = 1
json.dump(d, open("twodet.expt", "w"))
d = json.load(open("model.expt"))
d["beam"][1]["direction"] = [0.01, 0, 0.99995]
json.dump(d, open("twobeam.expt", "w"))
d = json.load(open("model.expt"))
del d["crystal"][1]["real_space_b"]
json.dump(d, open("nob.expt", "w"))
s = json.load(open("sweep.expt"))
s["experiment"].append(dict(s["experiment"][0]))
json.dump(s, open("twosweeps.expt", "w"))
EOF
    run_nb nb-geom -expt twodet.expt
    expect_status 1
    expect_has "experiments 0 and 2 have other detectors"
    run_nb nb-geom -expt twobeam.expt
    expect_status 1
    expect_has "experiments 0 and 1 have beams of other directions"
    run_nb nb-geom -expt nob.expt
    expect_status 1
    expect_has "experiment 1 has no crystal with real_space_a"
    run_nb nb-geom -expt twosweeps.expt
    expect_status 1
    expect_has "-expt takes a list of stills or one sweep"
}

@test "expt: dxtbx reads the lists an -expt plan writes back" {
    "$PY" -c 'import dxtbx' 2>/dev/null || skip "dxtbx is not importable by $PY"
    stills_list
    sweep_list
    nb-geom -q -expt model.expt $ADDED | nb-convert -q -o back.expt
    nb-geom -q -expt sweep.expt $ADDED | nb-convert -q -o sback.expt
    run "$PY" -c '
from dxtbx.model.experiment_list import ExperimentListFactory as F
a = F.from_json_file("back.expt", check_format=False)
b = F.from_json_file("sback.expt", check_format=False)
assert len(a) == 3 and a[2].crystal is not None and len(b) == 1 and b[0].scan.get_num_images() == 3
print("ok", a[0].crystal.get_unit_cell().parameters())'
    expect_status 0
    expect_has "ok (70.0"
}

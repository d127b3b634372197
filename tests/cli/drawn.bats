#!/usr/bin/env bats
# The gates of issue 46 on drawn datasets (bench/dataset/, bench/README.md
# "Drawn datasets"): draw.py draws a dataset's shape from a seed, the same
# every time and within the issue's ranges; run-drawn.sh takes one small draw
# (seed 4, four stills of 576^2, P 2 2 2) from the seed to a near start's fit
# and its PASS; evaluate.py's gates near, far and dials judge what they should
# (a frame off but unreported is wrong, a failed one must come with exit 3,
# DIALS's unindexed stills are not recovered, a monoclinic crystal indexed as
# -a, b, -c is the same orientation); nb-geom -expt makes a plan of each kind
# of start (DIALS's where DIALS is installed); and every tool refuses bad
# input, saying why.  Without numpy in /usr/bin/python3 every test skips.

load helper

PY=${NB_TEST_PYTHON:-/usr/bin/python3}
DS="$NB_ROOT/bench/dataset"

setup_file() {
    "${NB_TEST_PYTHON:-/usr/bin/python3}" -c 'import numpy' 2>/dev/null || return 0
    # seed 4 drawn with four stills: the data of every test but the first two
    export WORK="$BATS_FILE_TMPDIR/work"
    "$NB_ROOT/bench/dataset/run-drawn.sh" --seeds 4 --stills 4 --starts near --threads 2 --work "$WORK" \
        > "$BATS_FILE_TMPDIR/run.out" 2> "$BATS_FILE_TMPDIR/run.err"
    echo $? > "$BATS_FILE_TMPDIR/run.status"
    export DATA="$WORK/seed-4/data"
}

setup() {
    "$PY" -c 'import numpy' 2>/dev/null || skip "$PY has no numpy (apt-get install python3-numpy)"
    cd "$BATS_TEST_TMPDIR" || return 1
}

# the value of KEY (a dotted path) in the JSON file FILE
json_at() {
    "$PY" -c '
import json, sys
v = json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."):
    v = v[int(k)] if isinstance(v, list) else v[k]
print(v)' "$1" "$2"
}

@test "drawn: draw.py draws the same dataset from the same seed, within the issue's ranges, its rejections recorded" {
    "$PY" "$DS/draw.py" --seed 1 --params-only > seed1.json 2> seed1.err
    "$PY" "$DS/draw.py" --seed 1 --params-only > again.json 2> /dev/null
    cmp seed1.json again.json
    "$PY" "$DS/draw.py" --seed 2 --params-only > seed2.json 2> /dev/null
    run ! cmp -s seed1.json seed2.json
    # seed 1's first draw had a cell that another setting of its lattice nearly has
    [ "$(json_at seed1.json params.attempt)" -ge 1 ] || false
    run -0 cat seed1.err
    expect_has "draw.py: seed 1 attempt 0 rejected: 4 settings of the lattice"
    [[ "$(json_at seed1.json rejected.0.reason)" == *"settings of the lattice"* ]] || false
    for s in $(seq 1 12); do "$PY" "$DS/draw.py" --seed "$s" --params-only > "draw$s.json" 2>/dev/null; done
    run "$PY" - draw*.json <<'EOF'
import json, sys
seen = set()
for path in sys.argv[1:]:
    p = json.load(open(path))["params"]
    a, b, c, al, be, ga = p["cell"]
    assert 0.05 <= p["pixel_mm"] <= 0.2 and 256 <= p["detpixels"] <= 2048, p
    assert 50 <= p["distance_mm"] <= 300 and 0.7 <= p["lambda_A"] <= 1.8 and 5 <= p["N"] <= 30, p
    assert all(30 <= x <= 150 for x in (a, b, c)) and p["mosaic_deg"] in (0.0, 0.2), p
    assert p["spot_spacing_px"] >= 5 and 1 <= p["oversample"] <= 3, p
    if p["space_group"] == "P1":
        assert all(abs(x - 90) >= 4 for x in (al, be, ga)), p
    elif p["space_group"] in ("P2", "P21"):
        assert al == ga == 90 and 95 <= be <= 125, p
    else:
        assert al == be == ga == 90, p
    seen.add(p["space_group"])
print(sorted(seen))
EOF
    expect_status 0
    expect_has "P1"
    expect_has "P212121"
}

@test "drawn: draw.py keeps no draw whose spots are closer than --min-spacing, saying so, and leaves nothing" {
    run -1 "$PY" "$DS/draw.py" --seed 5 --stills 2 --min-spacing 1000000 --max-attempts 3 out
    expect_has "no draw of seed 5 kept in 3 attempts"
    expect_has "neighbouring spots"
    run -0 find . -type f
    [ -z "$output" ] || false
}

@test "drawn: run-drawn.sh draws seed 4, fits its near start and passes the near gate" {
    run cat "$BATS_FILE_TMPDIR/run.err"
    [ "$(cat "$BATS_FILE_TMPDIR/run.status")" -eq 0 ] || false
    run -0 cat "$WORK/results.txt"
    expect_has "near  PASS  1 datasets, 4 of 4 frames recovered"
    [ "$(json_at "$WORK/seed-4/near/verdict.json" recovered)" -eq 4 ] || false
    [ "$(json_at "$WORK/seed-4/near/run.json" fit_status)" -eq 0 ] || false
    [ "$(json_at "$WORK/results.json" datasets.0.params.space_group)" = P222 ] || false
    [ "$(json_at "$WORK/results.json" gates.near.pass)" = True ] || false
    [ "$(json_at "$DATA/draw.json" seed)" -eq 4 ] || false
    [ -s "$DATA/still_004.cbf" ] || false
    # the start was 0.3 degrees off; nb-fit's log gave every frame's sigma
    approx "$(json_at "$WORK/seed-4/near/start-errors.json" orientation_deg.max)" 0.3 1e-6
    [ "$(json_at "$WORK/seed-4/near/verdict.json" per_frame.3.sigma_deg)" != None ] || false
}

@test "drawn: run-drawn.sh again keeps the dataset it drew, its table names the fit, --tables-only tables it again" {
    cp -r "$WORK" work
    run -0 "$DS/run-drawn.sh" --seeds 4 --stills 4 --starts near --threads 2 --work work
    expect_has "seed 4: reusing the dataset"
    cmp "$DATA/still_001.cbf" work/seed-4/data/still_001.cbf
    run -0 grep -E '^ +4 near +PASS +PASS +4 +4 +0 +0 +0 +0 +0 ' work/results.txt
    # --tables-only: the same verdicts tabled again, nothing run
    rm work/results.txt work/results.json
    run -0 "$DS/run-drawn.sh" --seeds 4 --stills 4 --starts near --work work --tables-only
    expect_lacks "reusing"
    run -0 grep -E '^ +4 near +PASS +PASS +4 +4 +0 +0 +0 +0 +0 ' work/results.txt
    [ "$(json_at work/results.json gates.near.pass)" = True ] || false
}

@test "drawn: the near gate fails a fit that did not move, and --overall fails with it" {
    "$PY" "$DS/perturb.py" --angle 0.3 --cell-scale 1.003 --seed 3 "$DATA/model.expt" -o start.expt
    : > fit.log
    run -1 "$PY" "$DS/evaluate.py" "$DATA/model.expt" start.expt --fit-log fit.log --fit-status 0 \
        --space-group P222 --gate near --json near.json
    expect_has "frame 1 is 0.3000 deg and its cell 0.3000 % off"
    run -1 "$PY" "$DS/evaluate.py" --overall near.json "$WORK/seed-4/near/verdict.json"
    expect_has "near  FAIL  2 datasets, 4 of 8 frames recovered"
    run -0 "$PY" "$DS/evaluate.py" --overall "$WORK/seed-4/near/verdict.json"
    expect_has "near  PASS"
}

@test "drawn: a frame off by more than the figures but within 3 of its sigmas is at the data's floor, not wrong" {
    "$PY" "$DS/perturb.py" --angle 0.03 --seed 3 "$DATA/model.expt" -o fit.expt
    # nb-fit -v's word on each frame: its turns' sigmas 0.01 degrees (0.017 together), the shared cell's
    for f in 1 2 3 4; do
        echo "frame $f: rot_x = 0 ± 0.01 rot_y = 0 ± 0.01 rot_z = 0 ± 0.01 scale = 1 ± 0.01 (1 pixels)"
    done > sigma.log
    run -1 "$PY" "$DS/evaluate.py" "$DATA/model.expt" fit.expt --fit-log sigma.log --fit-status 0 \
        --space-group P222 --gate near --json near.json
    expect_has "within 3 of its sigmas: the data's floor"
    [ "$(json_at near.json floor)" -eq 4 ] || false
    [ "$(json_at near.json pass_at_floor)" = True ] || false
    # sigmas of a tenth of that: wrong at the floor too
    sed 's/0\.01/0.001/g' sigma.log > small.log
    run -1 "$PY" "$DS/evaluate.py" "$DATA/model.expt" fit.expt --fit-log small.log --fit-status 0 \
        --space-group P222 --gate near --json small.json
    [ "$(json_at small.json wrong)" -eq 4 ] || false
    [ "$(json_at small.json pass_at_floor)" = False ] || false
    run -1 "$PY" "$DS/evaluate.py" --overall near.json
    expect_has "at the data's floor PASS, 4 more recovered"
}

# a list of the truth's crystals with frame 4's turned 1 degree
one_off() {
    "$PY" "$DS/perturb.py" --angle 1 --seed 9 "$DATA/model.expt" -o turned.expt
    "$PY" - "$DATA/model.expt" turned.expt "$1" <<'EOF'
import json, sys
truth, turned = (json.load(open(p)) for p in sys.argv[1:3])
truth["crystal"][3] = turned["crystal"][3]
json.dump(truth, open(sys.argv[3], "w"))
EOF
}

@test "drawn: the far gate: a frame off and unreported is wrong, reported with exit 3 it is failed, 75 % recovered passes" {
    one_off fit.expt
    : > none.log
    run -1 "$PY" "$DS/evaluate.py" "$DATA/model.expt" fit.expt --fit-log none.log --fit-status 0 --gate far \
        --space-group P222
    expect_has "frame 4 is 1.0000 deg"
    expect_has "was not reported failed"
    echo 'nb-fit: frame 4 failed: too few spots explained; its start is kept' > failed.log
    run -0 "$PY" "$DS/evaluate.py" "$DATA/model.expt" fit.expt --fit-log failed.log --fit-status 3 --gate far \
        --space-group P222 --json far.json
    [ "$(json_at far.json recovered)" -eq 3 ] || false
    [ "$(json_at far.json failed)" -eq 1 ] || false
    run -1 "$PY" "$DS/evaluate.py" "$DATA/model.expt" fit.expt --fit-log failed.log --fit-status 0 --gate far \
        --space-group P222
    expect_has "frames reported failed but nb-fit exited 0, not 3"
    # 3 of 4 in one dataset passes it; over all datasets 90 % are wanted
    run -1 "$PY" "$DS/evaluate.py" --overall far.json
    expect_has "far   FAIL  1 datasets, 3 of 4 frames recovered (75.0 % of those started)"
}

@test "drawn: the dials gate: a still DIALS did not index is not started and not recovered (--frame-map)" {
    # a start without still 2: its experiments are stills 1, 3, 4; the fit is the truth's crystals
    "$PY" - "$DATA/model.expt" <<'EOF'
import json, sys
el = json.load(open(sys.argv[1]))
for key in ("experiment", "crystal", "beam", "imageset"):
    el[key] = [x for i, x in enumerate(el[key]) if i != 1]
for k, e in enumerate(el["experiment"]):
    e.update(crystal=k, beam=k, imageset=k)
json.dump(el, open("start.expt", "w"))
for e in el["experiment"]:
    e["identifier"] = "nb-frame-%d" % (el["experiment"].index(e) + 1)
json.dump(el, open("fit.expt", "w"))
EOF
    echo 'nb-fit: frame 3 failed: deviance 2.1 times Poisson; its start is kept' > fit.log
    run -1 "$PY" "$DS/evaluate.py" "$DATA/model.expt" fit.expt --frame-map start.expt --fit-log fit.log \
        --fit-status 3 --gate dials --space-group P222 --json dials.json
    # fit frame 3 is still 4
    [ "$(json_at dials.json reported_failed)" = "[4]" ] || false
    [ "$(json_at dials.json not_started)" -eq 1 ] || false
    [ "$(json_at dials.json recovered)" -eq 2 ] || false
    # the share is of the frames DIALS started: 2 of 3
    expect_has "2 of the 3 frames started recovered (67 % < 75 %; 0 at the data's floor, 1 failed, 0 wrong; 1 not started)"
    run -0 "$PY" "$DS/evaluate.py" "$DATA/model.expt" fit.expt --frame-map start.expt --fit-log /dev/null \
        --fit-status 0 --gate dials --space-group P222
    expect_has "not in the start (not indexed)"
    run -1 "$PY" "$DS/evaluate.py" "$DATA/model.expt" fit.expt --frame-map start.expt --fit-log /dev/null \
        --fit-status 0 --gate near --space-group P222
    expect_has "frames not in the start: 2"
}

@test "drawn: evaluate.py takes a monoclinic crystal indexed as -a, b, -c as the same orientation, names another basis" {
    "$PY" - "$DATA/model.expt" <<'EOF'
import json, sys
el = json.load(open(sys.argv[1]))
for x in el["crystal"]:
    x["real_space_a"] = [-v for v in x["real_space_a"]]
    x["real_space_c"] = [-v for v in x["real_space_c"]]
json.dump(el, open("flipped.expt", "w"))
EOF
    run -0 "$PY" "$DS/evaluate.py" "$DATA/model.expt" flipped.expt --space-group P21 --json p21.json
    [ "$(json_at p21.json orientation_deg.max)" = 0.0 ] || false
    expect_has "-a,b,-c"
    run -0 "$PY" "$DS/evaluate.py" "$DATA/model.expt" flipped.expt --json p1.json
    approx "$(json_at p1.json orientation_deg.median)" 180 1e-9
    # a + b, b, c: the same lattice, other indices (an indexing's error), named so
    "$PY" - "$DATA/model.expt" <<'EOF'
import json, sys
el = json.load(open(sys.argv[1]))
for x in el["crystal"]:
    x["real_space_a"] = [u + v for u, v in zip(x["real_space_a"], x["real_space_b"])]
json.dump(el, open("other.expt", "w"))
EOF
    run -0 "$PY" "$DS/evaluate.py" "$DATA/model.expt" other.expt --space-group P222 --json other.json
    [ "$(json_at other.json per_frame.0.setting)" = other ] || false
    [ "$(json_at other.json per_frame.0.other_basis)" = "[[1, 0, 0], [1, 1, 0], [0, 0, 1]]" ] || false
}

@test "drawn: nb-geom -expt makes a plan of every frame from a near, a far and a DIALS start" {
    # shellcheck disable=SC1091
    . "$DATA/dataset.env"
    "$PY" "$DS/perturb.py" --angle 0.3 --cell-scale 1.003 --seed 1 "$DATA/model.expt" -o near.expt
    "$PY" "$DS/perturb.py" --angle 3 --cell-scale 1.03 --distance 10 --seed 2 "$DATA/model.expt" -o far.expt
    for kind in near far; do
        run -0 nb-geom -q -expt $kind.expt $XTAL -o $kind.nbs
        [ "$(plan_key $kind.nbs NFRAMES)" -eq 4 ] || false
    done
    command -v dials.index >/dev/null 2>&1 || skip "DIALS is not installed (dials.index): its start not made"
    # still 2 alone (a DIALS run is seconds): the start's frame is the dataset's frame 2
    run -0 "$PY" "$DS/dials_start.py" --cell "$CELL" --space-group "$SPACE_GROUP" --record dials.json \
        -o dials.expt "$DATA/still_001.cbf" "$DATA/still_002.cbf" --only 2
    expect_has "1 of 1 stills indexed"
    run -0 nb-geom -q -expt dials.expt $XTAL -o dials.nbs
    [ "$(plan_key dials.nbs NFRAMES)" -eq 1 ] || false
    # DIALS's crystal is within a degree of the truth's, in a setting of P 2 2 2
    run -0 "$PY" "$DS/evaluate.py" "$DATA/model.expt" dials.expt --frame-map dials.expt --space-group P222 \
        --json eval.json
    [ "$(json_at eval.json measured)" -eq 1 ] || false
    [ "$(json_at eval.json not_started_frames)" = "[1, 3, 4]" ] || false
    "$PY" -c 'import json, sys; sys.exit(not json.load(open("eval.json"))["orientation_deg"]["max"] < 1)'
}

@test "drawn: bad input to each tool is an error that says what, and writes nothing" {
    run -2 "$DS/simulate.sh" --space-group C2 out
    expect_has "simulate.sh: --space-group must be P1, P2, P21, P222 or P212121, not 'C2'"
    run -2 "$DS/simulate.sh" --cell "1 2 3" out
    expect_has "--cell takes six numbers"
    run -2 "$DS/simulate.sh" --water -1 out
    expect_has "'-1' is not a number of 0 or more"
    run -2 "$DS/simulate.sh" --stills
    expect_has "simulate.sh: --stills needs a value"
    run -2 "$PY" "$DS/draw.py" --seed -1 out
    expect_has "--seed must be 0 or more"
    run -2 "$PY" "$DS/draw.py" --seed 1
    expect_has "give DIR"
    run -2 "$PY" "$DS/wilson_hkl.py" --cell 34 52 53 90 90 90 --dmin 0 -o F.hkl
    expect_has "--dmin and --f-rms must be positive"
    run -2 "$PY" "$DS/wilson_hkl.py" --cell 34 52 53 90 90 90 --dmin 2 --space-group C2 -o F.hkl
    expect_has "invalid choice: 'C2'"
    run -1 "$PY" "$DS/wilson_hkl.py" --cell 34 52 53 90 90 90 --dmin 2 -o no/such/F.hkl
    expect_has "cannot write 'no/such/F.hkl'"
    printf 'not json\n' > bad.expt
    run -1 "$PY" "$DS/perturb.py" --angle 1 bad.expt -o out.expt
    expect_has "perturb.py: cannot read 'bad.expt'"
    run -2 "$PY" "$DS/perturb.py" --cell-scale -1 "$DATA/model.expt" -o out.expt
    expect_has "--cell-scale must be positive"
    run -2 "$PY" "$DS/evaluate.py" "$DATA/model.expt" "$DATA/model.expt" --frame-map bad.expt
    expect_has "cannot read 'bad.expt'"
    run -2 "$PY" "$DS/evaluate.py" "$DATA/model.expt" "$DATA/model.expt" --gate dials
    expect_has "--gate dials needs --fit-log"
    run -2 "$PY" "$DS/evaluate.py" --overall "$DATA/model.expt"
    expect_has "is not a summary of a near, far or dials gate"
    run -2 "$PY" "$DS/dials_start.py" --cell "1 2 3" --space-group P1 -o out.expt "$DATA/still_001.cbf"
    expect_has "--cell takes six positive numbers"
    run -1 "$PY" "$DS/dials_start.py" --cell "10 20 30 90 90 90" --space-group P1 -o out.expt no-such.cbf
    expect_has "dials_start.py: cannot read 'no-such.cbf'"
    run -2 "$PY" "$DS/dials_start.py" --cell "10 20 30 90 90 90" --space-group P1 -o out.expt --only 2 \
        "$DATA/still_001.cbf"
    expect_has "--only takes places among the 1 stills given"
    run -2 "$DS/run-drawn.sh" --work w
    expect_has "--seeds is required"
    run -2 "$DS/run-drawn.sh" --seeds 1,x --work w
    expect_has "'x' is not a seed"
    run -2 "$DS/run-drawn.sh" --seeds 1 --work w --starts near,close
    expect_has "no start kind 'close'"
    run -2 "$DS/run-drawn.sh" --seeds 1 --work w --cell angles
    expect_has "--cell must be auto, edges, lattice or shared"
    run -1 "$PY" "$DS/drawn_table.py" --work . --seeds 1 --starts near
    expect_has "drawn_table.py: no verdict in"
    run -2 "$PY" "$DS/sigmas.py" "$DATA/model.expt" bad.expt no-such.log
    expect_has "sigmas.py: cannot read"
    run -2 "$PY" "$DS/sigmas.py" "$DATA/model.expt" "$DATA/model.expt" no-such.log --truth-hkl F.hkl
    expect_has "--truth-hkl and --fit-hkl go together"
    run -2 "$PY" "$DS/score_contrast.py" no-such-dir
    expect_has "score_contrast.py: cannot read"
    run -2 "$PY" "$DS/score_contrast.py" "$DATA" --random 2
    expect_has "--random must be 8 or more"
    run -2 "$DS/sigma-runs.sh" --work w --stills 0
    expect_has "sigma-runs.sh: --stills must be a positive whole number, not '0'"
    run -2 "$DS/sigma-runs.sh" --work w --runs A,E
    expect_has "sigma-runs.sh: no run 'E' (A B C D)"
    run -0 find . -type f -not -name bad.expt
    [ -z "$output" ] || false
}

@test "drawn: sigmas.py's errors over sigmas: the near fit's turns, a made-up log's" {
    # the near fit of seed 4: its turns within a few of their sigmas
    run -0 "$PY" "$DS/sigmas.py" "$DATA/model.expt" "$WORK/seed-4/near/fit.expt" "$WORK/seed-4/near/fit.log" \
        --space-group P222 --json s.json
    echo "$output"
    [ "$(json_at s.json orientation.n)" -eq 4 ] || false
    "$PY" -c 'import json,sys; s=json.load(open("s.json")); sys.exit(not 0.2 < s["orientation"]["rms"] < 5)'
    # crystals 0.03 degrees off, sigmas said 0.01 a turn: 0.03 / sqrt(3) / 0.01 = 1.73
    "$PY" "$DS/perturb.py" --angle 0.03 --seed 3 "$DATA/model.expt" -o off.expt
    for f in 1 2 3 4; do
        echo "frame $f: rot_x = 0 ± 0.01 rot_y = 0 ± 0.01 rot_z = 0 ± 0.01 scale = 1.02 ± 0.01 (1 pixels)"
    done > made.log
    run -0 "$PY" "$DS/sigmas.py" "$DATA/model.expt" off.expt made.log --space-group P222 --json m.json
    echo "$output"
    "$PY" -c 'import json,sys; s=json.load(open("m.json")); sys.exit(not (abs(s["orientation"]["rms"] - 1.732) < 0.01 and abs(s["scale"]["rms"] - 2) < 1e-6))'
    # no sigmas (a log without -v): nothing to measure
    echo "nb-fit: 4 frames fitted, 0 failed" > quiet.log
    run -1 "$PY" "$DS/sigmas.py" "$DATA/model.expt" off.expt quiet.log
    expect_has "no value with a sigma"
}

@test "drawn: score_contrast.py: the whitened score tells seed 4's stills from chance" {
    run -0 "$PY" "$DS/score_contrast.py" "$DATA" --random 16 --json c.json
    echo "$output"
    [ "$(json_at c.json stills | "$PY" -c 'import sys; print(len(eval(sys.stdin.read())))')" -eq 4 ] || false
    "$PY" -c 'import json,sys; s=json.load(open("c.json")); sys.exit(not s["median"]["whitened"] > 6)'
}

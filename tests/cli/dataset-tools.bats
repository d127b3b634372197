#!/usr/bin/env bats
# The measuring tools of the dataset-refinement gates (bench/dataset/,
# bench/README.md "Dataset refinement gates"), on a tiny simulated set (three
# stills of 64^2 pixels): perturb.py turns every crystal by a known angle,
# moves the detector and scales the cell, and evaluate.py measures exactly
# that (0.3 degrees within 1e-6, 0 for the truth itself); its G2 verdict
# reads nb-fit's failed frames; its G3 figures come from truth.jsonl.  The
# whole harness (run-gates.sh) takes minutes and is not run here.  Without
# numpy in /usr/bin/python3 every test skips saying why.

load helper

PY=${NB_TEST_PYTHON:-/usr/bin/python3}
DS="$NB_ROOT/bench/dataset"

setup_file() {
    "${NB_TEST_PYTHON:-/usr/bin/python3}" -c 'import numpy' 2>/dev/null || return 0
    export DATA="$BATS_FILE_TMPDIR/data"
    NB_BIN="$NB_BIN" "$NB_ROOT/bench/dataset/simulate.sh" --stills 3 --detpixels 64 --pixel 1.6 --threads 1 \
        --seed 4 "$DATA" 2>"$BATS_FILE_TMPDIR/simulate.log"
}

setup() {
    "$PY" -c 'import numpy' 2>/dev/null || skip "$PY has no numpy (apt-get install python3-numpy)"
    cd "$BATS_TEST_TMPDIR" || return 1
}

# the value of KEY (a dotted path) in evaluate.py's JSON summary: its one line
# of JSON in $output (the verdicts on standard error follow it)
summary() {
    printf '%s\n' "$output" | grep '^{' | tail -n 1 | "$PY" -c '
import json, sys
v = json.loads(sys.stdin.read())
for k in sys.argv[1].split("."):
    v = v[k]
print(v)' "$1"
}

@test "dataset tools: simulate.sh writes three stills, the truth and F" {
    [ -s "$DATA/still_003.cbf" ] || false
    [ -s "$DATA/model.expt" ] || false
    [ "$(wc -l < "$DATA/truth.jsonl")" -eq 3 ] || false
    run grep -c '^-*[0-9]' "$DATA/F.hkl"
    [ "$output" -gt 1000 ] || false
}

@test "dataset tools: evaluate.py finds no error between the truth and itself, and G1 passes" {
    run "$PY" "$DS/evaluate.py" "$DATA/model.expt" "$DATA/model.expt" --fit-status 0 --gate G1
    expect_status 0
    [ "$(summary measured)" -eq 3 ] || false
    [ "$(summary orientation_deg.max)" = 0.0 ] || false
    [ "$(summary cell_rel_max_abs)" = 0.0 ] || false
    [ "$(summary pass)" = True ] || false
}

@test "dataset tools: perturb.py's 0.3 degree turn and 0.3 % longer cell are what evaluate.py measures" {
    run "$PY" "$DS/perturb.py" --angle 0.3 --cell-scale 1.003 --seed 5 "$DATA/model.expt" -o start.expt
    expect_status 0
    run "$PY" "$DS/evaluate.py" "$DATA/model.expt" start.expt --fit-status 0 --gate G1
    expect_status 1
    approx "$(summary orientation_deg.max)" 0.3 3.4e-6
    approx "$(summary orientation_deg.median)" 0.3 3.4e-6
    approx "$(summary orientation_deg.mean)" 0.3 3.4e-6
    approx "$(summary cell_rel_max_abs)" 0.003 1e-9
    [ "$(summary distance_mm_max_abs)" = 0.0 ] || false
    expect_has "median orientation error 0.300000 deg > 0.005"
}

@test "dataset tools: perturb.py moves the detector 10 mm away from the sample" {
    run "$PY" "$DS/perturb.py" --angle 3 --distance 10 --seed 6 "$DATA/model.expt" -o start.expt
    expect_status 0
    run "$PY" "$DS/evaluate.py" "$DATA/model.expt" start.expt
    expect_status 0
    approx "$(summary distance_mm_max_abs)" 10 1e-12
    approx "$(summary orientation_deg.max)" 3 3.4e-7
    run grep -c ' 10.00000 *a,b,c  ok$' <<< "$output"
    [ "$output" -eq 3 ] || false
}

@test "dataset tools: evaluate.py's G2 reads the frames nb-fit reported failed" {
    "$PY" "$DS/perturb.py" --angle 3 --seed 7 "$DATA/model.expt" -o start.expt
    printf '%s\n' 'nb-fit: frame 2 failed: no spot explained' 'nb-fit: frame 3 failed: x' > fit.log
    # frames 2 and 3 reported, frame 1 3 degrees off unreported: a fail naming it
    run "$PY" "$DS/evaluate.py" "$DATA/model.expt" start.expt --fit-log fit.log --fit-status 3 --gate G2
    expect_status 1
    expect_has "frame 1 is 3.0000 deg off (> 0.05) and was not reported failed"
    expect_lacks "frame 2 is"
    [ "$(summary reported_failed)" = "[2, 3]" ] || false
    # the truth itself, frames 2 and 3 reported: recovered 1 of 3, under half
    run "$PY" "$DS/evaluate.py" "$DATA/model.expt" "$DATA/model.expt" --fit-log fit.log --fit-status 3 --gate G2
    expect_status 1
    expect_has "1 of 3 frames recovered (at least half must be)"
    # failed frames named, but nb-fit's status 0
    run "$PY" "$DS/evaluate.py" "$DATA/model.expt" "$DATA/model.expt" --fit-log fit.log --fit-status 0 --gate G2
    expect_has "frames reported failed but nb-fit exited 0, not 3"
    : > none.log
    run "$PY" "$DS/evaluate.py" "$DATA/model.expt" "$DATA/model.expt" --fit-log none.log --fit-status 0 --gate G2
    expect_status 0
}

@test "dataset tools: evaluate.py --F: the true F pass G3, a flat F fails, Monte-Carlo merging below 1" {
    run "$PY" "$DS/evaluate.py" --F --truth-hkl "$DATA/F.hkl" --fit-hkl "$DATA/F.hkl" \
        --truth-jsonl "$DATA/truth.jsonl" --min-shots 2 --gate G3
    expect_status 0
    approx "$(summary cc_fit)" 1 1e-12
    [ "$(summary reflections_selected)" -gt 100 ] || false
    run "$PY" -c "import sys; v = float(sys.argv[1]); sys.exit(0 if 0 < v < 0.99 else 1)" "$(summary cc_monte_carlo)"
    expect_status 0
    run "$PY" "$DS/evaluate.py" --F --truth-hkl "$DATA/F.hkl" --fit-hkl "$DATA/flat.hkl" \
        --truth-jsonl "$DATA/truth.jsonl" --min-shots 2 --gate G3
    expect_status 1
    [ "$(summary cc_fit)" = None ] || false
    # the true F of every other reflection alone: a perfect CC where it has F, but the rest count as 0
    awk '!/^#/ && n++ % 2' "$DATA/F_asu.hkl" > half.hkl
    run "$PY" "$DS/evaluate.py" --F --truth-hkl "$DATA/F.hkl" --fit-hkl half.hkl \
        --truth-jsonl "$DATA/truth.jsonl" --min-shots 2 --gate G3
    expect_status 1
    approx "$(summary cc_fit)" 1 1e-12
    [[ "$output" == *"coverage"* ]] || false
    [[ "$output" == *"as 0, CC"* ]] || false
}

@test "dataset tools: evaluate.py --compare: a list against itself and against a 0.001 degree turn" {
    run "$PY" "$DS/evaluate.py" --compare "$DATA/model.expt" "$DATA/model.expt" --gate G4
    expect_status 0
    "$PY" "$DS/perturb.py" --angle 0.001 --seed 8 "$DATA/model.expt" -o turned.expt
    run "$PY" "$DS/evaluate.py" --compare "$DATA/model.expt" turned.expt --gate G4
    expect_status 1
    expect_has "the fits differ by"
}

@test "dataset tools: bad input is an error that names the file" {
    printf 'not json\n' > bad.expt
    run "$PY" "$DS/evaluate.py" "$DATA/model.expt" bad.expt
    expect_status 2
    expect_has "cannot read 'bad.expt'"
    run "$PY" "$DS/perturb.py" --angle 1 bad.expt -o out.expt
    expect_status 1
    [ ! -e out.expt ] || false
}

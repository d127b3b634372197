#!/usr/bin/env bash
# run-gates.sh - the gates of dataset refinement (issue 35), measured on data
# simulated here: simulate.sh makes the stills and the truth, perturb.py the
# start model, nb-geom -expt + nb-hkl + nb-fit refine it, evaluate.py judges.
#
#   G1  50 stills (1024^2, P 21 21 21, Poisson noise) from the truth's
#       model.expt, each crystal turned 0.3 deg about a random axis, the cell
#       0.3 % too long: median orientation error <= 0.005 deg, worst <= 0.02,
#       cell within 0.05 %, nb-fit's status 0 and no frame reported failed.
#   G2  the same with 3 deg turns and the detector 10 mm off: every frame
#       recovered (<= 0.02 deg) or reported failed (nb-fit exits 3 and names
#       it), at least half recovered, none > 0.05 deg off unreported.
#   G3  200 stills with Wilson F, orientations known to 0.005 deg, F started
#       flat: CC(F refined, F true) >= 0.95 over the reflections truth.jsonl
#       records on >= 3 shots, and above Monte-Carlo merging's CC.
#   G3i G3's fit also measures the intensities (nb-fit --integrated): dials.scale
#       then dials.merge on the table as written, and the CC of the merged
#       intensities with F true^2 at least Monte-Carlo merging's of the true
#       photons on the same reflections (merge_cc.py), beside --refine-F's;
#       DIALS's partiality cuts off (DIALS_SCALE_FLAGS, DIALS_MERGE_FLAGS).
#   G4  mpirun -n 2 nb-fit equals one process on G1's data (1e-6 relative).
#   G5  G1's fit with dials.find_spots' spots (nb-fit --spots strong.refl), its
#       start's experiments named as dials.index names them (UUIDs): every
#       value within its sigma of the fit with nb's own spots (both -v), the
#       refined list keeps the identifiers, and dials.compare_orientation_matrices
#       compares it with the truth's.
#
# Usage: run-gates.sh [OPTIONS]
#   --work DIR        where the data and the fits go (default /tmp/nb-gates)
#   --gates LIST      comma-separated, of G1 G2 G3 G4 G5 (default all; G2, G4
#                     and G5 use G1's data, G4 G1's start and fit, G5 G1's start)
#   --threads N       threads of every stage (default: all cores)
#   --quick           a small dry run of the harness (4 stills of 256^2 x 0.4 mm
#                     for G1, G2, G4; 20 for G3): the figures are not the gates'
#   --results FILE    also copy the summary (text) there
#   --g3-stills N     G3's stills (default 200; speed.sh measures 1000)
# Environment: NB_BIN (the tools; default this checkout's bin/), PYTHON
# (default /usr/bin/python3), MPIRUN (default mpirun) and MPIRUN_FLAGS
# (default: --allow-run-as-root --oversubscribe for Open MPI run as root),
# G1_REFINE, G1_REFINE_FRAME, G2_REFINE, G2_REFINE_FRAME, G3_REFINE,
# G3_REFINE_FRAME, G3_SPACE_GROUP (the REFINE ones set empty: none), FIT_FLAGS (more
# nb-fit flags, every fit), DIALS_SCALE_FLAGS (default: intensity_choice=profile
# and the partiality cut-offs at 0), DIALS_MERGE_FLAGS (default
# partiality_threshold=0).
# Writes DIR/results.txt (a line per gate: PASS, FAIL or NOT RUN, the
# figures, the fit's seconds per still) and DIR/results.json; exit 0 when
# every gate asked for passed, 1 otherwise (a missing feature stops the run
# at the first gate that needs it, saying which), 2 usage.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NB_BIN=${NB_BIN:-$(cd "$here/../.." && pwd)/bin}
PY=${PYTHON:-/usr/bin/python3}
MPIRUN=${MPIRUN:-mpirun}
G1_REFINE=${G1_REFINE-cell_a,cell_b,cell_c}
G1_REFINE_FRAME=${G1_REFINE_FRAME:-rot_x,rot_y,rot_z,scale}
G2_REFINE=${G2_REFINE-distance,cell_a,cell_b,cell_c}
G2_REFINE_FRAME=${G2_REFINE_FRAME:-rot_x,rot_y,rot_z,scale}
G3_REFINE=${G3_REFINE:-}
G3_REFINE_FRAME=${G3_REFINE_FRAME-scale}
G3_SPACE_GROUP=${G3_SPACE_GROUP:-P212121}
FIT_FLAGS=${FIT_FLAGS:-}
DIALS_SCALE_FLAGS=${DIALS_SCALE_FLAGS-intensity_choice=profile cut_data.partiality_cutoff=0 reflection_selection.min_partiality=0}
DIALS_MERGE_FLAGS=${DIALS_MERGE_FLAGS-partiality_threshold=0}

usage() { local fd=2; [ "${1:-2}" != 0 ] || fd=1; sed -n '/^# Usage:/,/^# at the first/p' "$0" | sed 's/^# \{0,1\}//' >&"$fd"; exit "${1:-2}"; }

work=/tmp/nb-gates gates=G1,G2,G3,G4,G5 threads='' quick=0 results='' g3_stills=200
while [ $# -gt 0 ]; do
    case $1 in
        --work) work=$2; shift 2 ;;
        --gates) gates=$2; shift 2 ;;
        --threads) threads=$2; shift 2 ;;
        --quick) quick=1; shift ;;
        --results) results=$2; shift 2 ;;
        --g3-stills) g3_stills=$2; shift 2 ;;
        -h|--help) usage 0 ;;
        *) echo "run-gates.sh: unknown argument '$1'" >&2; usage ;;
    esac
done
for g in ${gates//,/ }; do
    case $g in G1|G2|G3|G4|G5) ;; *) echo "run-gates.sh: no gate '$g' (G1 G2 G3 G4 G5)" >&2; exit 2 ;; esac
done
case $g3_stills in ''|*[!0-9]*|0) echo "run-gates.sh: --g3-stills must be a positive whole number" >&2; exit 2 ;; esac
want() { case ",$gates," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }

mkdir -p "$work"
work=$(cd "$work" && pwd)
summary=$work/results.txt
jsonl=$work/results.jsonl
: > "$summary"
: > "$jsonl"
thr=()
[ -n "$threads" ] && thr=(--threads "$threads")
status=0

say() { echo "run-gates.sh: $*" >&2; }
record() {   # record GATE VERDICT TEXT [JSON]
    printf '%-3s %-7s %s\n' "$1" "$2" "$3" | tee -a "$summary" >&2
    printf '{"gate": "%s", "verdict": "%s", "figures": %s}\n' "$1" "$2" "${4:-null}" >> "$jsonl"
    [ "$2" = PASS ] || status=1
}
# stop at a missing feature or a broken stage: say which, and what it printed
stop() {   # stop GATE WHAT LOGFILE
    local tail=""
    [ -n "${3:-}" ] && [ -s "$3" ] && tail=$(tail -n 5 "$3" | tr '\n' ' ')
    record "$1" "NOT-RUN" "$2${tail:+: $tail}"
    finish
    exit 1
}
finish() {
    "$PY" - "$jsonl" "$work/results.json" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
json.dump({"gates": rows}, open(sys.argv[2], "w"), indent=1)
EOF
    [ -n "$results" ] && cp "$summary" "$results"
    say "summary in $summary (and results.json)"
}
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

for t in nb-geom nb-hkl nb-sim nb-noise nb-convert nb-fit; do
    [ -x "$NB_BIN/$t" ] || { echo "run-gates.sh: no $NB_BIN/$t: build nb first (make), or set NB_BIN" >&2; exit 1; }
done
"$PY" -c 'import numpy' 2>/dev/null || { echo "run-gates.sh: $PY has no numpy" >&2; exit 1; }

# ---- the features the gates need (issue 35), asked of the tools' help -------------
has_flag() {   # has_flag TOOL FLAG: the tool's --help lists FLAG as an option
    local help
    help=$("$NB_BIN/$1" --help 2>&1 || true)   # not a pipe into grep -q: its SIGPIPE would fail the test
    grep -q -e "^ *$2[ ,]" -e "^ *$2\$" -e ", $2[ ,]" <<< "$help"
}
need() {   # need GATE TOOL FLAG WHAT
    has_flag "$2" "$3" || stop "$1" "missing feature: $2 $3 ($4)" ""
}

# ---- the pieces of every gate ----------------------------------------------------------
if [ "$quick" = 1 ]; then
    SIM_SMALL=(--stills 4 --detpixels 256 --pixel 0.4)
    SIM_G3=(--stills 20 --detpixels 256 --pixel 0.4)
else
    SIM_SMALL=(--stills 50 --detpixels 1024 --pixel 0.1)
    SIM_G3=(--stills "$g3_stills" --detpixels 1024 --pixel 0.1)
fi

simulate() {   # simulate DIR ARGS...: once per directory
    local dir=$1; shift
    # the same data again (the same options) are not made again
    if [ -s "$dir/dataset.env" ] && [ "$(cat "$dir.args" 2>/dev/null)" = "$*" ]; then
        say "reusing $dir"
    else
        printf '%s' "$*" > "$dir.args"
        "$here/simulate.sh" "${thr[@]}" "$@" "$dir" 2> "$dir.log" || { cat "$dir.log" >&2; return 1; }
        tail -n 1 "$dir.log" >&2
    fi
    # the data beside the verdicts: what was simulated, in how long
    (   # shellcheck disable=SC1091
        . "$dir/dataset.env"
        printf '#   data %s: %s stills of %s^2, %s, simulated in %s s; per still %s reflections over 10 photons, %s over 50\n' \
            "${dir##*/}" "$STILLS" "$DETPIXELS" "$SPACE_GROUP" "$SIM_SECONDS" "$REFL_OVER_10_PER_STILL" \
            "$REFL_OVER_50_PER_STILL" ) >> "$summary"
}

# plan DATA START HKL OUT: the start model as a plan with its structure factors
plan() {
    local data=$1 start=$2 hkl=$3 out=$4 log=$4.log
    # shellcheck disable=SC1091
    . "$data/dataset.env"
    # shellcheck disable=SC2086
    "$NB_BIN/nb-geom" -q -expt "$start" $XTAL 2> "$log" | "$NB_BIN/nb-hkl" -q "${thr[@]}" -hkl "$hkl" > "$out" 2>> "$log"
}

# fit GATE DATA PLAN OUTDIR REFINE REFINE_FRAME [EXTRA...]: nb-fit over every still
# of DATA, the refined plan in OUTDIR/fit.nbs, its standard error in fit.log, the
# experiment list in fit.expt; FIT_RC its status; FIT_SECONDS its wall time.
# A launcher (mpirun -n 2) goes in LAUNCH.
fit() {
    local gate=$1 data=$2 plan=$3 out=$4 refine=$5 frame=$6; shift 6
    local obs=() f args=()
    for f in "$data"/still_*.cbf; do obs+=(--observed "$f"); done
    [ -n "$refine" ] && args+=(--refine "$refine")
    [ -n "$frame" ] && args+=(--refine-frame "$frame")
    mkdir -p "$out"
    local t0 t1
    t0=$(now)
    set +e
    # shellcheck disable=SC2086
    ${LAUNCH:-} "$NB_BIN/nb-fit" "${thr[@]}" "${obs[@]}" "${args[@]}" "$@" $FIT_FLAGS -o "$out/fit.nbs" "$plan" \
        2> "$out/fit.log"
    FIT_RC=$?
    set -e
    t1=$(now)
    FIT_SECONDS=$(elapsed "$t0" "$t1")
    case $FIT_RC in
        0|3) ;;
        *) stop "$gate" "nb-fit failed (exit $FIT_RC; see $out/fit.log)" "$out/fit.log" ;;
    esac
    "$NB_BIN/nb-convert" -q -o "$out/fit.expt" "$out/fit.nbs" 2> "$out/convert.log" \
        || stop "$gate" "nb-convert -o fit.expt of the refined plan failed (one experiment per frame)" \
                "$out/convert.log"
}

per_still() { awk -v s="$1" -v n="$2" 'BEGIN { printf "%.2f", s / n }'; }

# evaluate GATE ARGS...: evaluate.py's verdict and its JSON summary as the gate's record
evaluate() {
    local gate=$1 j=$work/$1.json; shift
    set +e
    "$PY" "$here/evaluate.py" "$@" --gate "$gate" --json "$j" > "$work/$gate.evaluate.txt" 2>&1
    local rc=$?
    set -e
    local figures
    figures=$("$PY" - "$j" <<'EOF' 2>/dev/null || echo '{}'
import json, sys
s = json.load(open(sys.argv[1]))
s.pop("per_frame", None)
print(json.dumps(s, sort_keys=True))
EOF
)
    EVAL_RC=$rc EVAL_FIGURES=$figures
    [ $rc -le 1 ] || stop "$gate" "evaluate.py could not measure (see $work/$gate.evaluate.txt)" \
                          "$work/$gate.evaluate.txt"
}

g1data=$work/g1-data
mkdir -p "$work"

# ---- G1 ---------------------------------------------------------------------------------
if want G1 || want G2 || want G4 || want G5; then
    g=G5
    want G4 && g=G4
    want G2 && g=G2
    want G1 && g=G1
    simulate "$g1data" "${SIM_SMALL[@]}" --seed 1 || stop $g "simulate.sh failed" "$g1data.log"
fi
if want G1 || want G4 || want G5; then
    g=G1
    want G1 || { g=G5; want G4 && g=G4; }   # G4 or G5 alone needs G1's start: its failures are theirs
    "$PY" "$here/perturb.py" --angle 0.3 --cell-scale 1.003 --seed 11 --record "$work/g1-start.json" \
        "$g1data/model.expt" -o "$work/g1-start.expt"
    need $g nb-geom -expt "a plan from a DIALS experiment list, one frame per still"
    need $g nb-fit --refine-frame "per-frame parameters"
    plan "$g1data" "$work/g1-start.expt" "$g1data/F.hkl" "$work/g1-plan.nbs" \
        || stop $g "nb-geom -expt g1-start.expt | nb-hkl failed" "$work/g1-plan.nbs.log"
fi
if want G1; then
    . "$g1data/dataset.env"
    fit G1 "$g1data" "$work/g1-plan.nbs" "$work/g1" "$G1_REFINE" "$G1_REFINE_FRAME"
    evaluate G1 "$g1data/model.expt" "$work/g1/fit.expt" --fit-log "$work/g1/fit.log" --fit-status "$FIT_RC"
    v=$([ "$EVAL_RC" = 0 ] && echo PASS || echo FAIL)
    record G1 "$v" "$("$PY" -c 'import json,sys; s=json.loads(sys.argv[1]); o=s.get("orientation_deg",{}); f=lambda x: "-" if x is None else "%.4g" % x; print("orientation median %s max %s deg, cell off %s %%, failed %s" % (f(o.get("median")), f(o.get("max")), f(100 * s["cell_rel_max_abs"]) if s.get("cell_rel_max_abs") is not None else "-", s.get("reported_failed")))' "$EVAL_FIGURES"); fit $FIT_SECONDS s, $(per_still "$FIT_SECONDS" "$STILLS") s/still" "$EVAL_FIGURES"
fi

# ---- G2 ---------------------------------------------------------------------------------
if want G2; then
    "$PY" "$here/perturb.py" --angle 3 --cell-scale 1.003 --distance 10 --seed 12 \
        --record "$work/g2-start.json" "$g1data/model.expt" -o "$work/g2-start.expt"
    need G2 nb-geom -expt "a plan from a DIALS experiment list, one frame per still"
    need G2 nb-fit --refine-frame "per-frame parameters"
    plan "$g1data" "$work/g2-start.expt" "$g1data/F.hkl" "$work/g2-plan.nbs" \
        || stop G2 "nb-geom -expt g2-start.expt | nb-hkl failed" "$work/g2-plan.nbs.log"
    . "$g1data/dataset.env"
    fit G2 "$g1data" "$work/g2-plan.nbs" "$work/g2" "$G2_REFINE" "$G2_REFINE_FRAME"
    evaluate G2 "$g1data/model.expt" "$work/g2/fit.expt" --fit-log "$work/g2/fit.log" --fit-status "$FIT_RC"
    v=$([ "$EVAL_RC" = 0 ] && echo PASS || echo FAIL)
    record G2 "$v" "$("$PY" -c 'import json,sys; s=json.loads(sys.argv[1]); o=s.get("orientation_deg",{}); f=lambda x: "-" if x is None else "%.4g" % x; print("recovered %s of %s, failed %s, orientation max %s deg, distance off %s mm" % (s.get("recovered"), s.get("frames"), s.get("reported_failed"), f(o.get("max")), f(s.get("distance_mm_max_abs"))))' "$EVAL_FIGURES"); fit $FIT_SECONDS s, $(per_still "$FIT_SECONDS" "$STILLS") s/still" "$EVAL_FIGURES"
fi

# ---- G3 ---------------------------------------------------------------------------------
if want G3; then
    g3data=$work/g3-data
    simulate "$g3data" "${SIM_G3[@]}" --space-group "$G3_SPACE_GROUP" --seed 3 \
        || stop G3 "simulate.sh failed" "$g3data.log"
    "$PY" "$here/perturb.py" --angle 0.005 --seed 13 --record "$work/g3-start.json" \
        "$g3data/model.expt" -o "$work/g3-start.expt"
    need G3 nb-geom -expt "a plan from a DIALS experiment list, one frame per still"
    need G3 nb-fit --refine-F "structure factors refined over every still"
    need G3 nb-fit --F-out "the refined F written as 'h k l F sigma multiplicity'"
    G3_INTEGRATED=''
    if command -v dials.scale > /dev/null && "$NB_BIN/nb-fit" --help 2>&1 | grep -q -- --integrated; then
        G3_INTEGRATED=1
    fi
    [ -z "$G3_REFINE_FRAME" ] || need G3 nb-fit --refine-frame "per-frame parameters"
    plan "$g3data" "$work/g3-start.expt" "$g3data/flat.hkl" "$work/g3-plan.nbs" \
        || stop G3 "nb-geom -expt g3-start.expt | nb-hkl -hkl flat.hkl failed" "$work/g3-plan.nbs.log"
    . "$g3data/dataset.env"
    fit G3 "$g3data" "$work/g3-plan.nbs" "$work/g3" "$G3_REFINE" "$G3_REFINE_FRAME" \
        --refine-F --space-group "$G3_SPACE_GROUP" --F-out "$work/g3/F_fit.hkl" \
        ${G3_INTEGRATED:+--integrated "$work/g3/integrated.refl"}
    [ -s "$work/g3/F_fit.hkl" ] || stop G3 "nb-fit --F-out wrote no $work/g3/F_fit.hkl" "$work/g3/fit.log"
    evaluate G3 --F --truth-hkl "$g3data/F.hkl" --fit-hkl "$work/g3/F_fit.hkl" \
        --truth-jsonl "$g3data/truth.jsonl" --space-group "$G3_SPACE_GROUP"
    v=$([ "$EVAL_RC" = 0 ] && echo PASS || echo FAIL)
    [ "$FIT_RC" = 0 ] || v=FAIL
    record G3 "$v" "$("$PY" -c 'import json,sys; s=json.loads(sys.argv[1]); f=lambda x: "-" if x is None else "%.4f" % x; print("CC fit %s (%s with the missing as 0), CC Monte-Carlo %s over %s reflections (coverage %s)" % (f(s.get("cc_fit")), f(s.get("cc_fit_missing_as_zero")), f(s.get("cc_monte_carlo")), s.get("reflections_selected"), f(s.get("coverage"))))' "$EVAL_FIGURES"); nb-fit exit $FIT_RC; fit $FIT_SECONDS s, $(per_still "$FIT_SECONDS" "$STILLS") s/still" "$EVAL_FIGURES"
fi

# ---- G3i: G3's intensities through dials.scale and dials.merge ----------------------
if want G3; then
    if [ -z "$G3_INTEGRATED" ]; then
        record G3i NOT-RUN "no dials.scale (apt-get install dials) or no nb-fit --integrated"
    else
        g3=$work/g3
        set +e
        # shellcheck disable=SC2086
        (cd "$g3" && dials.scale fit.expt integrated.refl $DIALS_SCALE_FLAGS output.experiments=scaled.expt \
            output.reflections=scaled.refl output.html=None output.log=dials.scale.log > scale.out 2>&1 &&
         dials.merge scaled.expt scaled.refl $DIALS_MERGE_FLAGS output.mtz=merged.mtz output.html=None \
            output.log=dials.merge.log > merge.out 2>&1)
        rc=$?
        set -e
        if [ "$rc" != 0 ]; then
            record G3i FAIL "dials.scale or dials.merge failed on nb-fit --integrated's table (see $g3/scale.out, $g3/merge.out)"
        else
            set +e
            "$PY" "$here/merge_cc.py" --merged "$g3/merged.mtz" --truth-hkl "$g3data/F.hkl" \
                --truth-jsonl "$g3data/truth.jsonl" --fit-hkl "$g3/F_fit.hkl" --space-group "$G3_SPACE_GROUP" \
                --json "$work/G3i.json" > "$work/G3i.txt" 2>&1
            rc=$?
            set -e
            cat "$work/G3i.txt" >&2
            [ "$rc" = 2 ] && stop G3i "merge_cc.py could not read its input" "$work/G3i.txt"
            v=$([ "$rc" = 0 ] && echo PASS || echo FAIL)
            record G3i "$v" "$("$PY" -c 'import json,sys; s=json.load(open(sys.argv[1])); f=lambda x: "-" if x is None else "%.4f" % x; print("CC(merged I, F^2) %s, Monte-Carlo %s over %s reflections (coverage %s); --refine-F F^2 %s" % (f(s.get("cc_merged_I")), f(s.get("cc_monte_carlo_I")), s.get("reflections_merged"), f(s.get("coverage")), f(s.get("cc_refine_F_I"))))' "$work/G3i.json")" "$(cat "$work/G3i.json")"
        fi
    fi
fi

# ---- G4 ---------------------------------------------------------------------------------
if want G4; then
    command -v "$MPIRUN" > /dev/null || stop G4 "no $MPIRUN (apt-get install openmpi-bin; or set MPIRUN)" ""
    if [ -z "${MPIRUN_FLAGS+set}" ]; then
        MPIRUN_FLAGS=
        if "$MPIRUN" --version 2>&1 | grep -q 'Open MPI'; then
            MPIRUN_FLAGS=--oversubscribe
            [ "$(id -u)" = 0 ] && MPIRUN_FLAGS="$MPIRUN_FLAGS --allow-run-as-root"
        fi
    fi
    . "$g1data/dataset.env"
    if [ ! -s "$work/g1/fit.expt" ]; then   # G4 alone: the one-process fit first
        LAUNCH='' fit G4 "$g1data" "$work/g1-plan.nbs" "$work/g1" "$G1_REFINE" "$G1_REFINE_FRAME"
    fi
    LAUNCH="$MPIRUN -n 2 $MPIRUN_FLAGS" fit G4 "$g1data" "$work/g1-plan.nbs" "$work/g4" "$G1_REFINE" "$G1_REFINE_FRAME"
    evaluate G4 --compare "$work/g1/fit.expt" "$work/g4/fit.expt" --rtol 1e-6
    v=$([ "$EVAL_RC" = 0 ] && echo PASS || echo FAIL)
    record G4 "$v" "$("$PY" -c 'import json,sys; s=json.loads(sys.argv[1]); print("largest relative difference %s (%s)" % (s.get("max_rel_diff_expt"), s.get("where")))' "$EVAL_FIGURES"); mpirun -n 2 fit $FIT_SECONDS s, $(per_still "$FIT_SECONDS" "$STILLS") s/still" "$EVAL_FIGURES"
fi

# ---- G5 ---------------------------------------------------------------------------------
if want G5; then
    command -v dials.find_spots > /dev/null || stop G5 "no dials.find_spots (apt-get install dials)" ""
    need G5 nb-fit --spots "DIALS's reflection table as the observed spots"
    # G1's start, its experiments named as dials.index names them (UUIDs, drawn
    # from a seed: the same each run), so the refined list loads beside the truth's
    "$PY" - "$work/g1-start.expt" "$work/g5-start.expt" <<'EOF'
import json, random, sys, uuid
l = json.load(open(sys.argv[1]))
draw = random.Random(5)
for e in l["experiment"]:
    e["identifier"] = str(uuid.UUID(int=draw.getrandbits(128), version=4))
json.dump(l, open(sys.argv[2], "w"), indent=1)
EOF
    plan "$g1data" "$work/g5-start.expt" "$g1data/F.hkl" "$work/g5-plan.nbs" \
        || stop G5 "nb-geom -expt g5-start.expt | nb-hkl failed" "$work/g5-plan.nbs.log"
    dials.find_spots "$work/g5-start.expt" nproc="${threads:-$(nproc)}" output.reflections="$work/g5-strong.refl" \
        output.log="$work/g5-find.log" > /dev/null 2>&1 || stop G5 "dials.find_spots failed" "$work/g5-find.log"
    . "$g1data/dataset.env"
    fit G5 "$g1data" "$work/g5-plan.nbs" "$work/g5-own" "$G1_REFINE" "$G1_REFINE_FRAME" -v
    fit G5 "$g1data" "$work/g5-plan.nbs" "$work/g5" "$G1_REFINE" "$G1_REFINE_FRAME" -v --spots "$work/g5-strong.refl"
    set +e
    "$PY" "$here/compare_fits.py" "$work/g5-own/fit.log" "$work/g5/fit.log" --gate --json "$work/G5.json" \
        > "$work/G5.compare.txt" 2>&1
    rc=$?
    "$PY" - "$work/g5-start.expt" "$work/g5/fit.expt" <<'EOF' >> "$work/G5.compare.txt" 2>&1
import json, sys
ids = [[e["identifier"] for e in json.load(open(p))["experiment"]] for p in sys.argv[1:]]
print("identifiers kept: %s" % (ids[0] == ids[1]))
sys.exit(ids[0] != ids[1])
EOF
    ids_rc=$?
    dials.compare_orientation_matrices "$g1data/model.expt" "$work/g5/fit.expt" > "$work/g5-compare.log" 2>&1
    cmp_rc=$?
    set -e
    [ $rc -le 1 ] || stop G5 "compare_fits.py could not measure" "$work/G5.compare.txt"
    v=$([ $rc = 0 ] && [ $ids_rc = 0 ] && [ $cmp_rc = 0 ] && echo PASS || echo FAIL)
    record G5 "$v" "$(grep '^largest' "$work/G5.compare.txt"); identifiers kept $([ $ids_rc = 0 ] && echo yes || echo no), dials.compare_orientation_matrices $([ $cmp_rc = 0 ] && echo ran || echo failed); fit $FIT_SECONDS s, $(per_still "$FIT_SECONDS" "$STILLS") s/still" "$("$PY" -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))))' "$work/G5.json" 2>/dev/null || echo null)"
fi

finish
exit $status

#!/usr/bin/env bash
# shellcheck disable=SC2153  # CELL, STILLS ... come from a dataset.env, sourced
# run-drawn.sh - the gates of issue 46 on drawn datasets: for each seed,
# draw.py draws and simulates a dataset, a start of each kind is made, nb-fit
# refines it and evaluate.py judges it; a table and a JSON of every dataset,
# and a PASS or FAIL line per gate over all of them.
#
#   near   each crystal turned 0.3 degrees, its cell 0.3 % long (perturb.py):
#          nb-fit exits 0 and every frame is recovered (within 0.02 degrees,
#          its cell within 0.1 %)
#   far    3 degrees, the cell 3 % long, the detector 10 mm off (perturb.py;
#          --refine distance too): at least 90 % of all frames recovered, 75 %
#          of each dataset's, the rest reported failed (exit 3), none wrong
#   dials  dials.index of each still, the cell and space group known
#          (dials_start.py): as far; a still DIALS cannot index counts as not
#          recovered ("not started")
#
# Usage: run-drawn.sh --seeds LIST --work DIR [OPTIONS]
#   --seeds LIST      seeds, comma-separated, or ranges A-B (1-20,31)
#   --work DIR        where everything goes: DIR/seed-S/data (the dataset),
#                     DIR/seed-S/KIND/ (start, plan, fit, logs, verdict)
#   --starts LIST     of near, far, dials (default all three)
#   --stills N        stills a dataset (default 8)
#   --threads N       threads of every tool; DIALS indexes N stills at a time
#                     (default 2)
#   --cell auto|edges|lattice|shared
#                     the cell refined: per frame, its edges (cell_a, cell_b,
#                     cell_c) or every number its lattice leaves free (P 1: the
#                     angles too, P 2 and P 21: beta); shared: those numbers
#                     once for every frame (--refine); auto (the default): per
#                     frame from near starts (each frame's own cell, as the
#                     issue's first measurement), shared from far and DIALS
#                     starts (one crystal form: what G2 and a user of DIALS's
#                     stills refine)
#   --fit-timeout S   stop a fit after S seconds: a failure of every frame
#                     (default 0: none)
#   --fresh           draw the datasets and index them with DIALS again
#                     (else a dataset whose draw.json is for the same seed and
#                     stills is kept, and so is its DIALS start)
#   --tables-only     run nothing: the tables and the gates again from the
#                     verdicts already in DIR (runs of other seeds together)
#   --results FILE    also copy the table there
# Environment: NB_BIN (the tools: default this checkout's bin/, else PATH),
# PYTHON (default /usr/bin/python3), FIT_FLAGS (more nb-fit flags, every fit).
# Every fit: nb-geom -q -expt START.expt $XTAL | nb-hkl -q -hkl F.hkl, then
# nb-fit -v --observed STILL... --refine-frame rot_x,rot_y,rot_z[,CELL...],scale
# [--refine [distance,]CELL...] (distance from far starts; CELL where the cell is shared).
# Writes DIR/results.txt (a line per dataset and start: the drawn
# parameters, recovered / failed / wrong / not started frames, the worst
# accepted frame, nb-fit's status and seconds; then a line per gate) and
# DIR/results.json; exit 0 when every gate run passes, 1 when one fails, 2
# usage.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/dataset/find-tools.sh
. "$here/find-tools.sh"
PY=${PYTHON:-/usr/bin/python3}
FIT_FLAGS=${FIT_FLAGS:-}

usage() { local fd=2; [ "${1:-2}" != 0 ] || fd=1; sed -n '/^# Usage:/,/^# usage\./p' "$0" | sed 's/^# \{0,1\}//' >&"$fd"; exit "${1:-2}"; }
bad() { echo "run-drawn.sh: $*" >&2; exit 2; }
say() { echo "run-drawn.sh: $*" >&2; }

seeds='' work='' starts=near,far,dials stills=8 threads=2 cell_mode=auto fresh=0 results='' fit_timeout=0
tables_only=0
while [ $# -gt 0 ]; do
    case $1 in
        --seeds) seeds=${2-}; shift 2 || bad "--seeds needs a value" ;;
        --work) work=${2-}; shift 2 || bad "--work needs a value" ;;
        --starts) starts=${2-}; shift 2 || bad "--starts needs a value" ;;
        --stills) stills=${2-}; shift 2 || bad "--stills needs a value" ;;
        --threads) threads=${2-}; shift 2 || bad "--threads needs a value" ;;
        --cell) cell_mode=${2-}; shift 2 || bad "--cell needs a value" ;;
        --fit-timeout) fit_timeout=${2-}; shift 2 || bad "--fit-timeout needs a value" ;;
        --fresh) fresh=1; shift ;;
        --tables-only) tables_only=1; shift ;;
        --results) results=${2-}; shift 2 || bad "--results needs a value" ;;
        -h|--help) usage 0 ;;
        *) echo "run-drawn.sh: unknown argument '$1'" >&2; usage ;;
    esac
done
[ -n "$seeds" ] || bad "--seeds is required (e.g. --seeds 1-20)"
[ -n "$work" ] || bad "--work is required (where the datasets and fits go)"
case $stills in ''|*[!0-9]*|0) bad "--stills must be a positive whole number" ;; esac
case $threads in ''|*[!0-9]*|0) bad "--threads must be a positive whole number" ;; esac
case $cell_mode in auto|edges|lattice|shared) ;; *) bad "--cell must be auto, edges, lattice or shared, not '$cell_mode'" ;; esac
case $fit_timeout in ''|*[!0-9]*) bad "--fit-timeout must be a whole number of seconds" ;; esac
kinds=()
for k in ${starts//,/ }; do
    case $k in near|far|dials) kinds+=("$k") ;; *) bad "no start kind '$k' (near, far, dials)" ;; esac
done
[ ${#kinds[@]} -gt 0 ] || bad "--starts names no start kind"
seed_list=()
for item in ${seeds//,/ }; do
    if [[ $item =~ ^([0-9]+)-([0-9]+)$ ]]; then
        [ "${BASH_REMATCH[1]}" -le "${BASH_REMATCH[2]}" ] || bad "the seed range '$item' is empty"
        for ((s = BASH_REMATCH[1]; s <= BASH_REMATCH[2]; s++)); do seed_list+=("$s"); done
    elif [[ $item =~ ^[0-9]+$ ]]; then
        seed_list+=("$item")
    else
        bad "'$item' is not a seed (a whole number) or a range A-B"
    fi
done
find_tools nb-geom nb-hkl nb-sim nb-noise nb-convert nb-fit nb-amorphous nb-math || exit 1
"$PY" -c 'import numpy' 2>/dev/null || { echo "run-drawn.sh: $PY has no numpy" >&2; exit 1; }

mkdir -p "$work"
work=$(cd "$work" && pwd)
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

# the dataset of seed S in DIR: drawn again unless its draw.json is for this seed and stills
draw() {
    local seed=$1 dir=$2
    if [ "$fresh" = 0 ] && [ -s "$dir/draw.json" ] && "$PY" - "$dir/draw.json" "$seed" "$stills" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
sys.exit(0 if r.get("seed") == int(sys.argv[2]) and r.get("stills") == int(sys.argv[3]) else 1)
EOF
    then
        say "seed $seed: reusing the dataset in $dir"
        return 0
    fi
    rm -rf "$dir"
    mkdir -p "$dir"
    "$PY" "$here/draw.py" --seed "$seed" --stills "$stills" --threads "$threads" "$dir" 2> "$dir.log" ||
        { tail -n 3 "$dir.log" >&2; return 1; }
    tail -n 1 "$dir.log" >&2
}

# the stills of a start, in its order: DATA/still_NNN.cbf of its frames' numbers (nb-convert's
# nb_frame, or identifiers nb-frame-N as dials_start.py writes them)
observed_of() {
    "$PY" - "$1" "$2" "$3" <<'EOF'
import json, re, sys
start, data, template = sys.argv[1:]
run = re.search("#+", template).group(0)
for e in json.load(open(start))["experiment"]:
    n = e["nb_frame"] if "nb_frame" in e else int(re.match(r"^nb-frame-(\d+)$", e["identifier"]).group(1))
    print("--observed")
    print("%s/%s" % (data, template.replace(run, "%0*d" % (len(run), n))))
EOF
}

# the cell values refined for space group $1: the edges, or (lattice, shared) every
# number the lattice leaves free
cell_params() {
    local cell=cell_a,cell_b,cell_c
    if [ "$cell_mode" != edges ]; then
        case $1 in P1) cell=$cell,cell_alpha,cell_beta,cell_gamma ;; P2|P21) cell=$cell,cell_beta ;; esac
    fi
    echo "$cell"
}

# is the cell shared from start kind $1?
cell_shared() { [ "$cell_mode" = shared ] || { [ "$cell_mode" = auto ] && [ "$1" != near ]; }; }

# the per-frame parameters from start kind $2 (space group $1): turns, the cell unless shared, scale
frame_params() {
    if cell_shared "$2"; then echo "rot_x,rot_y,rot_z,scale"
    else echo "rot_x,rot_y,rot_z,$(cell_params "$1"),scale"; fi
}

# the shared parameters (--refine) from start kind $2: the distance from far starts, the cell where shared
shared_params() {
    local list=()
    [ "$2" = far ] && list+=(distance)
    cell_shared "$2" && list+=("$(cell_params "$1")")
    local IFS=,
    echo "${list[*]}"
}

# a verdict where nothing was fitted (no start: every frame not_started; no
# fit.expt to measure: every frame unfitted): every frame unrecovered
no_fit() {   # no_fit KIND DIR FRAMES STATUS not_started|unfitted WHY
    "$PY" - "$@" <<'EOF'
import json, sys
kind, d, frames, status, what, why = sys.argv[1:]
r = {"gate": kind, "pass": False, "frames": int(frames), "recovered": 0, "failed": 0, "wrong": 0, "floor": 0,
     "not_started": 0, "unfitted": 0, "fit_status": None if status == "-" else int(status), "reasons": [why]}
r[what] = int(frames)
r["frames_started"] = int(frames) - r["not_started"]
if what == "not_started":
    # no still started (DIALS indexed none): nothing for a fit to recover, the dataset not judged
    r.update({"pass": True, "pass_at_floor": True, "judged": False, "note": why, "reasons": []})
else:
    r["pass_at_floor"] = False
json.dump(r, open(d + "/verdict.json", "w"), indent=1, sort_keys=True)
EOF
}

# one start of one dataset: start, plan, fit, verdict into DIR/seed-S/KIND
run_kind() {
    local seed=$1 kind=$2 data=$3 dir=$4
    mkdir -p "$dir"
    rm -f "$dir/verdict.json" "$dir/fit.nbs" "$dir/fit.expt" "$dir/fit.log" "$dir/run.json" "$dir/start-errors.json"
    # dataset.env: CELL, SPACE_GROUP, STILLS, XTAL, TEMPLATE ...
    # shellcheck disable=SC1091,SC2153
    . "$data/dataset.env"
    local t0 t1 t2 rc=- start_s=0 fit_s=0 refine=()
    t0=$(now)
    case $kind in
        near) "$PY" "$here/perturb.py" --angle 0.3 --cell-scale 1.003 --seed $((seed * 10 + 1)) \
                  --record "$dir/start.json" "$data/model.expt" -o "$dir/start.expt" 2> "$dir/start.log" ;;
        far) "$PY" "$here/perturb.py" --angle 3 --cell-scale 1.03 --distance 10 --seed $((seed * 10 + 2)) \
                 --record "$dir/start.json" "$data/model.expt" -o "$dir/start.expt" 2> "$dir/start.log" ;;
        dials)
            if [ "$fresh" = 1 ] || [ ! -s "$dir/dials.json" ] || [ "$data/draw.json" -nt "$dir/dials.json" ]; then
                rm -f "$dir/start.expt" "$dir/dials.json"
                # shellcheck disable=SC2086
                "$PY" "$here/dials_start.py" --cell "$CELL" --space-group "$SPACE_GROUP" --jobs "$threads" \
                    --work "$dir/dials" --record "$dir/dials.json" -o "$dir/start.expt" "$data"/still_*.cbf \
                    2> "$dir/start.log" || true
            else
                say "seed $seed: reusing the DIALS start in $dir"
            fi ;;
    esac
    t1=$(now)
    start_s=$(elapsed "$t0" "$t1")
    local shared
    shared=$(shared_params "$SPACE_GROUP" "$kind")
    [ -n "$shared" ] && refine=(--refine "$shared")
    # the start's own errors (DIALS's quality, or what perturb.py did)
    if [ -s "$dir/start.expt" ]; then
        "$PY" "$here/evaluate.py" "$data/model.expt" "$dir/start.expt" --space-group "$SPACE_GROUP" \
            --frame-map "$dir/start.expt" --json "$dir/start-errors.json" > /dev/null 2>&1 || true
    fi
    # shellcheck disable=SC2086
    if [ ! -s "$dir/start.expt" ]; then
        no_fit "$kind" "$dir" "$STILLS" - not_started "no start: $(tail -n 1 "$dir/start.log" 2>/dev/null)"
    elif ! "$NB_BIN/nb-geom" -q -expt "$dir/start.expt" $XTAL 2> "$dir/plan.log" |
            "$NB_BIN/nb-hkl" -q --threads "$threads" -hkl "$data/F.hkl" > "$dir/plan.nbs" 2>> "$dir/plan.log"; then
        no_fit "$kind" "$dir" "$STILLS" - unfitted "nb-geom -expt start.expt | nb-hkl made no plan: $(tail -n 1 "$dir/plan.log")"
    else
        local obs
        mapfile -t obs < <(observed_of "$dir/start.expt" "$data" "$TEMPLATE")
        set +e
        # shellcheck disable=SC2086
        timeout "$fit_timeout" "$NB_BIN/nb-fit" -v --threads "$threads" "${obs[@]}" --refine-frame "$(frame_params "$SPACE_GROUP" "$kind")" \
            "${refine[@]}" $FIT_FLAGS -o "$dir/fit.nbs" "$dir/plan.nbs" 2> "$dir/fit.log"
        rc=$?
        set -e
        t2=$(now)
        fit_s=$(elapsed "$t1" "$t2")
        if [ "$rc" = 124 ] && [ "$fit_timeout" != 0 ]; then
            no_fit "$kind" "$dir" "$STILLS" "$rc" unfitted "nb-fit ran past --fit-timeout $fit_timeout s and was stopped"
        elif [ "$rc" != 0 ] && [ "$rc" != 3 ]; then
            no_fit "$kind" "$dir" "$STILLS" "$rc" unfitted "nb-fit exited $rc: $(tail -n 1 "$dir/fit.log")"
        elif ! "$NB_BIN/nb-convert" -q -o "$dir/fit.expt" "$dir/fit.nbs" 2> "$dir/convert.log"; then
            no_fit "$kind" "$dir" "$STILLS" "$rc" unfitted "nb-convert -o fit.expt failed: $(tail -n 1 "$dir/convert.log")"
        else
            "$PY" "$here/evaluate.py" "$data/model.expt" "$dir/fit.expt" --fit-log "$dir/fit.log" \
                --fit-status "$rc" --space-group "$SPACE_GROUP" --frame-map "$dir/start.expt" --gate "$kind" \
                --json "$dir/verdict.json" > "$dir/evaluate.txt" 2>&1 || true
            [ -s "$dir/verdict.json" ] ||
                no_fit "$kind" "$dir" "$STILLS" "$rc" unfitted "evaluate.py measured nothing: $(tail -n 1 "$dir/evaluate.txt")"
        fi
    fi
    printf '{"start_seconds": %s, "fit_seconds": %s, "fit_status": %s, "refine_frame": "%s", "refine": "%s"}\n' \
        "$start_s" "$fit_s" "$([ "$rc" = - ] && echo null || echo "$rc")" "$(frame_params "$SPACE_GROUP" "$kind")" \
        "$shared" > "$dir/run.json"
    "$PY" - "$dir" "$seed" "$kind" <<'EOF' >&2
import json, sys
d, seed, kind = sys.argv[1:]
v, r = json.load(open(d + "/verdict.json")), json.load(open(d + "/run.json"))
print("run-drawn.sh: seed %s %-5s %s: %s of %s recovered, %s failed, %s wrong, %s not started; nb-fit %s in %s s"
      % (seed, kind, "PASS" if v["pass"] else "FAIL", v["recovered"], v["frames"], v.get("failed"), v.get("wrong"),
         v.get("not_started"), r["fit_status"], r["fit_seconds"]))
EOF
}

status=0
t_all=$(now)
[ "$tables_only" = 1 ] && seed_list_run=() || seed_list_run=("${seed_list[@]}")
for seed in "${seed_list_run[@]}"; do
    sd=$work/seed-$seed
    mkdir -p "$sd"
    if ! draw "$seed" "$sd/data"; then
        say "seed $seed: no dataset drawn (see $sd/data.log)"
        for kind in "${kinds[@]}"; do
            mkdir -p "$sd/$kind"
            no_fit "$kind" "$sd/$kind" "$stills" - not_started "no dataset drawn: $(tail -n 1 "$sd/data.log")"
            echo '{"start_seconds": 0, "fit_seconds": 0, "fit_status": null}' > "$sd/$kind/run.json"
        done
        continue
    fi
    for kind in "${kinds[@]}"; do
        run_kind "$seed" "$kind" "$sd/data" "$sd/$kind"
    done
done
total=$(elapsed "$t_all" "$(now)")
seconds=(--seconds "$total")
[ "$tables_only" = 1 ] && seconds=()

# the table, the JSON and the gates over all datasets
verdicts=()
for seed in "${seed_list[@]}"; do
    for kind in "${kinds[@]}"; do verdicts+=("$work/seed-$seed/$kind/verdict.json"); done
done
"$PY" "$here/drawn_table.py" --work "$work" "${seconds[@]}" --seeds "${seed_list[*]}" --starts "${kinds[*]}" \
    --cell "$cell_mode" > "$work/results.txt" || status=1
"$PY" "$here/evaluate.py" --overall "${verdicts[@]}" --json "$work/gates.json" > "$work/gates.txt" 2>&1 || status=1
grep -E '^(near|far|dials) ' "$work/gates.txt" >> "$work/results.txt" || true
"$PY" - "$work" <<'EOF'
import json, os, sys
w = sys.argv[1]
table = json.load(open(os.path.join(w, "results.table.json")))
table["gates"] = json.load(open(os.path.join(w, "gates.json")))
with open(os.path.join(w, "results.json.tmp"), "w") as fp:
    json.dump(table, fp, indent=1, sort_keys=True)
    fp.write("\n")
os.replace(os.path.join(w, "results.json.tmp"), os.path.join(w, "results.json"))
os.remove(os.path.join(w, "results.table.json"))
EOF
cat "$work/results.txt"
[ -n "$results" ] && cp "$work/results.txt" "$results"
say "results in $work/results.txt and results.json${seconds:+ ($total s)}"
exit $status

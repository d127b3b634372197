#!/usr/bin/env bash
# sigma-runs.sh - are the dataset fit's sigmas honest (issue 46, deliverable 3)?
# Simulates stills whose truth is known, refines them four ways, and prints
# sigmas.py's table of errors over sigmas for each:
#
#   A   turns, scales and F from a flat F, jointly (--refine-F --F-prior 0)
#   B   turns, each frame's cell and scale, the true F, from a near start
#   C   turns and scales, the cell shared, the true F, from a near start
#   D   turns, scales, the shared cell and F jointly from a flat F (--F-prior 0)
#
# The near start: perturb.py's 0.3 degrees and cell x 1.003; A's: 0.05 degrees.
#
# Usage: sigma-runs.sh [OPTIONS]
#   --work DIR        where the data and the fits go (default /tmp/nb-sigmas)
#   --stills N        stills (default 40)
#   --seed S          the data's seed (default 21)
#   --runs LIST       some of A,B,C,D (default all)
#   --threads N       threads of every stage (default: all cores)
# The data: simulate.sh --cell "52 61 73 90 90 90" --detpixels 512 --pixel 0.2
# --distance 120 --N 14 --water 1 (P 21 21 21, Wilson F to 2 A, Poisson noise).
# Environment: NB_BIN (the tools), PYTHON (default /usr/bin/python3).  Writes DIR/sigmas.txt and
# DIR/RUN.json; exit 0 when every run's fit exited 0 and its table was written.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/find-tools.sh"
usage() { local fd=2; [ "${1:-2}" != 0 ] || fd=1; sed -n '/^# Usage:/,/^# Environment/p' "$0" | sed 's/^# \{0,1\}//' >&"$fd"; exit "${1:-2}"; }

work=/tmp/nb-sigmas stills=40 seed=21 runs=A,B,C,D thr=()
while [ $# -gt 0 ]; do
    case $1 in
        --work) work=${2:?}; shift 2 ;;
        --stills) stills=${2:?}; shift 2 ;;
        --seed) seed=${2:?}; shift 2 ;;
        --runs) runs=${2:?}; shift 2 ;;
        --threads) thr=(--threads "${2:?}"); shift 2 ;;
        -h|--help) usage 0 ;;
        *) echo "sigma-runs.sh: unknown argument '$1'" >&2; usage ;;
    esac
done
[[ $stills =~ ^[1-9][0-9]*$ ]] || { echo "sigma-runs.sh: --stills must be a positive whole number, not '$stills'" >&2; exit 2; }
[[ $seed =~ ^[0-9]+$ ]] || { echo "sigma-runs.sh: --seed must be a whole number, not '$seed'" >&2; exit 2; }
for r in ${runs//,/ }; do
    case $r in A|B|C|D) ;; *) echo "sigma-runs.sh: no run '$r' (A B C D)" >&2; exit 2 ;; esac
done
want() { case ",$runs," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
find_tools nb-geom nb-hkl nb-fit nb-convert || exit 2
PY=${PYTHON:-/usr/bin/python3}
mkdir -p "$work"
work=$(cd "$work" && pwd)
data=$work/data

if [ ! -s "$data/dataset.env" ]; then
    "$here/simulate.sh" --cell "52 61 73 90 90 90" --stills "$stills" --detpixels 512 --pixel 0.2 --distance 120 \
        --N 14 --water 1 --seed "$seed" "${thr[@]}" "$data" > "$work/simulate.log" 2>&1 \
        || { cat "$work/simulate.log" >&2; echo "sigma-runs.sh: the simulation failed" >&2; exit 1; }
fi
# shellcheck disable=SC1091
. "$data/dataset.env"
cd "$data"
OBS=()
for f in still_*.cbf; do OBS+=(--observed "$f"); done
out=$work/sigmas.txt
: > "$out"
say() { echo "$*" | tee -a "$out"; }
say "# sigma-runs.sh: $stills stills of 512^2 x 0.2 mm at 120 mm, 52 61 73 A, N 14, seed $seed; $(date -u +%Y-%m-%dT%H:%MZ)"

"$PY" "$here/perturb.py" --angle 0.3 --cell-scale 1.003 --seed $((seed * 10 + 1)) model.expt -o "$work/near.expt" > /dev/null
"$PY" "$here/perturb.py" --angle 0.05 --seed $((seed * 10 + 2)) model.expt -o "$work/close.expt" > /dev/null
# shellcheck disable=SC2086  # XTAL is a list of flags
plan() { "$NB_BIN/nb-geom" -q -expt "$1" $XTAL | "$NB_BIN/nb-hkl" -q -hkl "$2"; }

failed=0
# run NAME TITLE [--F] NB-FIT-ARGS...: fit, convert, and the table of errors over sigmas
run() {
    local name=$1 title=$2 withF=0 status=0; shift 2
    if [ "$1" = --F ]; then withF=1; shift; fi
    say "== $name: $title"
    "$NB_BIN/nb-fit" -v "${thr[@]}" "${OBS[@]}" "$@" -o "$work/$name.nbs" 2> "$work/$name.log" || status=$?
    say "nb-fit exit $status"
    [ "$status" -eq 0 ] || failed=1
    "$NB_BIN/nb-convert" -q -o "$work/$name.expt" "$work/$name.nbs" || { failed=1; return 0; }
    local hkl=()
    [ "$withF" -eq 0 ] || hkl=(--truth-hkl F.hkl --fit-hkl "$work/$name.hkl")
    "$PY" "$here/sigmas.py" model.expt "$work/$name.expt" "$work/$name.log" "${hkl[@]}" --space-group P212121 \
        --json "$work/$name.json" | tee -a "$out" || failed=1
}

if want A; then
    plan "$work/close.expt" flat.hkl > "$work/close-flat.nbs"
    run A "turns, scales and F from a flat F, jointly (--F-prior 0)" --F --refine-F --F-prior 0 --space-group P212121 \
        --refine-frame rot_x,rot_y,rot_z,scale --F-out "$work/A.hkl" "$work/close-flat.nbs"
fi
plan "$work/near.expt" F.hkl > "$work/near.nbs"
want B && run B "turns, each frame's cell and scale (the true F), from a near start" \
    --refine-frame rot_x,rot_y,rot_z,cell_a,cell_b,cell_c,scale "$work/near.nbs"
want C && run C "turns and scales, the cell shared (the true F), from a near start" \
    --refine cell_a,cell_b,cell_c --refine-frame rot_x,rot_y,rot_z,scale "$work/near.nbs"
if want D; then
    plan "$work/near.expt" flat.hkl > "$work/near-flat.nbs"
    run D "turns, scales, the shared cell and F jointly, from a flat F (--F-prior 0)" --F --refine-F --F-prior 0 \
        --space-group P212121 --refine cell_a,cell_b,cell_c --refine-frame rot_x,rot_y,rot_z,scale \
        --F-out "$work/D.hkl" "$work/near-flat.nbs"
fi
exit "$failed"

#!/usr/bin/env bash
# panels-gate.sh - the gate of each panel's geometry refined (issue 50, G6):
# stills on a 2x2 detector whose panels are moved (bench/dataset/panels.py:
# 0.2 mm in plane, 0.2 mm along the normal, 0.1 degrees about the normal,
# 0.2 degrees of tilt), fitted from the nominal panels and crystals turned
# 0.3 degrees with the cell 0.3 % long (G1's start), every panel's six values
# shared with the cell, each still's turns and scale its own.
#
# Usage: panels-gate.sh [--quick] [--stills N] [--threads N] [--seed S] DIR
#   --quick       4 stills of 4 x 256^2 panels of 0.2 mm (minutes): the figures
#                 are not the gate's
#   --stills N    stills (default 50)
#   --pixels N    pixels per panel side (default 512)
#   --pixel MM    pixel size (default 0.1)
#   --turns LIST  the panels' turns about their normals, degrees, comma-separated
#                 (default 0.1,0.1,-0.1,-0.1 in an order drawn: mean 0)
#   --threads N   threads per stage (default: all cores)
#   --seed S      seed of F, orientations and noise (S, S + 1), and of the
#                 panels' moves (S + 2) (default 1)
# Writes into DIR: nominal.geom, moved.geom, moves.json, F.hkl, data.nxs,
# model.expt (the truth), start.expt, plan.nbs, fit.nbs, fit.log, fit.expt,
# panels.json, orientations.json and results.txt; exit 0 when the gate
# passes (every panel within 0.01 mm in plane, 0.02 mm along its normal,
# 0.005 degrees about it, 0.05 degrees of tilt, and the orientations and
# cell as G1), 1 when it fails, 2 usage.
# The tools come from $NB_BIN, else the bin/ of this checkout, else PATH.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/dataset/find-tools.sh
. "$here/find-tools.sh"
PY=${PYTHON:-/usr/bin/python3}

usage() { local fd=2; [ "${1:-2}" != 0 ] || fd=1; sed -n '/^# Usage:/,/^# The tools/p' "$0" | sed 's/^# \{0,1\}//' >&"$fd"; exit "${1:-2}"; }
die() { echo "panels-gate.sh: $*" >&2; exit 1; }

stills=50 pixels=512 pixel=0.1 threads='' seed=1 turns=()
while [ $# -gt 0 ]; do
    case $1 in
        --quick) stills=4 pixels=256 pixel=0.2; shift ;;
        --stills) [ $# -ge 2 ] || usage; stills=$2; shift 2 ;;
        --pixels) [ $# -ge 2 ] || usage; pixels=$2; shift 2 ;;
        --pixel) [ $# -ge 2 ] || usage; pixel=$2; shift 2 ;;
        --turns) [ $# -ge 2 ] || usage; turns=(--turns "$2"); shift 2 ;;
        --threads) [ $# -ge 2 ] || usage; threads=$2; shift 2 ;;
        --seed) [ $# -ge 2 ] || usage; seed=$2; shift 2 ;;
        -h|--help) usage 0 ;;
        -*) echo "panels-gate.sh: unknown option '$1'" >&2; usage ;;
        *) break ;;
    esac
done
[ $# -eq 1 ] || usage
case $stills in ''|*[!0-9]*|0) echo "panels-gate.sh: --stills must be a positive whole number" >&2; exit 2 ;; esac
case $seed in ''|*[!0-9]*) echo "panels-gate.sh: --seed must be a whole number" >&2; exit 2 ;; esac
find_tools nb-geom nb-hkl nb-sim nb-noise nb-convert nb-fit || exit 1
dir=$1
mkdir -p "$dir"
cd "$dir"
thr=()
[ -n "$threads" ] && thr=(--threads "$threads")

cell="34 52 53 90 90 90"
xtal="-round_xtal -N 20 -fluence 3e26 -oversample 4"
beam="-lambda 1"
"$PY" "$here/panels.py" make --nominal nominal.geom --moved moved.geom --record moves.json \
    --pixels "$pixels" --pixel "$pixel" --seed $((seed + 2)) "${turns[@]}"
# shellcheck disable=SC2086
"$PY" "$here/wilson_hkl.py" --cell $cell --dmin 2 --space-group P212121 --seed "$seed" -o F.hkl \
    --flat-out flat.hkl --asu-out F_asu.hkl

t0=$(date +%s.%N)
# the truth: the moved panels; the nominal list has the same stills (the same seed)
# shellcheck disable=SC2086
"$NB_BIN/nb-geom" -q -panels moved.geom -cell $cell $beam $xtal -hkl F.hkl -nframes "$stills" -stills \
    -misset_seed "$seed" -o truth.nbs
"$NB_BIN/nb-hkl" -q "${thr[@]}" truth.nbs | "$NB_BIN/nb-sim" -q "${thr[@]}" \
    | "$NB_BIN/nb-noise" -q "${thr[@]}" -seed $((seed + 1)) | "$NB_BIN/nb-convert" -q -o data.nxs -o model.expt
# shellcheck disable=SC2086
"$NB_BIN/nb-geom" -q -panels nominal.geom -cell $cell $beam $xtal -nframes "$stills" -stills \
    -misset_seed "$seed" | "$NB_BIN/nb-convert" -q -o nominal.expt
t1=$(date +%s.%N)
"$PY" "$here/perturb.py" --angle 0.3 --cell-scale 1.003 --seed 11 nominal.expt -o start.expt
# shellcheck disable=SC2086
"$NB_BIN/nb-geom" -q -expt start.expt $xtal | "$NB_BIN/nb-hkl" -q "${thr[@]}" -hkl F.hkl > plan.nbs

refine=cell_a,cell_b,cell_c
for p in 0 1 2 3; do
    for v in shift_fast shift_slow shift_normal rot_fast rot_slow rot_normal; do refine=$refine,panel${p}_$v; done
done
set +e
"$NB_BIN/nb-fit" -v "${thr[@]}" --observed data.nxs --refine "$refine" --refine-frame rot_x,rot_y,rot_z,scale \
    -o fit.nbs plan.nbs 2> fit.log
rc=$?
set -e
t2=$(date +%s.%N)
case $rc in 0|3) ;; *) tail -n 5 fit.log >&2; die "nb-fit failed (exit $rc; see $dir/fit.log)" ;; esac
"$NB_BIN/nb-convert" -q -o fit.expt fit.nbs
set +e
"$PY" "$here/panels.py" compare model.expt fit.expt --json panels.json --gate > panels.txt
panels_rc=$?
"$PY" "$here/evaluate.py" model.expt fit.expt --fit-log fit.log --fit-status "$rc" --gate G1 \
    --json orientations.json > orientations.txt 2>&1
orient_rc=$?
set -e
{
    printf '# panels-gate.sh: %s stills on 4 panels of %s^2 (%s mm); simulated in %.0f s, fitted in %.0f s\n' \
        "$stills" "$pixels" "$pixel" "$(awk -v a="$t0" -v b="$t1" "BEGIN { print b - a }")" "$(awk -v a="$t1" -v b="$t2" "BEGIN { print b - a }")"
    cat panels.txt
    tail -n 3 orientations.txt
    printf 'G6 panels %s, orientations and cell %s\n' "$([ $panels_rc = 0 ] && echo PASS || echo FAIL)" \
        "$([ $orient_rc = 0 ] && echo PASS || echo FAIL)"
} | tee results.txt
[ $panels_rc = 0 ] && [ $orient_rc = 0 ]

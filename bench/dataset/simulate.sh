#!/usr/bin/env bash
# simulate.sh - a simulated serial dataset for the gates of dataset refinement
# (issue 35): Wilson-distributed structure factors, N stills of random
# orientation, optionally mosaic domains and a water background, Poisson
# noise, one CBF per still, the truth's DIALS experiment list (model.expt: one
# experiment per still, each with its crystal) and truth.jsonl (every
# reflection's Bragg photons per still, the background's not among them;
# docs/stream-format.md 3).  draw.py draws these options from a seed.
#
# Usage: simulate.sh [OPTIONS] DIR
#   --cell "A B C AL BE GA"   unit cell (default "34 52 53 90 90 90")
#   --space-group SG          symmetry of the drawn F: P1, P2, P21, P222 or P212121
#                             (default P212121; P2, P21: unique axis b)
#   --stills N                number of stills (default 50)
#   --detpixels N             detector pixels per side (default 1024)
#   --pixel MM                pixel size (default 0.1)
#   --distance MM             sample to detector (default 100)
#   --lambda A                wavelength (default 1)
#   --dmin A                  resolution of the drawn F (default 2)
#   --bfactor A2              Wilson B of the drawn F (default 0)
#   --N CELLS                 unit cells per side of the crystal (default 20)
#   --fluence PH/M2           photons per m^2 per shot (default 3e26)
#   --shape round|square      crystal shape: -round_xtal (default) or -square_xtal
#   --mosaic DEG              mosaic spread (default 0: none)
#   --mosaic-domains N        mosaic domains with --mosaic (default 10)
#   --water PHOTONS           a water background (nb-amorphous, the water table) scaled
#                             to this mean of photons a pixel (default 0: none)
#   --oversample N            sub-pixels per pixel edge, the fit's too (default 4)
#   --seed S                  seed of F (S), orientations (-misset_seed S) and noise (S + 1) (default 1)
#   --threads N               threads per stage (default: all cores)
#   --truth-only              the F and truth.jsonl alone: no noise, no images (a pilot)
# Writes into DIR: F.hkl (every index nb-hkl needs), F_asu.hkl, flat.hkl (the
# same indices at the rms F), still_###.cbf, model.expt, truth.jsonl, and
# dataset.env: the crystal's flags (XTAL) that a fit's plan must share with
# the simulation, the counts (the fewest reflections of 10 photons of any
# still too) and the time the generation took.
# The tools come from $NB_BIN, else from the bin/ of this checkout, else from
# PATH (an installed copy, PREFIX/share/nb/dataset); the water table from
# $NB_DATADIR/amorphous, else examples/amorphous of the checkout, else
# share/nb/amorphous beside this script's folder.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/dataset/find-tools.sh
. "$here/find-tools.sh"
PY=${PYTHON:-/usr/bin/python3}

usage() { local fd=2; [ "${1:-2}" != 0 ] || fd=1; sed -n '/^# Usage:/,/^# The tools/p' "$0" | sed 's/^# \{0,1\}//' >&"$fd"; exit "${1:-2}"; }
die() { echo "simulate.sh: $*" >&2; exit 1; }

cell="34 52 53 90 90 90" sg=P212121 stills=50 detpixels=1024 pixel=0.1 distance=100 lambda=1
dmin=2 bfactor=0 ncells=20 fluence=3e26 shape=round oversample=4 seed=1 threads='' mosaic=0 domains=10
water=0 truth_only=0
while [ $# -gt 0 ]; do
    case $1 in
        --truth-only|-h|--help) ;;
        --*) [ $# -ge 2 ] || { echo "simulate.sh: $1 needs a value" >&2; exit 2; } ;;
    esac
    case $1 in
        --cell) cell=$2; shift 2 ;;
        --space-group) sg=$2; shift 2 ;;
        --stills) stills=$2; shift 2 ;;
        --detpixels) detpixels=$2; shift 2 ;;
        --pixel) pixel=$2; shift 2 ;;
        --distance) distance=$2; shift 2 ;;
        --lambda) lambda=$2; shift 2 ;;
        --dmin) dmin=$2; shift 2 ;;
        --bfactor) bfactor=$2; shift 2 ;;
        --N) ncells=$2; shift 2 ;;
        --fluence) fluence=$2; shift 2 ;;
        --shape) shape=$2; shift 2 ;;
        --oversample) oversample=$2; shift 2 ;;
        --mosaic) mosaic=$2; shift 2 ;;
        --mosaic-domains) domains=$2; shift 2 ;;
        --water) water=$2; shift 2 ;;
        --truth-only) truth_only=1; shift ;;
        --seed) seed=$2; shift 2 ;;
        --threads) threads=$2; shift 2 ;;
        -h|--help) usage 0 ;;
        -*) echo "simulate.sh: unknown option '$1'" >&2; usage ;;
        *) break ;;
    esac
done
[ $# -eq 1 ] || usage
dir=$1
bad() { echo "simulate.sh: $*" >&2; exit 2; }
case $sg in P1|P2|P21|P222|P212121) ;; *) bad "--space-group must be P1, P2, P21, P222 or P212121, not '$sg'" ;; esac
case $shape in round|square) ;; *) bad "--shape must be round or square" ;; esac
case $stills in ''|*[!0-9]*|0) bad "--stills must be a positive whole number" ;; esac
case $detpixels in ''|*[!0-9]*|0) bad "--detpixels must be a positive whole number" ;; esac
case $domains in ''|*[!0-9]*|0) bad "--mosaic-domains must be a positive whole number" ;; esac
case $seed in ''|*[!0-9]*) bad "--seed must be a whole number" ;; esac
# shellcheck disable=SC2086
set -- $cell
[ $# -eq 6 ] || bad "--cell takes six numbers, 'A B C ALPHA BETA GAMMA', not '$cell'"
for v in "$@" "$pixel" "$distance" "$lambda" "$dmin" "$fluence" "$ncells" "$oversample"; do
    is_positive "$v" || bad "'$v' is not a positive number (--cell, --pixel, --distance, --lambda, --dmin, --fluence, --N, --oversample)"
done
for v in "$bfactor" "$mosaic" "$water"; do
    is_nonnegative "$v" || bad "'$v' is not a number of 0 or more (--bfactor, --mosaic, --water)"
done
find_tools nb-geom nb-hkl nb-sim nb-noise nb-convert || exit 1
water_table=''
if [ "$truth_only" = 0 ] && is_positive "$water"; then
    find_tools nb-amorphous nb-math || exit 1
    water_table=$(find_data amorphous/water.stol) || die "no water table (amorphous/water.stol): set NB_DATADIR"
    water_table=$(readlink -f "$water_table")
fi
"$PY" -c 'import numpy' 2>/dev/null || die "$PY has no numpy (apt-get install python3-numpy)"

mkdir -p "$dir"
cd "$dir"
rm -f still_*.cbf model.expt truth.jsonl dataset.env
# the scratch files go whatever happens
trap 'rm -f plan.nbs water.nbs water.bin truth.fifo' EXIT
rm -f plan.nbs water.nbs water.bin truth.fifo
# the file names' frame numbers: ### up to 999 stills, as many digits as needed beyond
digits=$(( ${#stills} > 3 ? ${#stills} : 3 ))
template="still_$(printf '%*s' "$digits" '' | tr ' ' '#').cbf"
thr=()
[ -n "$threads" ] && thr=(--threads "$threads")

# the crystal as simulated: a fit's plan (nb-geom -expt ...) must carry the same
# size, shape, fluence and sampling (-oversample given: nb-geom would choose it
# from the crystal's size, and a start 0.3 % too long could tip that choice)
xtal="-${shape}_xtal -N $ncells -fluence $fluence -oversample $oversample"
# the mosaic domains are drawn from -mosaic_seed, the same default in the fit's plan
if is_positive "$mosaic"; then xtal="$xtal -mosaic $mosaic -mosaic_domains $domains"; fi
# shellcheck disable=SC2086
geom="-cell $cell -lambda $lambda -distance $distance -pixel $pixel -detpixels $detpixels $xtal"

t0=$(date +%s.%N)
# shellcheck disable=SC2086
"$PY" "$here/wilson_hkl.py" --cell $cell --dmin "$dmin" --space-group "$sg" --seed "$seed" \
    --B "$bfactor" -o F.hkl --flat-out flat.hkl --asu-out F_asu.hkl
# shellcheck disable=SC2086
# -misset_seed among the last three words: else nanoBragg (and nb-geom) read it as -misset
"$NB_BIN/nb-geom" -q -o plan.nbs $geom -hkl F.hkl -nframes "$stills" -stills -misset_seed "$seed"
render() { "$NB_BIN/nb-hkl" -q "${thr[@]}" plan.nbs | "$NB_BIN/nb-sim" -q "${thr[@]}"; }
images() { "$NB_BIN/nb-noise" -q "${thr[@]}" -seed $((seed + 1)) | "$NB_BIN/nb-convert" -q "${thr[@]}" "$@"; }
if [ "$truth_only" = 1 ]; then
    render | "$NB_BIN/nb-convert" -q "${thr[@]}" -o truth.jsonl
elif [ -n "$water_table" ]; then
    # the water's scatter rendered once on the plan's detector (a cube of 0.1 mm,
    # then scaled to the mean asked for) and added to every still before the
    # noise; truth.jsonl from the Bragg photons alone, through a FIFO beside the pipe
    "$NB_BIN/nb-amorphous" -q "${thr[@]}" --table "$water_table" --size 0.1 plan.nbs -o water.nbs
    "$NB_BIN/nb-convert" -q -o water.bin water.nbs
    factor=$("$PY" -c '
import sys, numpy as np
m = float(np.fromfile("water.bin", dtype="<f4").mean())
print("%.9g" % (float(sys.argv[1]) / m) if m > 0 else "none")' "$water")
    [ "$factor" != none ] || die "the water scatters no photon on this detector"
    mkfifo truth.fifo
    "$NB_BIN/nb-convert" -q -o truth.jsonl < truth.fifo &
    truth_pid=$!
    render | tee truth.fifo | "$NB_BIN/nb-math" -q "${thr[@]}" --add-scaled "$factor" water.nbs \
        | images -o "$template" -o model.expt
    wait "$truth_pid" || die "nb-convert -o truth.jsonl failed"
else
    render | images -o "$template" -o model.expt -o truth.jsonl
fi
t1=$(date +%s.%N)

# what a still holds: reflections over 1, 10, 50 photons (the truth's)
counts=$("$PY" - <<'EOF'
import json
n = [0, 0, 0]
frames = 0
fewest = None
for line in open("truth.jsonl"):
    t = json.loads(line)
    frames += 1
    ph = [r[6] for r in t["reflections"]]
    n[0] += len(ph)
    n[1] += sum(p > 10 for p in ph)
    n[2] += sum(p > 50 for p in ph)
    strong = sum(p >= 10 for p in ph)
    fewest = strong if fewest is None else min(fewest, strong)
print("%d %.1f %.1f %.1f %d" % (frames, n[0] / frames, n[1] / frames, n[2] / frames, fewest or 0))
EOF
)
# shellcheck disable=SC2086
set -- $counts
[ "$1" -eq "$stills" ] || die "truth.jsonl holds $1 frames, not $stills"
seconds=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
cat > dataset.env <<EOF
# written by simulate.sh: the dataset's parameters
CELL="$cell"
SPACE_GROUP=$sg
STILLS=$stills
DETPIXELS=$detpixels
SEED=$seed
XTAL="$xtal"
TEMPLATE=$template
SIM_SECONDS=$seconds
REFL_PER_STILL=$2
REFL_OVER_10_PER_STILL=$3
REFL_OVER_50_PER_STILL=$4
FEWEST_SPOTS_OF_10=$5
MOSAIC=$mosaic
WATER_PHOTONS=$water
EOF
echo "simulate.sh: $stills stills of ${detpixels}^2 in $dir in $seconds s; per still $2 reflections" \
     "over 1 photon, $3 over 10 (the fewest: $5 of 10 or more), $4 over 50" >&2

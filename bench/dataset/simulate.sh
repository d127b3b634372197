#!/usr/bin/env bash
# simulate.sh - a simulated serial dataset for the gates of dataset refinement
# (issue 35): Wilson-distributed structure factors, N stills of random
# orientation, Poisson noise, one CBF per still, the truth's DIALS experiment
# list (model.expt: one experiment per still, each with its crystal) and
# truth.jsonl (every reflection's photons per still; docs/stream-format.md 3).
#
# Usage: simulate.sh [OPTIONS] DIR
#   --cell "A B C AL BE GA"   unit cell (default "34 52 53 90 90 90")
#   --space-group P212121|P1  symmetry of the drawn F (default P212121)
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
#   --oversample N            sub-pixels per pixel edge, the fit's too (default 4)
#   --seed S                  seed of F (S), orientations (-misset_seed S) and noise (S + 1) (default 1)
#   --threads N               threads per stage (default: all cores)
# Writes into DIR: F.hkl (every index nb-hkl needs), F_asu.hkl, flat.hkl (the
# same indices at the rms F), still_###.cbf, model.expt, truth.jsonl, and
# dataset.env: the crystal's flags (XTAL) that a fit's plan must share with
# the simulation, the counts and the time the generation took.
# The tools come from $NB_BIN, else from the bin/ of this checkout.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NB_BIN=${NB_BIN:-$here/../../bin}
PY=${PYTHON:-/usr/bin/python3}

usage() { local fd=2; [ "${1:-2}" != 0 ] || fd=1; sed -n '/^# Usage:/,/^# The tools/p' "$0" | sed 's/^# \{0,1\}//' >&"$fd"; exit "${1:-2}"; }
die() { echo "simulate.sh: $*" >&2; exit 1; }

cell="34 52 53 90 90 90" sg=P212121 stills=50 detpixels=1024 pixel=0.1 distance=100 lambda=1
dmin=2 bfactor=0 ncells=20 fluence=3e26 shape=round oversample=4 seed=1 threads=''
while [ $# -gt 0 ]; do
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
        --seed) seed=$2; shift 2 ;;
        --threads) threads=$2; shift 2 ;;
        -h|--help) usage 0 ;;
        -*) echo "simulate.sh: unknown option '$1'" >&2; usage ;;
        *) break ;;
    esac
done
[ $# -eq 1 ] || usage
dir=$1
case $sg in P212121|P1) ;; *) echo "simulate.sh: --space-group must be P212121 or P1" >&2; exit 2 ;; esac
case $shape in round|square) ;; *) echo "simulate.sh: --shape must be round or square" >&2; exit 2 ;; esac
case $stills in ''|*[!0-9]*|0) echo "simulate.sh: --stills must be a positive whole number" >&2; exit 2 ;; esac
for t in nb-geom nb-hkl nb-sim nb-noise nb-convert; do
    [ -x "$NB_BIN/$t" ] || die "no $NB_BIN/$t: build nb first (make), or set NB_BIN"
done
"$PY" -c 'import numpy' 2>/dev/null || die "$PY has no numpy (apt-get install python3-numpy)"

mkdir -p "$dir"
cd "$dir"
rm -f still_*.cbf model.expt truth.jsonl dataset.env
# the file names' frame numbers: ### up to 999 stills, as many digits as needed beyond
digits=$(( ${#stills} > 3 ? ${#stills} : 3 ))
template="still_$(printf '%*s' "$digits" '' | tr ' ' '#').cbf"
thr=()
[ -n "$threads" ] && thr=(--threads "$threads")

# the crystal as simulated: a fit's plan (nb-geom -expt ...) must carry the same
# size, shape, fluence and sampling (-oversample given: nb-geom would choose it
# from the crystal's size, and a start 0.3 % too long could tip that choice)
xtal="-${shape}_xtal -N $ncells -fluence $fluence -oversample $oversample"
# shellcheck disable=SC2086
geom="-cell $cell -lambda $lambda -distance $distance -pixel $pixel -detpixels $detpixels $xtal"

t0=$(date +%s.%N)
# shellcheck disable=SC2086
"$PY" "$here/wilson_hkl.py" --cell $cell --dmin "$dmin" --space-group "$sg" --seed "$seed" \
    --B "$bfactor" -o F.hkl --flat-out flat.hkl --asu-out F_asu.hkl
# shellcheck disable=SC2086
"$NB_BIN/nb-geom" -q $geom -hkl F.hkl -nframes "$stills" -stills -misset_seed "$seed" \
    | "$NB_BIN/nb-hkl" -q "${thr[@]}" \
    | "$NB_BIN/nb-sim" -q "${thr[@]}" \
    | "$NB_BIN/nb-noise" -q "${thr[@]}" -seed $((seed + 1)) \
    | "$NB_BIN/nb-convert" -q "${thr[@]}" -o "$template" -o model.expt -o truth.jsonl
t1=$(date +%s.%N)

# what a still holds: reflections over 1, 10, 50 photons (the truth's)
counts=$("$PY" - <<'EOF'
import json
n = [0, 0, 0]
frames = 0
for line in open("truth.jsonl"):
    t = json.loads(line)
    frames += 1
    ph = [r[6] for r in t["reflections"]]
    n[0] += len(ph)
    n[1] += sum(p > 10 for p in ph)
    n[2] += sum(p > 50 for p in ph)
print("%d %.1f %.1f %.1f" % (frames, n[0] / frames, n[1] / frames, n[2] / frames))
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
EOF
echo "simulate.sh: $stills stills of ${detpixels}^2 in $dir in $seconds s; per still $2 reflections" \
     "over 1 photon, $3 over 10, $4 over 50" >&2

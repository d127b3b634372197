#!/usr/bin/env bash
# spectra-gate.sh - the gate of a shot's own spectrum (issue 50, G7): G1's
# stills (34 52 53 90 90 90, P 21 21 21 Wilson F, 100 mm, lambda 1, round
# crystals of 20 cells) each shot with a SASE spectrum of its own (nb-geom's
# -stills_bandwidth and -stills_spikes: spikes drawn under a Gaussian
# envelope), fitted from G1's start (the crystals turned 0.3 degrees, the cell
# 0.3 % long) twice: A with each shot's own spectrum (the .lam files
# nb-convert wrote beside model.expt), B with the shots' mean spectrum (the
# envelope: as many channels of equal weight as a shot has spikes, at the
# Gaussian's quantiles, one .lam listed once per shot).  Both refine the cell
# shared and each still's turns and scale; --lambda also fits both again with
# each frame's wavelength refined (the spectrum scaled whole).
#
# Usage: spectra-gate.sh [--quick] [--stills N] [--bandwidth PCT] [--spikes K] [--lambda] DIR
#   --quick          4 stills of 256^2 at 0.4 mm (minutes): the figures are not the gate's
#   --stills N       stills (default 50)
#   --pixels N       pixels per side (default 1024)
#   --pixel MM       pixel size (default 0.1)
#   --bandwidth PCT  the envelope's FWHM, percent of the wavelength (default 0.4)
#   --spikes K       spikes a shot (default 5; a render costs K times one wavelength's)
#   --lambda         also fits A and B with lambda in --refine-frame
#   --threads N      threads per stage (default: all cores)
#   --seed S         seed of F, orientations and spectra (S) and noise (S + 1) (default 1)
# Writes into DIR: F.hkl, data.nxs, model.expt with model_spectra.txt and
# model_spectra/ (the truth), start.expt, mean.lam and mean_spectra.txt,
# plan-own.nbs and plan-mean.nbs, and per fit (own, mean; with --lambda
# own-lambda, mean-lambda) NAME/fit.nbs, fit.log, fit.expt, eval.txt,
# eval.json; results.txt (a line per fit); exit 0 when fit A (own) passes G1,
# 1 when it fails, 2 usage.
# The tools come from $NB_BIN, else the bin/ of this checkout, else PATH.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/dataset/find-tools.sh
. "$here/find-tools.sh"
PY=${PYTHON:-/usr/bin/python3}

usage() { local fd=2; [ "${1:-2}" != 0 ] || fd=1; sed -n '/^# Usage:/,/^# The tools/p' "$0" | sed 's/^# \{0,1\}//' >&"$fd"; exit "${1:-2}"; }
die() { echo "spectra-gate.sh: $*" >&2; exit 1; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f", b - a }'; }

stills=50 pixels=1024 pixel=0.1 bandwidth=0.4 spikes=5 lambda=0 threads='' seed=1
while [ $# -gt 0 ]; do
    case $1 in
        --quick) stills=4 pixels=256 pixel=0.4; shift ;;
        --stills) [ $# -ge 2 ] || usage; stills=$2; shift 2 ;;
        --pixels) [ $# -ge 2 ] || usage; pixels=$2; shift 2 ;;
        --pixel) [ $# -ge 2 ] || usage; pixel=$2; shift 2 ;;
        --bandwidth) [ $# -ge 2 ] || usage; bandwidth=$2; shift 2 ;;
        --spikes) [ $# -ge 2 ] || usage; spikes=$2; shift 2 ;;
        --lambda) lambda=1; shift ;;
        --threads) [ $# -ge 2 ] || usage; threads=$2; shift 2 ;;
        --seed) [ $# -ge 2 ] || usage; seed=$2; shift 2 ;;
        -h|--help) usage 0 ;;
        -*) echo "spectra-gate.sh: unknown option '$1'" >&2; usage ;;
        *) break ;;
    esac
done
[ $# -eq 1 ] || usage
for v in "$stills" "$spikes" "$pixels"; do
    case $v in ''|*[!0-9]*|0) echo "spectra-gate.sh: --stills, --spikes and --pixels take positive whole numbers" >&2; exit 2 ;; esac
done
case $seed in ''|*[!0-9]*) echo "spectra-gate.sh: --seed must be a whole number" >&2; exit 2 ;; esac
is_positive "$bandwidth" || { echo "spectra-gate.sh: --bandwidth must be a positive number" >&2; exit 2; }
find_tools nb-geom nb-hkl nb-sim nb-noise nb-convert nb-fit || exit 1
dir=$1
mkdir -p "$dir"
cd "$dir"
thr=()
[ -n "$threads" ] && thr=(--threads "$threads")

cell="34 52 53 90 90 90"
# the crystal as simulate.sh makes G1's: the fit's plans must carry the same flags
xtal="-round_xtal -N 20 -fluence 3e26 -oversample 4"
# shellcheck disable=SC2086
"$PY" "$here/wilson_hkl.py" --cell $cell --dmin 2 --space-group P212121 --seed "$seed" -o F.hkl \
    --flat-out flat.hkl --asu-out F_asu.hkl

t0=$(now)
# -misset_seed last: else nb-geom (as nanoBragg) reads it as -misset
# shellcheck disable=SC2086
"$NB_BIN/nb-geom" -q -cell $cell -lambda 1 -distance 100 -pixel "$pixel" -detpixels "$pixels" $xtal -hkl F.hkl \
    -nframes "$stills" -stills -stills_bandwidth "$bandwidth" -stills_spikes "$spikes" -misset_seed "$seed" -o truth.nbs
"$NB_BIN/nb-hkl" -q "${thr[@]}" truth.nbs | "$NB_BIN/nb-sim" -q "${thr[@]}" \
    | "$NB_BIN/nb-noise" -q "${thr[@]}" -seed $((seed + 1)) | "$NB_BIN/nb-convert" -q -o data.nxs -o model.expt
t1=$(now)
sim_s=$(elapsed "$t0" "$t1")
[ "$(wc -l < model_spectra.txt)" -eq "$stills" ] || die "model_spectra.txt does not name $stills spectra"

"$PY" "$here/perturb.py" --angle 0.3 --cell-scale 1.003 --seed 11 model.expt -o start.expt
# the shots' mean spectrum: the envelope the spikes are drawn under (centre
# lambda 1, standard deviation FWHM / 2.3548), as many channels as a shot has
# spikes so that both fits render alike many; equal weights render exactly
"$PY" - "$bandwidth" "$spikes" "$stills" <<'EOF'
import statistics, sys
pct, k, n = float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
g = statistics.NormalDist(1.0, pct / 100 / 2.3548)
with open("mean.lam", "w") as f:
    f.write("# wavelengths, weights\n")
    for j in range(k):
        f.write("%.9f,1\n" % (g.inv_cdf((j + 0.5) / k) if k > 1 else 1.0))
with open("mean_spectra.txt", "w") as f:
    f.write("mean.lam\n" * n)
EOF
# -expt_spectra reads the list's paths from the list's folder: model_spectra.txt
# names model_spectra/shot_*.lam, here beside start.expt too
for which in own mean; do
    list=model_spectra.txt
    [ "$which" = mean ] && list=mean_spectra.txt
    # shellcheck disable=SC2086
    "$NB_BIN/nb-geom" -q -expt start.expt -expt_spectra "$list" $xtal | "$NB_BIN/nb-hkl" -q "${thr[@]}" -hkl F.hkl \
        > "plan-$which.nbs"
done

# fit NAME PLAN FRAME: nb-fit -v of the stills from PLAN, refining the cell and FRAME per still
fit() {
    local name=$1 plan=$2 frame=$3 rc t2 t3
    mkdir -p "$name"
    t2=$(now)
    set +e
    "$NB_BIN/nb-fit" -v "${thr[@]}" --observed data.nxs --refine cell_a,cell_b,cell_c --refine-frame "$frame" \
        -o "$name/fit.nbs" "$plan" 2> "$name/fit.log"
    rc=$?
    set -e
    t3=$(now)
    case $rc in 0|3) ;; *) tail -n 5 "$name/fit.log" >&2; die "nb-fit failed (exit $rc; see $dir/$name/fit.log)" ;; esac
    "$NB_BIN/nb-convert" -q -o "$name/fit.expt" "$name/fit.nbs"
    set +e
    "$PY" "$here/evaluate.py" model.expt "$name/fit.expt" --fit-log "$name/fit.log" --fit-status "$rc" --gate G1 \
        --json "$name/eval.json" > "$name/eval.txt" 2>&1
    FIT_VERDICT=$?
    set -e
    "$PY" - "$name" "$FIT_VERDICT" "$(elapsed "$t2" "$t3")" "$stills" <<'EOF' >> results.txt
import json, sys
name, rc, secs, n = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
s = json.load(open(name + "/eval.json"))
o = s.get("orientation_deg", {})
f = lambda x: "-" if x is None else "%.4g" % x
cell = s.get("cell_rel_max_abs")
print("G7 %-12s %s  orientation median %s max %s deg, cell off %s %%, failed %s; fit %.0f s (%.1f s/still)"
      % (name, "PASS" if rc == 0 else "FAIL", f(o.get("median")), f(o.get("max")),
         "-" if cell is None else "%.4g" % (100 * cell), s.get("reported_failed"), secs, secs / n))
EOF
    tail -n 1 results.txt
}

printf '# spectra-gate.sh: %s stills of %s^2 (%s mm), %s spikes a shot under a %s %% FWHM envelope; simulated in %s s\n' \
    "$stills" "$pixels" "$pixel" "$spikes" "$bandwidth" "$sim_s" | tee results.txt
fit own plan-own.nbs rot_x,rot_y,rot_z,scale
own_rc=$FIT_VERDICT
fit mean plan-mean.nbs rot_x,rot_y,rot_z,scale
if [ "$lambda" = 1 ]; then
    fit own-lambda plan-own.nbs rot_x,rot_y,rot_z,scale,lambda
    fit mean-lambda plan-mean.nbs rot_x,rot_y,rot_z,scale,lambda
fi
[ "$own_rc" = 0 ]

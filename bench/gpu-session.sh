#!/usr/bin/env bash
# gpu-session.sh - the whole GPU check in one command, for the few minutes a
# GPU is lent (issue 36): build with nvcc, the golden parity and gpu.bats on
# the GPU (tests/gpu-check.sh: nb-noise --device cuda's counts against the
# CPU's among them), a noisy 1024^2 series counted on the GPU, nb-bench on the
# GPU, Nsight Compute's kernel times with the CUDA build's registers and
# spills, and dataset fits on the GPU against the CPU's cores.  Every part
# writes its files under OUT and a line to OUT/summary.txt; a part that fails
# or runs out of its time is recorded so, and the next part runs.
#
# Usage: bench/gpu-session.sh [OPTIONS]
#   --out DIR         where the results go (default $OUT, else ./gpu-session)
#   --parts LIST      comma-separated, of build check series bench ncu fit
#                     (default all, in that order)
#   --ref-cuda PATH   a nanoBraggCUDA binary: the ncu part times its kernel on
#                     the same configurations (nanoBraggCUDA FLAGS -precision
#                     single -nonoise -nopgm -floatfile F -intfile /dev/null)
#   --stills N        the fit part's stills (default 200)
#   --budget S        seconds for the whole run (default 540: under the device
#                     tool's 10 minutes a command); each part gets its share
# The parts:
#   build   make -j (nvcc found as the Makefile finds it); OUT/ptxas.txt, the
#           CUDA file compiled again with -Xptxas -v for sm_90: registers and
#           spill stores of every kernel
#   check   tests/gpu-check.sh (make check-gpu): golden parity through the
#           drop-in on the GPU and gpu.bats; OUT/gpu-check.txt
#   series  100 frames of 1024^2, nb-sim --device cuda | nb-noise --rng philox
#           --device cuda | nb-convert -o s_#.cbf on /dev/shm, three times,
#           and the same with nb-noise on the CPU; the CBFs of both compared
#           byte for byte; OUT/series.txt (frames per second)
#   bench   nb-bench --device cuda --threads (all cores) --reps 3 --dir
#           /dev/shm: OUT/nb-bench-gpu.json and .txt
#   ncu     (when ncu is installed) one launch each of oversample, deriv-image
#           and deriv-8 at 4096^2 under ncu --clock-control none: kernel time,
#           registers, local (spill) traffic; OUT/ncu-CONFIG.csv, and
#           nanoBraggCUDA's with --ref-cuda
#   fit     bench/dataset/speed.sh's per-frame part (G1's 50 stills, 6
#           per-frame parameters) and its F part over N stills, with nb-fit
#           --device cuda and with --device cpu on all cores; OUT/fit-*/
# Exit status: 0 when every part ran and passed, 1 otherwise (see summary.txt),
# 2 usage.  Nothing here fetches or builds the reference: --ref-cuda takes a
# binary the user built.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
usage() { local fd=2; [ "${1:-2}" != 0 ] || fd=1; sed -n '/^# Usage:/,/^# The parts:/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&"$fd"; exit "${1:-2}"; }

out=${OUT:-$PWD/gpu-session} parts=build,check,series,bench,ncu,fit ref_cuda='' stills=200 budget=540
while [ $# -gt 0 ]; do
    case $1 in
        --out) out=$2; shift 2 ;;
        --parts) parts=$2; shift 2 ;;
        --ref-cuda) ref_cuda=$2; shift 2 ;;
        --stills) stills=$2; shift 2 ;;
        --budget) budget=$2; shift 2 ;;
        -h|--help) usage 0 ;;
        *) echo "gpu-session: unknown argument '$1'" >&2; usage ;;
    esac
done
for p in ${parts//,/ }; do
    case $p in build|check|series|bench|ncu|fit) ;; *) echo "gpu-session: no part '$p' (build check series bench ncu fit)" >&2; exit 2 ;; esac
done
case $stills in ''|*[!0-9]*|0) echo "gpu-session: --stills must be a positive whole number" >&2; exit 2 ;; esac
case $budget in ''|*[!0-9]*|0) echo "gpu-session: --budget must be a positive whole number of seconds" >&2; exit 2 ;; esac
[ -z "$ref_cuda" ] || [ -x "$ref_cuda" ] || { echo "gpu-session: --ref-cuda '$ref_cuda' is not an executable" >&2; exit 2; }
want() { case ",$parts," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }

mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)
summary=$out/summary.txt
: > "$summary"
bin=$root/bin
cores=$(nproc)
shm=/dev/shm
[ -d "$shm" ] && [ -w "$shm" ] || shm=${TMPDIR:-/tmp}
scratch=$(mktemp -d -p "$shm") || exit 1
trap 'rm -rf "$scratch"' EXIT
start=$(date +%s)
failed=0
say() { echo "$*" | tee -a "$summary"; }
# what is left of the budget, shared by the parts still to run (at least 30 s)
share() {
    local left=$((budget - ($(date +%s) - start))) n=0 p
    for p in ${parts//,/ }; do [ -e "$out/.done-$p" ] || n=$((n + 1)); done
    [ "$n" -gt 0 ] || n=1
    left=$((left / n))
    echo $((left < 30 ? 30 : left))
}
# run PART SECONDS CMD...: the command under timeout, its verdict a summary line
run_part() {
    local part=$1 secs=$2 t0 st
    shift 2
    t0=$(date +%s)
    timeout --kill-after=10 "$secs" "$@" > "$out/$part.log" 2>&1
    st=$?
    touch "$out/.done-$part"
    case $st in
        0) say "$part: ok ($(($(date +%s) - t0)) s)" ;;
        124|137) say "$part: TIMED OUT after $secs s (its log: $part.log)"; failed=1 ;;
        *) say "$part: FAILED, status $st (its log: $part.log)"; failed=1 ;;
    esac
    return $st
}

say "# gpu-session.sh $(date -u +%Y-%m-%dT%H:%MZ), $(uname -n), $cores cores, budget $budget s"
command -v nvidia-smi > /dev/null &&
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | sed 's/^/# GPU: /' | tee -a "$summary"

# ---- build ------------------------------------------------------------------
build() {
    make -C "$root" -j"$cores" || return
    local nvcc
    nvcc=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null) || { echo "no nvcc"; return 1; }
    "$bin/nb-sim" --version
    # every kernel's registers, stack and spill stores, as ptxas counts them for sm_90
    "$nvcc" -std=c++17 -O3 -Xcompiler -fopenmp,-fPIC -gencode arch=compute_90,code=sm_90 -Xptxas -v \
        -I"$root/libnbcore" -I"$root/engine" -I"$root/engine/physics" -DNB_VERSION='"session"' -c "$root/engine/nb_sim_cuda.cu" \
        -o "$scratch/ptxas.o" > "$out/ptxas.txt" 2>&1 || return
    grep -E "Compiling entry|registers|spill" "$out/ptxas.txt" | head -200
}
if want build; then run_part build "$(share)" build; fi

# nothing else runs without a GPU: say so once
if ! "$bin/nb-geom" -q -default_F 100 -cell 100 100 100 90 90 90 -lambda 6.2 -N 5 -detpixels 8 |
    "$bin/nb-sim" -q --device cuda -o /dev/null 2> "$scratch/probe.err"; then
    say "gpu-session: no usable GPU: $(head -1 "$scratch/probe.err")"
    exit 1
fi

# ---- check ------------------------------------------------------------------
if want check; then
    run_part check "$(share)" env NB_BIN="$bin" "$root/tests/gpu-check.sh"
    cp "$out/check.log" "$out/gpu-check.txt"
    tail -1 "$out/gpu-check.txt" | sed 's/^/  /' | tee -a "$summary"
fi

# ---- series -----------------------------------------------------------------
series() {
    local plan=$scratch/series.nbs noise rep t0 t1
    "$bin/nb-geom" -q -default_F 100 -cell 100 100 100 90 90 90 -lambda 6.2 -N 5 -distance 100 -detpixels 1024 \
        -nframes 100 -osc 0.1 -o "$plan" || return
    for noise in cuda cpu; do
        for rep in 1 2 3; do
            rm -rf "$scratch/s-$noise" && mkdir "$scratch/s-$noise"
            t0=$(date +%s.%N)
            "$bin/nb-sim" -q --device cuda "$plan" | "$bin/nb-noise" -q --rng philox -seed 5 --device "$noise" |
                "$bin/nb-convert" -q -o "$scratch/s-$noise/s_###.cbf" || return
            t1=$(date +%s.%N)
            awk -v a="$t0" -v b="$t1" -v n="$noise" -v r="$rep" \
                'BEGIN { printf "nb-noise --device %s, run %d: %.2f s, %.0f frames/s\n", n, r, b - a, 100 / (b - a) }'
        done
    done
    # the GPU's counts are the CPU's, byte for byte, in every frame
    local differ=0 f
    for f in "$scratch"/s-cpu/s_*.cbf; do cmp -s "$f" "$scratch/s-cuda/$(basename "$f")" || differ=$((differ + 1)); done
    echo "CBFs differing between nb-noise on the GPU and on the CPU: $differ of 100"
    [ "$differ" -eq 0 ]
}
if want series; then
    run_part series "$(share)" series
    cp "$out/series.log" "$out/series.txt"
    grep -E "frames/s|differing" "$out/series.txt" | sed 's/^/  /' | tee -a "$summary"
fi

# ---- bench ------------------------------------------------------------------
if want bench; then
    run_part bench "$(share)" "$bin/nb-bench" --device cuda --threads "$cores" --reps 3 --dir "$scratch" \
        --json "$out/nb-bench-gpu.json" -o "$out/nb-bench-gpu.txt"
fi

# ---- ncu --------------------------------------------------------------------
# the configuration's nb-geom flags (nb-bench --list), the detector 4096^2 for deriv-8
config_flags() {
    "$bin/nb-bench" --list | awk -v c="$1" '$1 == c { $1 = ""; print }' | sed 's/ *| *nb-sim.*//; s/^ //'
}
config_sim() {
    "$bin/nb-bench" --list | awk -v c="$1" '$1 == c' | sed -n 's/.*| *nb-sim //p'
}
ncu_part() {
    command -v ncu > /dev/null || { echo "ncu (Nsight Compute) is not installed: no kernel times"; return 1; }
    local c flags sim metrics=gpu__time_duration.sum,launch__registers_per_thread,smsp__inst_executed.sum,l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum
    for c in oversample deriv-image deriv-8; do
        flags=$(config_flags "$c") sim=$(config_sim "$c")
        [ "$c" = deriv-8 ] && flags=${flags/-detpixels 1024/-detpixels 4096}
        # shellcheck disable=SC2086
        "$bin/nb-geom" -q $flags -o "$scratch/$c.nbs" || return
        # shellcheck disable=SC2086
        ncu --clock-control none --metrics "$metrics" --csv "$bin/nb-sim" -q --device cuda $sim -o /dev/null \
            "$scratch/$c.nbs" > "$out/ncu-$c.csv" || return
        grep -E '"(gpu__time_duration.sum|launch__registers_per_thread|l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum)"' \
            "$out/ncu-$c.csv" | awk -F'","' -v c="$c" '{ printf "%s: %s %s %s %s\n", c, $5, $(NF - 2), $(NF - 1), $NF }'
        # nanoBraggCUDA has no derivatives: deriv-image's image is its equivalent, deriv-8 has none
        if [ -n "$ref_cuda" ] && [ "$c" != deriv-8 ]; then
            # shellcheck disable=SC2086
            (cd "$scratch" && ncu --clock-control none --metrics gpu__time_duration.sum --csv "$ref_cuda" $flags \
                -precision single -nonoise -nopgm -floatfile ref.bin -intfile /dev/null) \
                > "$out/ncu-$c-nanoBraggCUDA.csv" || return
            grep gpu__time_duration "$out/ncu-$c-nanoBraggCUDA.csv" | sed "s/^/$c nanoBraggCUDA: /"
        fi
    done
}
if want ncu; then
    run_part ncu "$(share)" ncu_part
    grep -E '^(oversample|deriv)' "$out/ncu.log" | sed 's/^/  /' | tee -a "$summary"
fi

# ---- fit --------------------------------------------------------------------
fit_part() {
    local d
    for d in cuda cpu; do
        NB_BIN="$bin" "$root/bench/dataset/speed.sh" --work "$out/fit-$d" --device "$d" --threads "$cores" \
            --stills "$stills" || return
    done
}
if want fit; then
    run_part fit "$(share)" fit_part
    grep -hE '^(frame|F|  accuracy)' "$out"/fit-*/speed.txt 2>/dev/null | sed 's/^/  /' | tee -a "$summary"
fi

rm -f "$out"/.done-*
say "gpu-session: $(($(date +%s) - start)) s; $([ $failed = 0 ] && echo 'every part passed' || echo 'some part failed: see above')"
exit $failed

#!/usr/bin/env bash
# gpu-session.sh - the whole GPU check in one command, for the few minutes a
# GPU is lent (issues 36 and 51): the tools built or carried, the golden
# parity and gpu.bats on the GPU (tests/gpu-check.sh: nb-noise --device
# cuda's counts against the CPU's among them), a noisy 1024^2 series counted
# on the GPU, nb-bench on the GPU, Nsight Compute's kernel times, and dataset
# fits on the GPU against the CPU's cores.  Every part writes its figures and
# a line to OUT/summary.txt; a part that fails or runs out of its time is
# recorded so, and the next part runs.  The parts' files are packed into
# OUT/results.tgz after each part (the device tool brings back 8 files).
#
# Usage: bench/gpu-session.sh [OPTIONS]
#   --out DIR         where the results go (default $OUT, else ./gpu-session)
#   --carry DIR       the tools and what they load as bench/gpu-carry.sh made
#                     them on a machine with our packages (DIR/bin, DIR/lib,
#                     DIR/bats, ...): nothing is built, the build part checks
#                     the set (its sources are this checkout's, ldd finds every
#                     library) instead; its ref/nanoBraggCUDA is --ref-cuda's
#                     default
#   --parts LIST      comma-separated, of build check series bench ncu fit
#                     (default all, in that order); each runs alone, so a part
#                     that failed or ran out of time is run again by naming it
#   --ref-cuda PATH   a nanoBraggCUDA binary: the ncu part times its kernel on
#                     the same configurations (nanoBraggCUDA FLAGS -precision
#                     single -nonoise -nopgm -floatfile F -intfile /dev/null)
#   --stills N        the fit part also fits F over N stills (speed.sh's F part)
#   --budget S        seconds for the whole run (default 540: under the device
#                     tool's 10 minutes a command); each part gets its share
#   --stand-in        a dry run where there is no GPU: after the build part
#                     and the preflight, the check part's gpu.bats with the
#                     CPU standing in for the GPU (tests/gpu-check.sh
#                     --stand-in), then the GPU probe stops the run
# The parts:
#   build   make -j (nvcc found as the Makefile finds it), and make ptxas:
#           every kernel's registers, stack and spill stores (ptxas.txt and
#           ptxas-table.txt); with --carry the set's own (made where it was
#           built), the set's sources checked against this checkout's and
#           ldd run on every tool and library (ldd.txt)
#   check   tests/gpu-check.sh (make check-gpu): golden parity through the
#           drop-in on the GPU and gpu.bats; gpu-check.txt
#   series  100 frames of 1024^2, nb-sim --device cuda | nb-noise --rng philox
#           --device cuda | nb-convert -o s_#.cbf on /dev/shm, three times,
#           and the same with nb-noise on the CPU; the CBFs of both compared
#           byte for byte; series.txt (frames per second)
#   bench   nb-bench --device cuda --threads (all cores) --reps 3 --dir
#           /dev/shm: nb-bench-gpu.json and .txt
#   ncu     (when ncu is installed) one launch each of oversample, deriv-image
#           and deriv-8 at 4096^2 under ncu --clock-control none: kernel time,
#           registers, local (spill) traffic; ncu-CONFIG.csv, and
#           nanoBraggCUDA's with --ref-cuda
#   fit     bench/dataset/speed.sh's per-frame part (G1's 50 stills, 6
#           per-frame parameters; with --stills N its F part over N stills
#           too), with nb-fit --device cuda and with --device cpu on all
#           cores; the GPU's orientations within 1e-4 degrees of the CPU's and
#           the same verdicts; fit-cuda/, fit-cpu/ (speed.txt, results,
#           fit.expt), fit-compare.txt
# Before the GPU is asked for, a preflight says what each part wanted will
# need and whether it is here (bats, a Python with numpy, ncu, /dev/shm).
# Exit status: 0 when every part ran and passed, 1 otherwise (see summary.txt),
# 2 usage.  Nothing here fetches or builds the reference: --ref-cuda takes a
# binary the user built.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
usage() { local fd=2; [ "${1:-2}" != 0 ] || fd=1; sed -n '/^# Usage:/,/^# The parts:/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&"$fd"; exit "${1:-2}"; }

out=${OUT:-$PWD/gpu-session} parts=build,check,series,bench,ncu,fit ref_cuda='' stills=200 budget=540 carry=''
stand_in=0 stills_given=0
while [ $# -gt 0 ]; do
    [ $# -ge 2 ] || case $1 in -h|--help|--stand-in) ;; *) echo "gpu-session: $1 wants a value" >&2; usage ;; esac
    case $1 in
        --stand-in) stand_in=1; shift ;;
        --out) out=$2; shift 2 ;;
        --carry) carry=$2; shift 2 ;;
        --parts) parts=$2; shift 2 ;;
        --ref-cuda) ref_cuda=$2; shift 2 ;;
        --stills) stills=$2 stills_given=1; shift 2 ;;
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
if [ -n "$carry" ]; then
    [ -x "$carry/bin/nb-sim" ] || { echo "gpu-session: --carry '$carry' holds no bin/nb-sim (bench/gpu-carry.sh makes the set)" >&2; exit 2; }
    carry=$(cd "$carry" && pwd)
    [ -n "$ref_cuda" ] || [ ! -x "$carry/ref/nanoBraggCUDA" ] || ref_cuda=$carry/ref/nanoBraggCUDA
fi
[ -z "$ref_cuda" ] || [ -x "$ref_cuda" ] || { echo "gpu-session: --ref-cuda '$ref_cuda' is not an executable" >&2; exit 2; }
want() { case ",$parts," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }

mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)
summary=$out/summary.txt
: > "$summary"
rm -f "$out/results.tgz"
cores=$(nproc)
shm=/dev/shm
[ -d "$shm" ] && [ -w "$shm" ] || shm=${TMPDIR:-/tmp}
scratch=$(mktemp -d -p "$shm") || exit 1
trap 'rm -rf "$scratch"' EXIT
res=$scratch/results # the parts' files, packed into OUT/results.tgz
mkdir -p "$res"
start=$(date +%s)
failed=0 rerun=''
say() { echo "$*" | tee -a "$summary"; }
pack() { tar -C "$res" -czf "$out/results.tgz.part" . && mv "$out/results.tgz.part" "$out/results.tgz"; }

# ---- the carried set: its tools first, the libraries the machine lacks ----------
# A library counts as the machine's own where ldconfig knows its soname and the
# file is there and not empty; only the others come from the set, so the
# machine's newer libstdc++ (say) is not replaced by the set's older one.
open_carry() {
    local lib=$scratch/lib f n p
    mkdir -p "$lib"
    for f in "$carry"/lib/*; do
        n=$(basename "$f")
        p=$(ldconfig -p 2>/dev/null | awk -v s="$n" '$1 == s { print $NF; exit }')
        case $n in libnb.so*) p='' ;; esac
        if [ -z "$p" ] || [ ! -s "$(readlink -f "$p")" ]; then ln -s "$f" "$lib/$n"; fi
    done
    export LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    export PATH=$carry/bin:$carry/bats/bin:$PATH NB_LIBRARY=$carry/lib/libnb.so
    # the tests' comparison tools (nb-imgcmp, nb-smvcmp) at $NB_ROOT/$BUILD/tests
    [ ! -d "$carry/build/tests" ] || export BUILD=$(realpath --relative-to="$root" "$carry/build")
    [ -n "${SYMINFO:-}" ] || [ ! -r "$carry/share/syminfo.lib" ] || export SYMINFO=$carry/share/syminfo.lib
}
bin=${NB_BIN:-$root/bin}
[ -z "$carry" ] || { bin=$carry/bin; open_carry; }
export NB_BIN=$bin
# the tests' and the fits' Python: the first with numpy (the GPU machine's
# /usr/bin/python3 has none; its python3 on PATH has)
for py in ${PYTHON:-} /usr/bin/python3 "$(command -v python3)"; do
    [ -n "$py" ] && "$py" -c 'import numpy' 2>/dev/null && break
    py=''
done
[ -z "$py" ] || export PYTHON=$py NB_TEST_PYTHON=$py

# share PART: its share of what is left of the budget (at least 30 s), by the
# weights of the parts still to run: the check (some 400 processes that each
# start CUDA) and the fits (the CPU's among them) take the longest
weight() { case $1 in build|series) echo 1 ;; bench|ncu) echo 2 ;; *) echo 4 ;; esac; }
share() {
    local left=$((budget - ($(date +%s) - start))) total=0 p
    for p in ${parts//,/ }; do [ -e "$scratch/.done-$p" ] || total=$((total + $(weight "$p"))); done
    [ "$total" -gt 0 ] || total=1
    left=$((left * $(weight "$1") / total))
    echo $((left < 30 ? 30 : left))
}
# run PART SECONDS CMD...: the command under timeout, its verdict a summary
# line, its log in the results; a part that did not pass is named in the
# command that runs the failed parts again
run_part() {
    local part=$1 secs=$2 t0 st
    shift 2
    t0=$(date +%s)
    # timeout runs programs, not this script's functions: those run in a bash
    # that has them (export -f, below) and the variables they read
    timeout --kill-after=10 "$secs" bash -c '"$@"' run_part "$@" > "$res/$part.log" 2>&1
    st=$?
    touch "$scratch/.done-$part"
    case $st in
        0) say "$part: ok ($(($(date +%s) - t0)) s)" ;;
        124|137) say "$part: TIMED OUT after $secs s (its log: $part.log in results.tgz)"; failed=1 ;;
        *) say "$part: FAILED, status $st (its log: $part.log in results.tgz)"; failed=1 ;;
    esac
    [ "$st" = 0 ] || rerun=${rerun:+$rerun,}$part
    pack
    return $st
}
finish() {
    pack
    if [ -n "$rerun" ]; then
        say "gpu-session: to run the failed parts again: bench/gpu-session.sh${carry:+ --carry ${carry#"$root"/}} --parts $rerun"
    fi
    say "gpu-session: $(($(date +%s) - start)) s; $([ $failed = 0 ] && echo 'every part passed' || echo 'some part failed: see above')"
    exit $failed
}

say "# gpu-session.sh $(date -u +%Y-%m-%dT%H:%MZ), $(uname -n), $cores cores, budget $budget s${carry:+, carried set $carry}"
command -v nvidia-smi > /dev/null &&
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | sed 's/^/# GPU: /' | tee -a "$summary"

# ---- build ------------------------------------------------------------------
build() {
    make -C "$root" -j"$cores" || return
    "$bin/nb-sim" --version
    make -C "$root" -s ptxas > "$res/ptxas.txt" 2>&1 || { cat "$res/ptxas.txt"; return 1; }
    "$here/ptxas-table.sh" "$res/ptxas.txt" | tee "$res/ptxas-table.txt"
}
# the carried set: built from this checkout's sources, every library found
# (the set's or the machine's), the machine's glibc new enough
carry_check() {
    local f bad=0 need have
    (cd "$root" && sha256sum -c --quiet "$carry/sources.sha256") ||
        { echo "the set was built from other sources than this checkout's (above): make it again with bench/gpu-carry.sh"; return 1; }
    for f in "$carry"/bin/* "$carry"/lib/*; do
        [ -L "$f" ] && continue
        echo "== $f"
        ldd "$f" 2>&1
    done > "$res/ldd.txt"
    grep -B20 'not found' "$res/ldd.txt" | grep -E '^==|not found' && bad=1
    need=$(sed -n 's/^glibc needed: GLIBC_\([0-9.]*\).*/\1/p' "$carry/MANIFEST.txt")
    have=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{ print $2 }')
    if [ -n "$need" ] && [ -n "$have" ] && [ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | head -n 1)" != "$need" ]; then
        echo "the set needs glibc $need; this machine has $have"
        bad=1
    fi
    cp "$carry/MANIFEST.txt" "$res/carry-manifest.txt"
    [ ! -e "$carry/ptxas.txt" ] || cp "$carry/ptxas.txt" "$carry/ptxas-table.txt" "$res/" 2>/dev/null
    "$bin/nb-sim" --version && "$bin/nb-noise" --version || return
    # the carried tools run: a small render on the CPU, counted, written as
    # CBF and, where the set carries libtiff (loaded when written), as TIFF
    local tif=()
    ! compgen -G "$carry/lib/libtiff.so.*" > /dev/null || tif=(-o "$scratch/probe.tif")
    "$bin/nb-geom" -q -default_F 100 -cell 100 100 100 90 90 90 -lambda 6.2 -N 5 -detpixels 64 |
        "$bin/nb-sim" -q --device cpu | "$bin/nb-noise" -q --rng philox |
        "$bin/nb-convert" -q -o "$scratch/probe.cbf" "${tif[@]}" || { echo "the carried tools could not render"; return 1; }
    echo "the carried tools rendered and wrote $(cd "$scratch" && ls probe.*)"
    [ "$bad" = 0 ]
}
export root here bin carry scratch res ref_cuda stills cores
export -f build carry_check
if want build; then
    if [ -n "$carry" ]; then run_part build "$(share build)" carry_check; else run_part build "$(share build)" build; fi
fi

# ---- preflight: what the parts wanted need, before the GPU -------------------
preflight() {
    local p miss
    for p in ${parts//,/ }; do
        miss=''
        case $p in
            build) continue ;;
            check) command -v bats > /dev/null || miss='bats (apt-get install bats, or --carry)'
                   [ -d "$root/tests/golden" ] || miss="${miss:+$miss, }tests/golden" ;;
            series) [ "$shm" = /dev/shm ] || echo "preflight: series: /dev/shm is not writable: the frames go to $shm" ;;
            ncu) command -v ncu > /dev/null || miss='ncu (Nsight Compute)' ;;
            fit) [ -n "$py" ] || miss='a Python with numpy ($PYTHON)' ;;
        esac
        if [ -n "$miss" ]; then say "preflight: $p: missing $miss"; else echo "preflight: $p: ready"; fi
    done
}
want build || [ -z "$carry" ] || "$bin/nb-sim" --version > /dev/null 2>&1 ||
    { say "gpu-session: the carried nb-sim does not start (run the build part: it runs ldd)"; failed=1; finish; }
preflight

if [ "$stand_in" = 1 ] && want check; then
    run_part check "$(share check)" env NB_BIN="$bin" "$root/tests/gpu-check.sh" --stand-in
    tail -1 "$res/check.log" | sed 's/^/  the CPU standing in for the GPU: /' | tee -a "$summary"
fi

# nothing else runs without a GPU: say so once
if ! "$bin/nb-geom" -q -default_F 100 -cell 100 100 100 90 90 90 -lambda 6.2 -N 5 -detpixels 8 |
    "$bin/nb-sim" -q --device cuda -o /dev/null 2> "$scratch/probe.err"; then
    say "gpu-session: no usable GPU: $(head -1 "$scratch/probe.err")"
    failed=1
    finish
fi
if [ "$stand_in" = 1 ]; then
    say "gpu-session: --stand-in: a GPU answers here: run without --stand-in for the GPU's parts"
    finish
fi

# ---- check ------------------------------------------------------------------
if want check; then
    run_part check "$(share check)" env NB_BIN="$bin" "$root/tests/gpu-check.sh"
    cp "$res/check.log" "$res/gpu-check.txt"
    tail -1 "$res/gpu-check.txt" | sed 's/^/  /' | tee -a "$summary"
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
    rm -rf "$scratch"/s-cpu "$scratch"/s-cuda
    [ "$differ" -eq 0 ]
}
export -f series
if want series; then
    run_part series "$(share series)" series
    cp "$res/series.log" "$res/series.txt"
    grep -E "frames/s|differing" "$res/series.txt" | sed 's/^/  /' | tee -a "$summary"
fi

# ---- bench ------------------------------------------------------------------
if want bench; then
    run_part bench "$(share bench)" "$bin/nb-bench" --device cuda --threads "$cores" --reps 3 --dir "$scratch" \
        --json "$res/nb-bench-gpu.json" -o "$res/nb-bench-gpu.txt"
fi

# ---- ncu --------------------------------------------------------------------
# the configuration's nb-geom flags (nb-bench --list), the detector 4096^2 for deriv-8
config_flags() {
    "$bin/nb-bench" --list | awk -v c="$1" '$1 == c { $1 = ""; print }' | sed 's/ *| *nb-sim.*//; s/^ //'
}
config_sim() {
    "$bin/nb-bench" --list | awk -v c="$1" '$1 == c' | sed -n 's/.*| *nb-sim //p'
}
# kernel times by CUDA events, which need no profiler counters: nb-sim -v's
# "GPU kernel K ms" and nanoBraggCUDA's KERNEL_MS, five runs each, interleaved
kernel_events() {
    local c=$1 flags=$2 sim=$3 rep ours theirs
    for rep in 1 2 3 4 5; do
        # shellcheck disable=SC2086
        ours=$("$bin/nb-sim" -v --device cuda $sim -o /dev/null "$scratch/$c.nbs" 2>&1 |
            sed -n 's/^.*GPU kernel \([0-9.]*\) ms.*/\1/p' | awk '{ s += $1 } END { print s }')
        theirs=-
        if [ -n "$ref_cuda" ] && [ "$c" != deriv-8 ]; then
            # shellcheck disable=SC2086
            theirs=$(cd "$scratch" && "$ref_cuda" $flags -precision single -nonoise -nopgm -floatfile ref.bin \
                -intfile /dev/null 2>&1 > /dev/null | sed -n 's/^KERNEL_MS //p')
        fi
        echo "$c $rep ${ours:--} ${theirs:--}"
    done
}
ncu_part() {
    local c flags sim metrics=gpu__time_duration.sum,launch__registers_per_thread,smsp__inst_executed.sum,l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum
    local have_ncu=1 st=0
    command -v ncu > /dev/null || { have_ncu=0; echo "ncu (Nsight Compute) is not installed: CUDA events' times only"; }
    echo "# config run nb-ms nanoBraggCUDA-ms (CUDA events)" > "$res/kernel-events.txt"
    for c in oversample deriv-image deriv-8; do
        flags=$(config_flags "$c") sim=$(config_sim "$c")
        [ "$c" = deriv-8 ] && flags=${flags/-detpixels 1024/-detpixels 4096}
        # shellcheck disable=SC2086
        "$bin/nb-geom" -q $flags -o "$scratch/$c.nbs" || return
        kernel_events "$c" "$flags" "$sim" >> "$res/kernel-events.txt"
        [ "$have_ncu" = 1 ] || continue
        # shellcheck disable=SC2086
        ncu --clock-control none --metrics "$metrics" --csv "$bin/nb-sim" -q --device cuda $sim -o /dev/null \
            "$scratch/$c.nbs" > "$res/ncu-$c.csv" || { st=1; continue; }
        grep -E '"(gpu__time_duration.sum|launch__registers_per_thread|l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum)"' \
            "$res/ncu-$c.csv" | awk -F'","' -v c="$c" '{ printf "%s: %s %s %s %s\n", c, $5, $(NF - 2), $(NF - 1), $NF }'
        # nanoBraggCUDA has no derivatives: deriv-image's image is its equivalent, deriv-8 has none
        if [ -n "$ref_cuda" ] && [ "$c" != deriv-8 ]; then
            # shellcheck disable=SC2086
            (cd "$scratch" && ncu --clock-control none --metrics gpu__time_duration.sum --csv "$ref_cuda" $flags \
                -precision single -nonoise -nopgm -floatfile ref.bin -intfile /dev/null) \
                > "$res/ncu-$c-nanoBraggCUDA.csv" || { st=1; continue; }
            grep gpu__time_duration "$res/ncu-$c-nanoBraggCUDA.csv" | sed "s/^/$c nanoBraggCUDA: /"
        fi
    done
    # every run timed: ours always, nanoBraggCUDA's where it was given (it has no derivatives)
    if awk -v ref="$ref_cuda" '!/^#/ && ($3 == "-" || (ref != "" && $1 != "deriv-8" && $4 == "-"))' \
        "$res/kernel-events.txt" | grep -q .; then
        echo "a run gave no kernel time (nb-sim -v's \"GPU kernel\", nanoBraggCUDA's KERNEL_MS): kernel-events.txt"
        st=1
    fi
    # medians and ranges of the events' times, and the ratio where both ran
    awk '!/^#/ { n[$1]++; a[$1, n[$1]] = $3; b[$1, n[$1]] = $4 }
        function med(x, c, k,   i, j, t, v) { for (i = 1; i <= k; i++) v[i] = x[c, i]
            for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (v[j] + 0 < v[i] + 0) { t = v[i]; v[i] = v[j]; v[j] = t }
            return sprintf("%s (%s-%s)", v[int((k + 1) / 2)], v[1], v[k]) }
        END { for (c in n) { m = med(a, c, n[c]); r = med(b, c, n[c]); split(m, x, " "); split(r, y, " ")
            printf "events %s: nb %s ms, nanoBraggCUDA %s ms%s\n", c, m, r,
                (y[1] + 0 > 0 && x[1] + 0 > 0) ? sprintf(", %.2fx", y[1] / x[1]) : "" } }' "$res/kernel-events.txt"
    return $st
}
export -f config_flags config_sim kernel_events ncu_part
if want ncu; then
    run_part ncu "$(share ncu)" ncu_part
    grep -E '^(oversample|deriv|events)' "$res/ncu.log" | sed 's/^/  /' | tee -a "$summary"
fi

# ---- fit --------------------------------------------------------------------
# G1's per-frame fits with nb-fit --device cuda and --device cpu on all cores
# (speed.sh's frame part; its F part too with --stills), then the GPU's fits
# against the CPU's: every orientation within 1e-4 degrees, the same verdicts
fit_part() {
    local d p what=frame st=0
    [ "$stills_given" = 0 ] || what=frame,F
    for d in cuda cpu; do
        NB_BIN="$bin" "$root/bench/dataset/speed.sh" --work "$scratch/fit-$d" --device "$d" --threads "$cores" \
            --parts "$what" --stills "$stills"
        mkdir -p "$res/fit-$d"
        cp "$scratch/fit-$d/speed.txt" "$res/fit-$d/" 2>/dev/null
        for p in frame F; do cp "$scratch/fit-$d/$p/results.txt" "$res/fit-$d/$p-results.txt" 2>/dev/null; done
        cp "$scratch/fit-$d/frame/g1/fit.expt" "$res/fit-$d/g1-fit.expt" 2>/dev/null
        grep -q . "$res/fit-$d/speed.txt" 2>/dev/null || return 1
    done
    [ -s "$res/fit-cpu/g1-fit.expt" ] && [ -s "$res/fit-cuda/g1-fit.expt" ] || { echo "a G1 fit wrote no fit.expt"; return 1; }
    "$PYTHON" "$root/bench/dataset/evaluate.py" --json "$res/fit-compare.json" \
        "$res/fit-cpu/g1-fit.expt" "$res/fit-cuda/g1-fit.expt" > "$res/fit-compare.txt" 2>&1
    "$PYTHON" - "$res/fit-compare.json" <<'EOF' || st=1
import json, sys
s = json.load(open(sys.argv[1]))
worst = s["orientation_deg"]["max"]
print("fit: the GPU's G1 orientations against the CPU's: median %.2g, worst %.2g degrees (gate 1e-4), %s of %s frames"
      % (s["orientation_deg"]["median"], worst, s["measured"], s["frames"]))
sys.exit(not (worst is not None and worst <= 1e-4 and s["measured"] == s["frames"]))
EOF
    for d in cuda cpu; do grep '^G1' "$res/fit-$d/frame-results.txt" | awk '{ print $2 }' > "$scratch/verdict-$d"; done
    if cmp -s "$scratch/verdict-cuda" "$scratch/verdict-cpu"; then
        echo "fit: the same G1 verdict on both: $(cat "$scratch/verdict-cpu")"
    else
        echo "fit: the G1 verdicts differ: GPU $(cat "$scratch/verdict-cuda"), CPU $(cat "$scratch/verdict-cpu")"
        st=1
    fi
    rm -rf "$scratch"/fit-cuda "$scratch"/fit-cpu
    return $st
}
export stills_given
export -f fit_part
if want fit; then
    run_part fit "$(share fit)" fit_part
    grep -hE '^(frame|F|  accuracy)' "$res"/fit-*/speed.txt 2>/dev/null | sed 's/^/  /' | tee -a "$summary"
    grep -E '^fit: ' "$res/fit.log" | sed 's/^/  /' | tee -a "$summary"
fi

finish

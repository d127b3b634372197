#!/usr/bin/env bash
# gpu-carry.sh - what the GPU check needs, made ready on this machine before a
# GPU is lent (issue 51).  The GPU machine has CUDA, Python (numpy) and
# PyTorch but none of the Debian packages the tools load or the tests run
# (bats, libtiff, libccp4, Open MPI, libhdf5) and no network, and it is lent
# for minutes: so the tools are built here, with nvcc, and travel with what
# they load in one folder that the device tool carries (an ignored path:
# `carry: [".gpu-carry"]`), which bench/gpu-session.sh --carry opens there.
#
# Usage: bench/gpu-carry.sh [OPTIONS]
#   --dir DIR         the carry set (default .gpu-carry in this checkout,
#                     ignored by git); emptied first
#   --ref-cuda PATH   a nanoBraggCUDA binary the user built (never built or
#                     fetched here): copied to DIR/ref/nanoBraggCUDA, which
#                     gpu-session.sh --carry times beside ours
#   --no-build        take bin/ and build/ as they are (default: make first)
#   --no-ptxas        leave out the registers and spills (nvcc -Xptxas -v)
#   --with-hdf5       carry libhdf5 and what it loads too (about 20 MB: NXmx
#                     files written on the GPU machine); left out by default,
#                     as the check writes none
#   --dry-run         then run bench/gpu-session.sh --carry DIR here with this
#                     machine's own copies of everything the set carries
#                     hidden (a mount namespace: root and unshare): it must
#                     stop only for want of a GPU, after gpu.bats has passed
#                     with the CPU standing in for the GPU (gpu-session.sh
#                     --stand-in); DIR/dry-run.txt
# What DIR holds:
#   bin/              the tools, built with the CUDA backend, debug info stripped
#   lib/              libnb.so (the engine, for the Python package) and every
#                     library the tools link or load (ldd's closure, the
#                     dlopened libtiff and liblz4) but glibc's own; gpu-session
#                     puts on LD_LIBRARY_PATH only those the machine lacks
#   share/            CCP4's space groups (syminfo.lib: nb-hkl and nb-fit's
#                     MTZ) and nb-bench's reflections (nb/bench/P1.hkl)
#   bats/             bats-core, as installed here
#   build/tests/      the tests' image comparisons (nb-imgcmp, nb-smvcmp)
#   ref/              nanoBraggCUDA, where --ref-cuda gave one
#   ptxas.txt         make ptxas: every kernel's registers, stack and spills
#                     for each architecture built; ptxas-table.txt the table
#                     (bench/ptxas-table.sh); the fast derivative kernels
#                     must not spill
#   sources.sha256    the sources the tools were built from: gpu-session
#                     refuses a set older than the checkout it runs in
#   MANIFEST.txt      commit, compilers, glibc needed, sizes
# Exit status: 0 ready (and, with --dry-run, the dry run stopped only for
# want of a GPU); 1 otherwise; 2 usage.  The device tool carries at most
# 64 MiB with the checkout: over that this fails, saying by how much.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
usage() { local fd=2; [ "${1:-2}" != 0 ] || fd=1; sed -n '/^# Usage:/,/^# What DIR holds:/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&"$fd"; exit "${1:-2}"; }
die() { echo "gpu-carry: $*" >&2; exit 1; }

dir=$root/.gpu-carry ref_cuda='' build=1 ptxas=1 hdf5=0 dry=0
while [ $# -gt 0 ]; do
    case $1 in
        --dir) [ $# -ge 2 ] || usage; dir=$2; shift 2 ;;
        --ref-cuda) [ $# -ge 2 ] || usage; ref_cuda=$2; shift 2 ;;
        --no-build) build=0; shift ;;
        --no-ptxas) ptxas=0; shift ;;
        --with-hdf5) hdf5=1; shift ;;
        --dry-run) dry=1; shift ;;
        -h|--help) usage 0 ;;
        *) echo "gpu-carry: unknown argument '$1'" >&2; usage ;;
    esac
done
[ -z "$ref_cuda" ] || [ -x "$ref_cuda" ] || { echo "gpu-carry: --ref-cuda '$ref_cuda' is not an executable" >&2; exit 2; }
case $dir in /|"$root"|"$root/") echo "gpu-carry: --dir '$dir' would empty the checkout" >&2; exit 2 ;; esac
nvcc=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null) || die "no nvcc (CUDA's compiler): the GPU's tools cannot be built here"

# ---- the tools, with the CUDA backend -------------------------------------------
if [ "$build" = 1 ]; then
    make -C "$root" -s -j"$(nproc)" all >&2 || die "make failed"
fi
"$root/bin/nb-sim" --version 2>&1 | grep -q cuda || die "bin/nb-sim has no CUDA backend (was nvcc found at build time? make NVCC=$nvcc)"
[ -e "$root/build/libnb.so" ] || die "no build/libnb.so: run make"

rm -rf "$dir" && mkdir -p "$dir"/{bin,lib,share,bats} || die "cannot make '$dir'"
dir=$(cd "$dir" && pwd)
for t in "$root"/bin/nb-*; do
    strip --strip-debug -o "$dir/bin/$(basename "$t")" "$t" || die "cannot strip $t"
done
so=$(readlink -f "$root/build/libnb.so")
strip --strip-debug -o "$dir/lib/$(basename "$so")" "$so" || die "cannot strip $so"
for l in libnb.so.0 libnb.so; do ln -s "$(basename "$so")" "$dir/lib/$l"; done

# ---- what they load --------------------------------------------------------------
# glibc's own libraries stay: the machine's (Ubuntu 24.04's 2.39) is newer than
# any this builds against, and a carried one would have to match its ld.so
is_glibc() { case $1 in libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*|libresolv.so.*|libutil.so.*|libanl.so.*|libmvec.so.*|ld-linux*|linux-vdso*) return 0 ;; *) return 1 ;; esac; }
where_is() { ldconfig -p | awk -v s="$1" '$1 == s { print $NF; exit }'; }
dlopened=$(make -C "$root" -s print-dlopen) || die "make print-dlopen failed"
[ "$hdf5" = 1 ] || dlopened=$(printf '%s\n' $dlopened | grep -v hdf5)
roots=("$dir"/bin/nb-* "$dir/lib/$(basename "$so")")
for s in $dlopened; do
    p=$(where_is "$s")
    [ -n "$p" ] || { echo "gpu-carry: $s (loaded when a file needs it) is not on this machine: not carried" >&2; continue; }
    cp -L "$p" "$dir/lib/$s" && roots+=("$dir/lib/$s")
done
for f in "${roots[@]}"; do
    ldd "$f" | awk '$2 == "=>" { print $1, $3 }'
done | sort -u | while read -r name path; do
    is_glibc "$name" && continue
    [ "$path" != "not" ] || die "$name, which the tools load, is not on this machine"
    [ -e "$dir/lib/$name" ] || cp -L "$path" "$dir/lib/$name" || exit 1
done || die "cannot copy the libraries"
# CCP4's space-group table, which libccp4c reads at run time; nb-bench's
# reflections, where it looks beside its tools (bindir/../share/nb/bench)
syminfo=$(make -C "$root" -s print-syminfo 2>/dev/null)
[ -z "$syminfo" ] || [ ! -r "$syminfo" ] || cp "$syminfo" "$dir/share/syminfo.lib" || die "cannot copy $syminfo"
mkdir -p "$dir/share/nb/bench" && cp "$root/tests/golden/inputs/P1.hkl" "$dir/share/nb/bench/" || die "cannot copy P1.hkl"

# the tests' comparison tools, where the tests look for them ($NB_ROOT/$BUILD/tests)
make -C "$root" -s build/tests/nb-imgcmp build/tests/nb-smvcmp >&2 || die "cannot build the tests' nb-imgcmp and nb-smvcmp"
mkdir -p "$dir/build/tests" && cp "$root"/build/tests/nb-imgcmp "$root"/build/tests/nb-smvcmp "$dir/build/tests/" ||
    die "cannot copy nb-imgcmp and nb-smvcmp"

# ---- bats ------------------------------------------------------------------------
# the installed bats: bin/bats beside lib/bats-core and libexec/bats-core (inside
# bats, PATH starts with libexec/bats-core, whose bats is not that one)
bats='' bats_root=''
for b in ${BATS_ROOT:+"$BATS_ROOT/bin/bats"} $(type -ap bats); do
    r=$(cd "$(dirname "$(readlink -f "$b")")/.." 2>/dev/null && pwd) || continue
    if [ -d "$r/lib/bats-core" ] && [ -d "$r/libexec/bats-core" ]; then bats=$b bats_root=$r; break; fi
done
[ -n "$bats" ] || die "bats is not installed (apt-get install bats)"
mkdir -p "$dir/bats/bin" &&
    cp "$(readlink -f "$bats")" "$dir/bats/bin/bats" &&
    for d in lib/bats-core libexec/bats-core; do
        mkdir -p "$dir/bats/$(dirname "$d")" && cp -r "$bats_root/$d" "$dir/bats/$d" || exit 1
    done || die "cannot copy bats from $bats_root"

# ---- nanoBraggCUDA, where the user built one ---------------------------------------
if [ -n "$ref_cuda" ]; then
    mkdir -p "$dir/ref" && cp "$ref_cuda" "$dir/ref/nanoBraggCUDA" || die "cannot copy $ref_cuda"
    if ldd "$dir/ref/nanoBraggCUDA" | awk '$2 == "=>" { print $1 }' | while read -r n; do is_glibc "$n" || echo "$n"; done | grep -q .; then
        echo "gpu-carry: note: nanoBraggCUDA loads more than glibc (ldd $dir/ref/nanoBraggCUDA); build it with -static-libstdc++ -lcudart_static" >&2
    fi
fi

# ---- registers and spills ----------------------------------------------------------
# the fast derivative kernels (k_grad on nb_fdual) must not spill (issue 51)
if [ "$ptxas" = 1 ]; then
    make -C "$root" -s ptxas > "$dir/ptxas.txt" 2>&1 || die "make ptxas failed: $dir/ptxas.txt"
    "$here/ptxas-table.sh" --no-spills 'k_grad<nb_fdual' "$dir/ptxas.txt" > "$dir/ptxas-table.txt" ||
        die "the fast derivative kernels spill ($dir/ptxas-table.txt)"
fi

# ---- the sources, the manifest, the size -----------------------------------------
(cd "$root" && git ls-files -z Makefile VERSION libnbcore engine cli formats tools fit | xargs -0 sha256sum) \
    > "$dir/sources.sha256" || die "cannot list the sources (is this a git checkout?)"
glibc_needed=$(find "$dir/bin" "$dir/lib" -type f -exec objdump -T {} + 2>/dev/null |
    grep -o 'GLIBC_2\.[0-9]*' | sort -t. -k2,2n -u | tail -n 1)
tree_bytes=$(cd "$root" && { git ls-files -z; git ls-files -z -o --exclude-standard; } | xargs -0 du -cb 2>/dev/null | awk 'END { print $1 }')
carry_bytes=$(du -sb "$dir" | awk '{ print $1 }')
limit=$((64 * 1024 * 1024))
{
    echo "# gpu-carry.sh $(date -u +%Y-%m-%dT%H:%MZ) on $(uname -n)"
    echo "commit: $(cd "$root" && git rev-parse HEAD)$(cd "$root" && git diff --quiet HEAD -- . ':!.gpu-carry' || echo ' (with changes)')"
    echo "nvcc: $("$nvcc" --version | tail -n 1)"
    echo "cc: $(${CC:-cc} --version | head -n 1)"
    echo "glibc needed: ${glibc_needed:-none} (built against $(ldd --version | head -n 1 | awk '{ print $NF }'))"
    echo "loaded when needed: $(echo $dlopened)"
    echo "ref: $([ -n "$ref_cuda" ] && echo "nanoBraggCUDA from $ref_cuda" || echo none)"
    echo "size: $carry_bytes bytes, with the checkout's $tree_bytes: $((carry_bytes + tree_bytes)) of $limit"
    (cd "$dir" && find . -type f -printf '%s %p\n' | sort -k2)
} > "$dir/MANIFEST.txt"
if [ $((carry_bytes + tree_bytes)) -gt "$limit" ]; then
    die "the set ($carry_bytes bytes) and the checkout ($tree_bytes) are over the device tool's 64 MiB by $((carry_bytes + tree_bytes - limit)) bytes"
fi
echo "gpu-carry: $dir ready: $((carry_bytes / 1048576)) MiB, with the checkout $(((carry_bytes + tree_bytes) / 1048576)) of 64 MiB" >&2

# ---- the dry run ----------------------------------------------------------------
# gpu-session.sh --carry here, as the GPU machine would see the set: this
# machine's copy of every library the set carries, of bats and of CCP4's
# table bound over by /dev/null in a mount namespace of the run's own, so
# that each must come from the set.  The run must pass its build part (the
# set checked, ldd, a small render written as TIFF and CBF), the preflight
# and gpu.bats with the CPU standing in for the GPU, and stop at the GPU
# probe, and there only.
[ "$dry" = 1 ] || exit 0
[ "$(id -u)" = 0 ] && command -v unshare > /dev/null ||
    die "--dry-run hides this machine's libraries in a mount namespace: it needs root and unshare"
hide=("$(readlink -f "$bats")" "dir:$bats_root/lib/bats-core" "dir:$bats_root/libexec/bats-core")
[ -z "$syminfo" ] || hide+=("$(readlink -f "$syminfo")")
for f in "$dir"/lib/*; do
    n=$(basename "$f")
    case $n in libnb.so*) continue ;; esac
    p=$(where_is "$n")
    [ -z "$p" ] || hide+=("$(readlink -f "$p")")
done
dry_out=$dir/dry-run
rm -rf "$dry_out"
# shellcheck disable=SC2016
unshare -m bash -c '
    probe=$1 session=$2 carry=$3 out=$4; shift 4
    for f in "$@"; do
        case $f in
            dir:*) mount -t tmpfs -o ro none "${f#dir:}" ;;
            *) mount --bind /dev/null "$f" ;;
        esac || { echo "dry run: cannot hide $f" >&2; exit 3; }
    done
    # the hiding holds: without the set the tools no longer start
    if "$probe" --version > /dev/null 2>&1; then echo "dry run: this machine'"'"'s libraries are not hidden" >&2; exit 3; fi
    "$session" --carry "$carry" --out "$out" --budget 300 --stand-in
' _ "$dir/bin/nb-fit" "$here/gpu-session.sh" "$dir" "$dry_out" "${hide[@]}" > "$dir/dry-run.txt" 2>&1
st=$?
summary=$dry_out/summary.txt
echo "# hidden: ${#hide[@]} files and folders of this machine's (bats, CCP4's table, the carried libraries)" >> "$dir/dry-run.txt"
[ "$st" != 3 ] || die "the dry run could not hide this machine's libraries: $dir/dry-run.txt"
grep -q '^build: ok' "$summary" 2>/dev/null || die "the dry run's build part did not pass: $dir/dry-run.txt, $dry_out/results.tgz"
grep -q '^check: ok' "$summary" || die "the dry run's gpu.bats (the CPU standing in) did not pass: $dir/dry-run.txt, $dry_out/results.tgz"
# a part missing something, other than the GPU machine's own ncu
others=$(grep -E 'FAILED|TIMED OUT|^preflight: .*missing' "$summary" | grep -v '^preflight: ncu: missing ncu')
[ -z "$others" ] || die "the dry run stopped for more than the want of a GPU: $others"
grep -q '^gpu-session: no usable GPU' "$summary" || die "the dry run did not stop at the GPU probe: $dir/dry-run.txt"
[ "$st" = 1 ] || die "gpu-session.sh exited $st in the dry run, not 1"
echo "gpu-carry: dry run: the set passed its checks and stopped only for want of a GPU ($summary)" >&2

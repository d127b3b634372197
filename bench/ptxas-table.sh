#!/usr/bin/env bash
# ptxas-table.sh - a table of the CUDA kernels' registers, stack and spills
# from the log of `make ptxas` (nvcc -Xptxas -v): one line a kernel and
# architecture, the kernel's name demangled.  Issue 51 wants the fast
# derivative kernels without spills; --no-spills NAME fails where a kernel
# whose name holds NAME spills on any architecture.
#
# Usage: bench/ptxas-table.sh [--no-spills NAME]... [LOG]   (LOG: default stdin)
# Exit status: 0; 1 where a kernel named by --no-spills spills, or the log
# holds no kernel; 2 usage.
set -uo pipefail

usage() { sed -n 's/^# \{0,1\}//; /^Usage:/p' "$0" >&2; exit 2; }
no_spills=()
while [ $# -gt 0 ]; do
    case $1 in
        --no-spills) [ $# -ge 2 ] || usage; no_spills+=("$2"); shift 2 ;;
        -h|--help) sed -n 's/^# \{0,1\}//; /^Usage:/p' "$0"; exit 0 ;;
        -*) echo "ptxas-table: unknown option '$1'" >&2; usage ;;
        *) break ;;
    esac
done
[ $# -le 1 ] || usage
log=${1:-/dev/stdin}
[ -r "$log" ] || { echo "ptxas-table: cannot read '$log'" >&2; exit 1; }
demangle() { if command -v c++filt > /dev/null; then c++filt; else cat; fi; }

# "Compiling entry function 'K' for 'sm_NN'", then "Function properties for
# K" and its stack and spill line, then "Used R registers"
table=$(awk '
    /Compiling entry function/ {
        split($0, q, "\047"); kernel = q[2]; arch = q[4]; props = 0; stack = st = ld = "-"; next
    }
    /Function properties for/ { props = (kernel != "" && index($0, kernel) > 0); next }
    /bytes stack frame/ && props {
        for (i = 1; i <= NF; i++) {
            if ($(i + 1) == "bytes" && $(i + 2) == "stack") stack = $i
            if ($(i + 1) == "bytes" && $(i + 2) == "spill" && $(i + 3) ~ /^stores/) st = $i
            if ($(i + 1) == "bytes" && $(i + 2) == "spill" && $(i + 3) ~ /^loads/) ld = $i
        }
        props = 0; next
    }
    /Used [0-9]+ registers/ && kernel != "" {
        for (i = 1; i <= NF; i++) if ($i == "Used") regs = $(i + 1)
        printf "%s\t%s\t%s\t%s\t%s\t%s\n", arch, regs, stack, st, ld, kernel
        kernel = ""
    }' "$log")
[ -n "$table" ] || { echo "ptxas-table: no kernel in '$log' (was it made with -Xptxas -v?)" >&2; exit 1; }
printf 'arch\tregisters\tstack\tspill stores\tspill loads\tkernel\n'
printf '%s\n' "$table" | demangle | sort -t$'\t' -k6,6 -k1,1
status=0
for n in "${no_spills[@]}"; do
    bad=$(printf '%s\n' "$table" | demangle | awk -F'\t' -v n="$n" 'index($6, n) && ($4 + 0 > 0 || $5 + 0 > 0)')
    if [ -n "$bad" ]; then
        echo "ptxas-table: kernels named '$n' spill:" >&2
        printf '%s\n' "$bad" >&2
        status=1
    elif ! printf '%s\n' "$table" | demangle | awk -F'\t' -v n="$n" 'index($6, n) { found = 1 } END { exit !found }'; then
        echo "ptxas-table: no kernel named '$n' in the log" >&2
        status=1
    fi
done
exit $status

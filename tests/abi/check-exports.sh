#!/usr/bin/env bash
# check-exports.sh - the export gate of libnb.so (issue 47): every symbol the
# library defines for other programs is a function its installed headers
# declare, and every function they declare is defined there.
#   tests/abi/check-exports.sh LIB HEADER...
# The declared names are the identifiers called like functions in the
# preprocessed headers (the compiler's view, macros expanded), less the
# compiler's own words (__attribute__ ...); the defined ones are nm -D
# --defined-only's, less the version nodes (NB_1, type A) and with their
# version (@@NB_1) taken off.  Prints what is wrong and exits 1; 0 when the
# two lists are one.
set -euo pipefail
if [ $# -lt 2 ]; then
    echo "usage: $0 LIB HEADER..." >&2
    exit 2
fi
lib=$1
shift
cc=${CC:-cc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for h in "$@"; do printf '#include "%s"\n' "$(cd "$(dirname "$h")" && pwd)/$(basename "$h")"; done > "$tmp/all.c"
"$cc" -std=c11 -E -P "$tmp/all.c" > "$tmp/pre.c"
# identifiers before a '(' that are not keywords, attributes or the
# system headers' reserved names (leading underscore)
grep -oE '\b[A-Za-z][A-Za-z0-9_]*[[:space:]]*\(' "$tmp/pre.c" | tr -d '( \t' |
    grep -vxE 'sizeof|visibility|typeof|alignof|_Alignof' | sort -u > "$tmp/declared"
nm -D --defined-only "$lib" | awk '$2 != "A" { print $3 }' | sed 's/@.*//' | sort -u > "$tmp/exported"
[ -s "$tmp/exported" ] || { echo "$lib exports nothing (not a shared library?)"; exit 1; }

status=0
extra=$(comm -23 "$tmp/exported" "$tmp/declared")
if [ -n "$extra" ]; then
    echo "$lib exports $(echo "$extra" | wc -l) symbols its headers do not declare:"
    echo "$extra" | sed 's/^/  /'
    status=1
fi
# the declared functions of the library's prefix that it lacks
missing=$(grep '^nb_' "$tmp/declared" | comm -13 "$tmp/exported" - || true)
if [ -n "$missing" ]; then
    echo "the headers declare $(echo "$missing" | wc -l) functions $lib does not export:"
    echo "$missing" | sed 's/^/  /'
    status=1
fi
[ "$status" -eq 0 ] && echo "$lib: $(wc -l < "$tmp/exported") symbols, each declared by $*"
exit "$status"

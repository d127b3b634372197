#!/usr/bin/env bash
# gpu-check.sh - the CUDA backend proven on this machine's GPU (make check-gpu):
#   1. every golden case through the drop-in with nb-sim forced onto the GPU
#      (tests/parity/run.sh: its gates for the double and the fast path, the
#      int, PGM and noise images);
#   2. tests/cli/gpu.bats: the GPU against the CPU (both paths, a series,
#      derivatives, large crystals).
# make check runs both too, but renders the parity on whatever --device auto
# finds and skips gpu.bats without a GPU; this fails where there is no GPU.
# Ends with "N passed, N failed, N skipped"; exit 0 when nothing failed.
set -u
cd "$(dirname "$0")/.."
bin=${NB_BIN:-$PWD/bin}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if ! "$bin/nb-geom" -q -default_F 100 -cell 100 100 100 90 90 90 -lambda 6.2 -N 5 -detpixels 8 |
    "$bin/nb-sim" -q --device cuda -o /dev/null 2>"$work/err"; then
    echo "gpu-check: no usable GPU: $(head -1 "$work/err")" >&2
    exit 1
fi
command -v bats >/dev/null || { echo "gpu-check: bats is not installed (apt-get install bats)" >&2; exit 1; }

# the stages as they are, but nb-sim always on the GPU
mkdir "$work/bin"
for t in "$bin"/nb-*; do ln -s "$t" "$work/bin/"; done
rm "$work/bin/nb-sim"
printf '#!/bin/sh\nexec "%s/nb-sim" --device cuda "$@"\n' "$bin" >"$work/bin/nb-sim"
chmod +x "$work/bin/nb-sim"

NB_BIN="$work/bin" tests/parity/run.sh >"$work/parity.tap" 2>&1
bats --tap tests/cli/gpu.bats >"$work/gpu.tap" 2>&1
passed=0 failed=0 skipped=0
for f in "$work/parity.tap" "$work/gpu.tap"; do
    p=$(grep -cE '^ok ' "$f") s=$(grep -cE '^ok .*# [Ss][Kk][Ii][Pp]' "$f") x=$(grep -cE '^not ok ' "$f")
    printf '%-24s %4d passed, %d failed, %d skipped\n' "$(basename "$f" .tap)" $((p - s)) "$x" "$s"
    grep -E -A6 '^not ok ' "$f"
    passed=$((passed + p - s)) failed=$((failed + x)) skipped=$((skipped + s))
done
echo
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]

#!/usr/bin/env bash
# gpu-check.sh - the CUDA backend proven on this machine's GPU (make check-gpu):
#   1. every golden case through the drop-in with nb-sim forced onto the GPU
#      (tests/parity/run.sh: its gates for the double and the fast path, the
#      int, PGM and noise images);
#   2. tests/cli/gpu.bats: the GPU against the CPU (both paths, a series,
#      derivatives, large crystals, nb-noise's counts, nb-fit);
#   3. tests/python/test_gpu.py: the library and the Python package rendering
#      on the GPU ($NB_TEST_PYTHON, default /usr/bin/python3, with numpy and
#      pytest).
# make check runs them too, but renders the parity on whatever --device auto
# finds and skips the GPU's tests without a GPU; this fails where there is no
# GPU.
#
# --stand-in: a dry run of the scripts before a GPU is lent, where the CPU
# stands in for one: the tools' --device cuda becomes --device cpu and
# gpu.bats's lines that ask whether the GPU did the work (marked "# the GPU's
# own") are left out; the parity (make check's) and the Python package (the
# library cannot be told to stand in) are not run.  It proves the scripts
# (names, paths, tolerances as written), not the GPU.
# Ends with "N passed, N failed, N skipped"; exit 0 when nothing failed.
set -u
cd "$(dirname "$0")/.."
bin=${NB_BIN:-$PWD/bin}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
command -v bats >/dev/null || { echo "gpu-check: bats is not installed (apt-get install bats)" >&2; exit 1; }

# the stages as they are, but nb-sim always on the GPU: the parity, gpu.bats,
# the Python package
run_on_gpu() {
    mkdir "$work/bin"
    for t in "$bin"/nb-*; do ln -s "$t" "$work/bin/"; done
    rm "$work/bin/nb-sim"
    printf '#!/bin/sh\nexec "%s/nb-sim" --device cuda "$@"\n' "$bin" >"$work/bin/nb-sim"
    chmod +x "$work/bin/nb-sim"
    NB_BIN="$work/bin" tests/parity/run.sh >"$work/parity.tap" 2>&1
    bats --tap tests/cli/gpu.bats >"$work/gpu.tap" 2>&1
    local py=${NB_TEST_PYTHON:-/usr/bin/python3}
    if "$py" -c 'import numpy, pytest' 2>/dev/null; then
        NB_TAP="$work/python.tap" PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" \
            "$py" -m pytest -q -p no:cacheprovider tests/python/test_gpu.py >"$work/python.log" 2>&1
        [ -s "$work/python.tap" ] ||
            { echo "not ok 1 - pytest ran no test:"; sed 's/^/#   /' "$work/python.log"; } >"$work/python.tap"
    else
        echo "not ok 1 - the Python package on the GPU: $py has no numpy or no pytest" >"$work/python.tap"
    fi
    tapfiles=("$work/parity.tap" "$work/gpu.tap" "$work/python.tap")
}

# gpu.bats with the CPU standing in for the GPU (--stand-in)
run_stand_in() {
    "$bin/nb-sim" --version | grep -q cuda ||
        { echo "gpu-check: --stand-in: this build has no CUDA backend: gpu.bats would skip every test" >&2; exit 1; }
    mkdir "$work/bin"
    local t
    for t in "$bin"/nb-*; do
        cat >"$work/bin/$(basename "$t")" <<EOF
#!/usr/bin/env bash
# the CPU standing in for the GPU (tests/gpu-check.sh --stand-in)
a=() prev=
for x in "\$@"; do
    if [ "\$prev" = --device ] && [ "\$x" = cuda ]; then x=cpu; fi
    [ "\$x" != --device=cuda ] || x=--device=cpu
    a+=("\$x") prev=\$x
done
exec "$t" "\${a[@]}"
EOF
        chmod +x "$work/bin/$(basename "$t")"
    done
    sed -e "/# the GPU's own\$/s/^\( *\).*\$/\1:/" -e "s|^load helper\$|load \"$PWD/tests/cli/helper\"|" \
        tests/cli/gpu.bats >"$work/gpu-stand-in.bats"
    NB_ROOT=$PWD NB_BIN="$work/bin" bats --tap "$work/gpu-stand-in.bats" >"$work/gpu.tap" 2>&1
    tapfiles=("$work/gpu.tap")
}

case ${1:-} in
    --stand-in) run_stand_in ;;
    '')
        if ! "$bin/nb-geom" -q -default_F 100 -cell 100 100 100 90 90 90 -lambda 6.2 -N 5 -detpixels 8 |
            "$bin/nb-sim" -q --device cuda -o /dev/null 2>"$work/err"; then
            echo "gpu-check: no usable GPU: $(head -1 "$work/err")" >&2
            exit 1
        fi
        run_on_gpu ;;
    *) echo "usage: tests/gpu-check.sh [--stand-in]" >&2; exit 2 ;;
esac

passed=0 failed=0 skipped=0
for f in "${tapfiles[@]}"; do
    p=$(grep -cE '^ok ' "$f") s=$(grep -cE '^ok .*# [Ss][Kk][Ii][Pp]' "$f") x=$(grep -cE '^not ok ' "$f")
    printf '%-24s %4d passed, %d failed, %d skipped\n' "$(basename "$f" .tap)" $((p - s)) "$x" "$s"
    grep -E -A6 '^not ok ' "$f"
    passed=$((passed + p - s)) failed=$((failed + x)) skipped=$((skipped + s))
done
echo
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]

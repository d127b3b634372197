#!/usr/bin/env bash
# Run the test suites and print one summary line: "N passed, N failed, N skipped".
#   tests/run-all.sh            every suite (lint, unit, cli, parity, python)
#   tests/run-all.sh unit cli   only those
# Every suite speaks TAP; a "# SKIP" result counts as skipped, and is listed
# at the end with its reason.  lint runs
# first: it takes seconds and needs no build (tests/lint/run.sh).
set -u
cd "$(dirname "$0")/.."
# the tests see the environment a user's shell has: not make's (make check's
# -j and jobserver would reach the makes the tests run)
unset MAKEFLAGS MFLAGS MAKELEVEL MAKEOVERRIDES
BUILD=${BUILD:-build}
suites=("$@")
[ ${#suites[@]} -eq 0 ] && suites=(lint unit cli parity python)

# A suite that hangs must fail, not stall CI: each runs under a time limit
# (seconds; NB_SUITE_TIMEOUT overrides) far above its usual time.
suite_timeout=${NB_SUITE_TIMEOUT:-1800}
limit() { timeout -k 30 "$suite_timeout" "$@"; }

log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT
passed=0 failed=0 skipped=0
failures=()
skips=()

count() { # name file [seconds]
    local name=$1 file=$2 p f s
    p=$(grep -cE '^ok ' "$file" || true)
    s=$(grep -cE '^ok .*# [Ss][Kk][Ii][Pp]' "$file" || true)
    f=$(grep -cE '^not ok ' "$file" || true)
    p=$((p - s))
    passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
    # each failure with its first diagnostic lines, so that one seen once
    # (on a loaded machine, say) can be told apart afterwards
    while IFS= read -r line; do failures+=("$name: ${line#not ok }"); done < <(awk '
        /^not ok / { n = 0; block = 1; printf "%s%s", (out ? "\n" : ""), $0; out = 1; next }
        /^ok / { block = 0; next }
        block && /^#/ && n < 15 { printf "\034    %s", $0; n++ }
        END { if (out) print "" }' "$file")
    while IFS= read -r line; do skips+=("$name: ${line#ok }"); done < <(grep -E '^ok .*# [Ss][Kk][Ii][Pp]' "$file")
    # its seconds (given, or since the last line): which file takes the time
    local now=$SECONDS
    printf '%-34s %4d passed, %d failed, %d skipped  (%d s)\n' "$name" "$p" "$f" "$s" "${3:-$((now - last_line))}"
    last_line=$now
}
last_line=$SECONDS

crashed() { # name status file: a suite that died without reporting counts as one failure
    local name=$1 status=$2 file=$3
    if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
        echo "not ok - $name ran past its limit of $suite_timeout s and was stopped" >> "$file"
        tail -5 "$file" | sed 's/^/#   /'
    elif [ "$status" -ne 0 ] && ! grep -qE '^not ok ' "$file"; then
        echo "not ok - $name exited with status $status" >> "$file"
        tail -5 "$file" | sed 's/^/#   /'
    fi
}

for suite in "${suites[@]}"; do
    case $suite in
    lint)
        out=$log/lint.tap
        limit tests/lint/run.sh > "$out" 2>&1
        crashed lint $? "$out"
        count lint "$out" ;;
    unit)
        for t in "$BUILD"/tests/test_*; do
            [ -x "$t" ] || continue
            name=unit/$(basename "$t")
            out=$log/$(basename "$t").tap
            limit "$t" > "$out" 2> "$out.err"
            crashed "$name" $? "$out"
            count "$name" "$out"
        done ;;
    cli)
        # one file at a time, a line each as it ends: progress, and the file
        # a failure is in
        if ! command -v bats >/dev/null 2>&1; then
            out=$log/cli.tap
            echo "ok 1 - bats CLI tests # SKIP bats is not installed (apt-get install bats)" > "$out"
            count cli/bats "$out"
            continue
        fi
        # NB_TEST_JOBS files at a time (default: the cores): most of a test's
        # time is processes starting and ending, one core each
        jobs_max=${NB_TEST_JOBS:-$(nproc 2>/dev/null || echo 2)}
        # the longest first, as the last run timed them ($BUILD/tests/cli-seconds,
        # or in a fresh tree tests/cli/seconds, a run's copy kept in git, and
        # sanitized tests/cli/seconds-sanitized, whose order differs: a file
        # neither timed counts as long): the slots end together
        times=$BUILD/tests/cli-seconds
        order=$times
        [ -s "$order" ] || order=tests/cli/seconds${NB_SANITIZED:+-sanitized}
        mapfile -t files < <(for f in tests/cli/*.bats; do
            t=$(awk -v f="$f" '$2 == f { print $1 }' "$order" 2>/dev/null)
            echo "${t:-100000} $f"
        done | sort -k1,1nr -k2 | cut -d' ' -f2)
        : > "$log/cli-seconds"
        declare -A began=()
        running=0 next=0 reported=0
        report_done() { # a line for each file whose run has ended
            local i f name out
            for ((i = 0; i < next; i++)); do
                f=${files[$i]}
                out=$log/cli-$(basename "$f").tap
                [ -e "$out.status" ] && [ -z "${reported_file[$i]:-}" ] || continue
                reported_file[$i]=1
                name=cli/$(basename "$f" .bats)
                crashed "$name" "$(cat "$out.status")" "$out"
                count "$name" "$out" $((SECONDS - began[$i]))
                echo "$((SECONDS - began[$i])) $f" >> "$log/cli-seconds"
                running=$((running - 1)) reported=$((reported + 1))
            done
        }
        declare -a reported_file=()
        while [ "$reported" -lt ${#files[@]} ]; do
            if [ "$next" -lt ${#files[@]} ] && [ "$running" -lt "$jobs_max" ]; then
                f=${files[$next]}
                out=$log/cli-$(basename "$f").tap
                began[$next]=$SECONDS
                (limit bats --tap "$f" > "$out" 2>&1; echo $? > "$out.status.tmp" && mv "$out.status.tmp" "$out.status") &
                next=$((next + 1)) running=$((running + 1))
                continue
            fi
            wait -n 2>/dev/null || true
            report_done
        done
        wait
        mkdir -p "$(dirname "$times")" && cp "$log/cli-seconds" "$times" 2>/dev/null || true ;;
    parity)
        out=$log/parity.tap
        limit tests/parity/run.sh > "$out" 2>&1
        crashed parity $? "$out"
        count parity/golden "$out" ;;
    python)
        # the Python package (python/nb) as the build tree has it: pytest, a TAP line a test
        # (tests/python/conftest.py); Debian's python3, whose numpy and torch the package uses
        out=$log/python.tap
        py=${NB_PYTHON:-/usr/bin/python3}
        [ -x "$py" ] || py=python3
        if [ -n "${NB_SANITIZED:-}" ]; then
            echo "ok 1 - python package # SKIP it loads the regular build's libnb.so (make check runs it; test_api_v3 checks API 3 sanitized)" > "$out"
        elif ! "$py" -c "import numpy, pytest" 2>/dev/null; then
            echo "ok 1 - python package # SKIP $py lacks numpy or pytest (apt-get install python3-numpy python3-pytest)" > "$out"
        else
            : > "$out"
            NB_TAP=$out PYTHONPATH=$PWD/python PYTHONDONTWRITEBYTECODE=1 \
                limit "$py" -m pytest -q -p no:cacheprovider tests/python > "$log/python.log" 2>&1
            status=$?
            [ "$status" -eq 0 ] || sed 's/^/#   /' "$log/python.log" | tail -60 >> "$out"
            crashed python "$status" "$out"
        fi
        count python/pytest "$out" ;;
    *)
        echo "unknown suite '$suite' (lint, unit, cli, parity, python)" >&2
        exit 2 ;;
    esac
done

# every skipped test with its reason (a missing package, no GPU ...)
if [ ${#skips[@]} -gt 0 ]; then
    echo
    echo "Skipped:"
    printf '  %s\n' "${skips[@]}"
fi
if [ ${#failures[@]} -gt 0 ]; then
    echo
    echo "Failures:"
    printf '  %s\n' "${failures[@]}" | tr '\034' '\n'
fi
echo
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]

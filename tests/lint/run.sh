#!/usr/bin/env bash
# The lint suite of tests/run-all.sh, in TAP: tests/lint/bats-checks.py finds
# no bats check that cannot fail in tests/cli (test 1), and it reports exactly
# the marked lines of its bad fixture and nothing in its good one (test 2), so
# a lint that stopped seeing a pattern, or began to see one that is fine, fails;
# tests/lint/source-limits.py finds no product file over 1000 lines, function
# over 150 or include against the layers (libnbcore, engine with
# engine/physics, formats, cli, tools; formats reaching the physics through
# any header) (test 3), and its self-test (4).
set -u
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../.."
lint=tests/lint/bats-checks.py
fixtures=tests/lint/fixtures

echo "1..4"
if ! command -v python3 >/dev/null 2>&1; then
    echo "ok 1 - lint: every check in tests/cli can fail # SKIP python3 is not installed"
    echo "ok 2 - lint: self-test on tests/lint/fixtures # SKIP python3 is not installed"
    echo "ok 3 - lint: product sources within their limits # SKIP python3 is not installed"
    echo "ok 4 - lint: source-limits self-test # SKIP python3 is not installed"
    exit 0
fi

failed=0

# 1: the tree
out=$(python3 "$lint" 2>&1)
st=$?
if [ "$st" -eq 0 ]; then
    echo "ok 1 - lint: every check in tests/cli can fail"
else
    echo "not ok 1 - lint: every check in tests/cli can fail (bats-checks.py exited $st)"
    failed=1
    printf '%s\n' "$out" | sed 's/^/#   /'
fi

# 2: the fixtures.  A line of bad.bats-fixture ending in "# BAD !" or "# BAD &&" must
# be reported as a negated command or an && list; "# BAD ... (next line)" on a
# comment line stands for the line after it.
problems=()
want=$(awk '
    /# BAD (!|&&) \(next line\)$/ { n = NR + 1; k = $0; sub(/.*# BAD /, "", k); sub(/ \(next line\)$/, "", k); print n, k; next }
    /# BAD (!|&&)$/ { k = $0; sub(/.*# BAD /, "", k); print NR, k }' "$fixtures/bad.bats-fixture" | sort)
got=$(python3 "$lint" "$fixtures/bad.bats-fixture" 2>/dev/null)
st=$?
[ "$st" -eq 1 ] || problems+=("bad.bats-fixture: exit status $st, not 1")
got=$(printf '%s\n' "$got" | sed -n -E \
    -e 's/^[^:]*:([0-9]+): negated command .*/\1 !/p' \
    -e 's/^[^:]*:([0-9]+): && list .*/\1 \&\&/p' | sort)
[ -n "$want" ] || problems+=("bad.bats-fixture: no marked line")
while IFS= read -r line; do
    [ -n "$line" ] && problems+=("bad.bats-fixture: line ${line% *} (${line#* }) not reported")
done < <(comm -23 <(printf '%s\n' "$want") <(printf '%s\n' "$got"))
while IFS= read -r line; do
    [ -n "$line" ] && problems+=("bad.bats-fixture: line ${line% *} reported as ${line#* }, not marked so")
done < <(comm -13 <(printf '%s\n' "$want") <(printf '%s\n' "$got"))
out=$(python3 "$lint" "$fixtures/good.bats-fixture" 2>&1)
st=$?
[ "$st" -eq 0 ] || problems+=("good.bats-fixture: exit status $st, not 0: $out")
# a usage error is 2, not a finding
python3 "$lint" "$fixtures/no-such-file.bats" >/dev/null 2>&1
st=$?
[ "$st" -eq 2 ] || problems+=("a missing file: exit status $st, not 2")
python3 "$lint" --no-such-option >/dev/null 2>&1
st=$?
[ "$st" -eq 2 ] || problems+=("an unknown option: exit status $st, not 2")
if [ ${#problems[@]} -eq 0 ]; then
    echo "ok 2 - lint: self-test: the $(printf '%s\n' "$want" | wc -l) marked lines of fixtures/bad.bats-fixture reported, nothing in good.bats-fixture"
else
    echo "not ok 2 - lint: self-test on tests/lint/fixtures"
    printf '%s\n' "${problems[@]}" | sed 's/^/#   /'
    failed=1
fi
# 3: no product source file over 1000 lines, no function over 150, the
# layers' includes one way (tests/lint/source-limits.py)
limits=tests/lint/source-limits.py
if out=$(python3 "$limits" . 2>&1); then
    echo "ok 3 - lint: product sources within their limits (files <= 1000 lines, functions <= 150, layers)"
else
    echo "not ok 3 - lint: product sources within their limits (files <= 1000 lines, functions <= 150, layers)"
    printf '%s\n' "$out" | sed 's/^/#   /'
    failed=1
fi

# 4: its self-test, on a tree made here: a file of 1001 lines, a function of
# 151, an engine file including a format's header, another the tools'
# command line (cli/), a core header including the physics (engine/physics/)
# and a format reaching the physics through it; and one of each within
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
mkdir -p "$tree/libnbcore" "$tree/engine/physics" "$tree/formats" "$tree/cli" "$tree/tools"
{ echo "/* long */"; for i in $(seq 1000); do echo "int v$i;"; done; } > "$tree/tools/long.c"
{ echo "/* fits */"; for i in $(seq 999); do echo "int v$i;"; done; } > "$tree/tools/fits.c"
{ echo "static int big(void)"; echo "{"; for i in $(seq 148); do echo "    f($i);"; done; echo "}"
  echo "static int small(void)"; echo "{"; for i in $(seq 147); do echo "    f($i);"; done; echo "}"; } > "$tree/formats/fn.c"
echo '#include "fn.h"' > "$tree/engine/bad.c"
echo '/* a format header */' > "$tree/formats/fn.h"
printf '#include "ok.h"\n#include "phys.h"\n#include "cli.h"\n' > "$tree/tools/good.c"
echo '/* an engine header */' > "$tree/engine/ok.h"
echo '/* a physics header */' > "$tree/engine/physics/phys.h"
echo '#include "phys.h"' > "$tree/engine/ok.c"
echo '/* the tools'"'"' command line */' > "$tree/cli/cli.h"
echo '#include "cli.h"' > "$tree/engine/usage.c"
echo '#include "phys.h"' > "$tree/libnbcore/core.h"
echo '#include "core.h"' > "$tree/formats/reader.c"
out=$(python3 "$limits" "$tree" 2>&1)
st=$?
want="engine/bad.c:1: includes fn.h from formats/
engine/usage.c:1: includes cli.h from cli/
formats/fn.c:1: function big is 151 lines (at most 150)
formats/reader.c: reaches phys.h (engine/physics/) through core.h
libnbcore/core.h:1: includes phys.h from engine/physics/
tools/long.c: 1001 lines (at most 1000)"
if [ "$st" -eq 1 ] && [ "$(printf '%s\n' "$out" | sort)" = "$want" ]; then
    echo "ok 4 - lint: source-limits self-test: the six breaches of a made tree, nothing else"
else
    echo "not ok 4 - lint: source-limits self-test (exit $st)"
    printf '%s\n' "$out" | sed 's/^/#   got: /'
    failed=1
fi
exit "$failed"

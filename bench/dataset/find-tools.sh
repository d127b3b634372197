# shellcheck shell=bash disable=SC2154
# find-tools.sh - sourced by bench/dataset's scripts: where the nb tools and
# nb's data files are, in a checkout or installed (PREFIX/share/nb/dataset),
# and the checks of a number that their options share.
#
# The tools: $NB_BIN when set; else the bin/ of the checkout the script is in
# (bench/dataset/../../bin); else the folder of the nb-geom on PATH (an
# installed copy).  The data (e.g. amorphous/water.stol): $NB_DATADIR/NAME,
# else examples/NAME of the checkout, else share/nb/NAME of the install.
# The sourcing script sets $here (its own folder) first.

# find_tools TOOL...: sets NB_BIN; says which tool is missing (status 1)
find_tools() {
    local t name=${0##*/}
    if [ -z "${NB_BIN:-}" ]; then
        if [ -x "$here/../../bin/nb-geom" ]; then
            NB_BIN=$(cd "$here/../../bin" && pwd)
        elif command -v nb-geom >/dev/null 2>&1; then
            NB_BIN=$(dirname "$(command -v nb-geom)")
        else
            echo "$name: no nb tools: nb-geom is not on PATH (nor in the bin/ of a checkout: make); or set NB_BIN" >&2
            return 1
        fi
    fi
    for t in "$@"; do
        [ -x "$NB_BIN/$t" ] || { echo "$name: no $NB_BIN/$t: build nb first (make), or set NB_BIN" >&2; return 1; }
    done
    export NB_BIN
}

# find_data NAME: prints the path of nb's data file NAME (status 1 when there is none)
find_data() {
    local d
    for d in ${NB_DATADIR:+"$NB_DATADIR"} "$here/../../examples" "$here/.."; do
        [ -f "$d/$1" ] && { echo "$d/$1"; return 0; }
    done
    return 1
}

# is_number X, is_positive X, is_nonnegative X: a decimal number (1, 0.5, 3e26), and its sign
is_number() { [[ $1 =~ ^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$ ]]; }
is_positive() { is_number "$1" && awk -v x="$1" 'BEGIN { exit !(x > 0) }'; }
is_nonnegative() { is_number "$1" && awk -v x="$1" 'BEGIN { exit !(x >= 0) }'; }

#!/usr/bin/env bash
# compare-builds.sh - nb-sim's render time of two builds, interleaved: is a
# change within 5 % of the build before it on every nb-bench configuration?
#
#   bench/compare-builds.sh OLD_BIN NEW_BIN [REPS [CONFIG...]]
#
# OLD_BIN and NEW_BIN are bin/ folders of two builds (a worktree of the old
# commit, built).  Each configuration's plan (nb-bench --list, made once by
# NEW_BIN's nb-geom and nb-hkl) is rendered by the old and the new nb-sim in
# turn, REPS times (default 7), --threads 2; the time is nb-sim's own
# ("rendered ... in S s" under -v).  One line per configuration: the medians,
# ranges and new/old ratio of the medians.  Machines here are noisy: rerun a
# configuration that looks worse before concluding.
set -euo pipefail
old=${1:?usage: compare-builds.sh OLD_BIN NEW_BIN [REPS [CONFIG...]]}
new=${2:?usage: compare-builds.sh OLD_BIN NEW_BIN [REPS [CONFIG...]]}
reps=${3:-7}
shift $(($# < 3 ? $# : 3))
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mapfile -t lines < <("$new/nb-bench" --list)
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
printf '%-20s %22s %22s %7s\n' config "old median [range] ms" "new median [range] ms" new/old
for line in "${lines[@]}"; do
    name=${line%% *}
    if [ $# -gt 0 ] && ! printf '%s\n' "$@" | grep -qx "$name"; then continue; fi
    flags=${line#"$name"}
    sim_flags=""
    case $flags in *"| nb-sim "*) sim_flags=${flags#*| nb-sim }; flags=${flags%%| nb-sim*} ;; esac
    # shellcheck disable=SC2086
    "$new/nb-geom" -q $flags | "$new/nb-hkl" -q > "$work/plan.nbs"
    : > "$work/old" ; : > "$work/new"
    for ((r = 0; r < reps; r++)); do
        for which in old new; do
            bin=$old; [ "$which" = new ] && bin=$new
            # shellcheck disable=SC2086
            "$bin/nb-sim" -v --threads 2 --device cpu $sim_flags "$work/plan.nbs" 2> "$work/log" > /dev/null
            sed -n 's/.*rendered .* in \([0-9.e+-]*\) s .*/\1/p' "$work/log" | awk '{ s += $1 } END { print s * 1e3 }' >> "$work/$which"
        done
    done
    mo=$(median < "$work/old") mn=$(median < "$work/new")
    ro=$(sort -g "$work/old" | sed -n '1p;$p' | paste -sd- -) rn=$(sort -g "$work/new" | sed -n '1p;$p' | paste -sd- -)
    printf '%-20s %9.2f [%-10s] %9.2f [%-10s] %7.3f\n' "$name" "$mo" "$ro" "$mn" "$rn" "$(echo "$mn / $mo" | bc -l)"
done

#!/usr/bin/env bash
# speed.sh - the speed of refining a serial dataset (issue 35, deliverable 7),
# on this machine, with run-gates.sh's data and fits:
#
#   frame   per-frame fits of 1024^2 stills with 6 per-frame parameters
#           (rot_x, rot_y, rot_z, cell_a, cell_b, cell_c; G1's data
#           and start, --iterations 20, the global stage off): seconds per
#           still, the Levenberg-Marquardt iterations each still took (its
#           least-squares, Poisson and second-regions passes together), and the
#           seconds per 20 of them
#   F       --refine-F over N stills (G3's data and start, default N = 1000):
#           seconds in all and per still, and the CC G3 measures
#
# Usage: speed.sh [OPTIONS]
#   --work DIR        where the data and the fits go (default /tmp/nb-speed)
#   --parts LIST      frame, F or frame,F (default both)
#   --stills N        the F part's stills (default 1000)
#   --threads N       threads of every stage (default: all cores)
#   --device D        where nb-fit renders: cpu (default), cuda or auto
# Environment: as run-gates.sh (NB_BIN, PYTHON).  Writes DIR/speed.txt.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
usage() { local fd=2; [ "${1:-2}" != 0 ] || fd=1; sed -n '/^# Usage:/,/^# Environment/p' "$0" | sed 's/^# \{0,1\}//' >&"$fd"; exit "${1:-2}"; }

work=/tmp/nb-speed parts=frame,F stills=1000 thr=() device=cpu
while [ $# -gt 0 ]; do
    case $1 in
        --work) work=$2; shift 2 ;;
        --parts) parts=$2; shift 2 ;;
        --stills) stills=$2; shift 2 ;;
        --threads) thr=(--threads "$2"); shift 2 ;;
        --device) device=$2; shift 2 ;;
        -h|--help) usage 0 ;;
        *) echo "speed.sh: unknown argument '$1'" >&2; usage ;;
    esac
done
for p in ${parts//,/ }; do
    case $p in frame|F) ;; *) echo "speed.sh: no part '$p' (frame F)" >&2; exit 2 ;; esac
done
case $device in cpu|cuda|auto) ;; *) echo "speed.sh: --device must be cpu, cuda or auto" >&2; exit 2 ;; esac
want() { case ",$parts," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
mkdir -p "$work"
work=$(cd "$work" && pwd)
out=$work/speed.txt
: > "$out"
say() { echo "$*" | tee -a "$out"; }
say "# speed.sh on $(nproc) cores ($(uname -m)), nb-fit --device $device, $(date -u +%Y-%m-%dT%H:%MZ)"

if want frame; then
    # G1's data and start; nb-fit -v logs every pass's iterations
    G1_REFINE='' G1_REFINE_FRAME=rot_x,rot_y,rot_z,cell_a,cell_b,cell_c \
        FIT_FLAGS="--iterations 20 --global off -v --device $device" \
        "$here/run-gates.sh" --work "$work/frame" --gates G1 "${thr[@]}" > "$work/frame.log" 2>&1 || true
    log=$work/frame/g1/fit.log
    [ -s "$log" ] || { cat "$work/frame.log" >&2; echo "speed.sh: the frame part's fit did not run" >&2; exit 1; }
    seconds=$(sed -n 's/.* fit \([0-9.]*\) s, .*/\1/p' "$work/frame/results.txt" | head -n 1)
    # lines "frame N: ... after K iterations: ..." (one per pass)
    awk -v secs="$seconds" '
        / after [0-9]+ iterations:/ {
            for (i = 1; i <= NF; i++) if ($i == "after") { n[$2] += $(i + 1); passes++ }
        }
        END {
            for (f in n) { frames++; total += n[f]; if (n[f] > most) most = n[f] }
            if (!frames) { print "no iteration lines in the log"; exit 1 }
            printf "frame: %d stills of 1024^2, 6 per-frame parameters: %.1f s, %.2f s per still; " \
                   "%.1f iterations per still (most %d), %.3f s per iteration, %.2f s per 20 iterations\n",
                   frames, secs, secs / frames, total / frames, most, secs / total, 20 * secs / total
        }' "$log" | tee -a "$out"
    grep '^G1' "$work/frame/results.txt" | sed 's/^/  accuracy: /' | tee -a "$out"
fi

if want F; then
    FIT_FLAGS="--device $device" \
        "$here/run-gates.sh" --work "$work/F" --gates G3 --g3-stills "$stills" "${thr[@]}" > "$work/F.log" 2>&1 || true
    grep -q '^G3' "$work/F/results.txt" 2>/dev/null \
        || { cat "$work/F.log" >&2; echo "speed.sh: the F part did not run" >&2; exit 1; }
    grep -e '^#   data' -e '^G3' "$work/F/results.txt" | sed 's/^/F: /' | tee -a "$out"
fi
echo "speed.sh: $out" >&2

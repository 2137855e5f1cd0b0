#!/usr/bin/env bash
# Soak benchmark: `kinreg run` on the synthetic room for a long session while
# sampling its resident memory, to show that memory stays flat after warm-up
# under the model's cap (--model-memory). The synthetic camera sweeps back and
# forth along an arc around the room for as long as --duration asks, so the
# run keeps revisiting the same scene (docs/SECURITY.md, issue 14).
#
#   bench/soak.sh [FRAMES] [MODEL_MIB] [KINREG_ARGS...]
#
# FRAMES (default 100000) at the synthetic 30 Hz; MODEL_MIB (default 64) is
# passed as --model-memory. Prints "frame rss_mib" samples every SAMPLE_S
# seconds (default 5) to OUT (default out/soak.tsv). RSS swings by about 10 %
# within a few hundred frames (the active window's k-d tree is rebuilt beside
# the old one; the map refills to its cap between evictions), so the summary
# compares peaks, not single samples: the largest RSS over the WINDOW frames
# (default FRAMES/20) after frame 10000 (or FRAMES/10) against the largest
# over the last WINDOW frames, and their ratio.
# Environment: KINREG (default build/kinreg), SAMPLE_S, OUT.
set -euo pipefail
frames=${1:-100000}
mib=${2:-64}
shift $(($# < 2 ? $# : 2))
kinreg=${KINREG:-build/kinreg}
sample_s=${SAMPLE_S:-5}
out=${OUT:-out/soak.tsv}
mkdir -p "$(dirname "$out")"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
warm=$((frames >= 100000 ? 10000 : frames / 10))
window=${WINDOW:-$((frames / 20))}
duration=$(awk -v n="$frames" 'BEGIN { printf "%.3f", (n + 0.5) / 30 }')

# The trajectory file is the frame counter: one line per tracked frame.
OMP_WAIT_POLICY=passive "$kinreg" run synthetic --duration "$duration" --model-memory "$mib" \
    -t "$work/traj.txt" "$@" > "$work/run.log" 2>&1 &
pid=$!
echo "# soak: $kinreg run synthetic --duration $duration --model-memory $mib $*" > "$out"
echo "# frame rss_mib" >> "$out"
while kill -0 "$pid" 2> /dev/null; do
    rss_kib=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" 2> /dev/null || true)
    n=$(grep -vc '^#' "$work/traj.txt" 2> /dev/null || true)
    if [ -n "$rss_kib" ] && [ -n "$n" ]; then
        awk -v n="$n" -v k="$rss_kib" 'BEGIN { printf "%d %.1f\n", n, k / 1024 }' >> "$out"
    fi
    sleep "$sample_s"
done
wait "$pid" || { echo "soak: kinreg failed:"; tail -5 "$work/run.log"; exit 1; }
tail -3 "$work/run.log"
last=$(grep -vc '^#' "$work/traj.txt")
awk -v warm="$warm" -v win="$window" -v last="$last" -v mib="$mib" '
    /^#/ { next }
    { all_max = $2 > all_max ? $2 : all_max }
    $1 >= warm && $1 < warm + win { if ($2 > a) a = $2; na++ }
    $1 > last - win { if ($2 > b) b = $2; nb++ }
    END {
        printf "soak: %d frames; RSS peak over frames %d-%d: %.1f MiB (%d samples)\n", last, warm, warm + win, a, na
        printf "soak: RSS peak over the last %d frames: %.1f MiB (%d samples); largest of the run %.1f MiB\n", win, b, nb, all_max
        if (a > 0 && b > 0) printf "soak: growth from warm-up to end %+.1f %% (cap %s MiB)\n", 100 * (b - a) / a, mib
    }' "$out"
echo "soak: samples in $out"

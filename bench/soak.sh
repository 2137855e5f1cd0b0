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
# passed as --model-memory. Prints "frame rss_mib model_points" samples every
# SAMPLE_S seconds (default 5) to OUT (default out/soak.tsv), then the RSS
# after frame 10000 (or FRAMES/10) and after the last frame, and their ratio.
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
duration=$(awk -v n="$frames" 'BEGIN { printf "%.3f", (n + 0.5) / 30 }')

# The trajectory file is the frame counter: one line per tracked frame.
OMP_WAIT_POLICY=passive "$kinreg" run synthetic --duration "$duration" --model-memory "$mib" \
    -t "$work/traj.txt" "$@" > "$work/run.log" 2>&1 &
pid=$!
echo "# soak: $kinreg run synthetic --duration $duration --model-memory $mib $*" > "$out"
echo "# frame rss_mib" >> "$out"
warm_rss="" last_rss=""
while kill -0 "$pid" 2> /dev/null; do
    rss_kib=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" 2> /dev/null || true)
    n=$(grep -vc '^#' "$work/traj.txt" 2> /dev/null || true)
    if [ -n "$rss_kib" ] && [ -n "$n" ]; then
        rss=$(awk -v k="$rss_kib" 'BEGIN { printf "%.1f", k / 1024 }')
        echo "$n $rss" >> "$out"
        [ -z "$warm_rss" ] && [ "$n" -ge "$warm" ] && warm_rss=$rss && echo "soak: RSS after frame $n: $rss MiB"
        last_rss=$rss last_n=$n
    fi
    sleep "$sample_s"
done
wait "$pid" || { echo "soak: kinreg failed:"; tail -5 "$work/run.log"; exit 1; }
tail -3 "$work/run.log"
echo "soak: RSS after frame ${last_n:-?} (last sample): ${last_rss:-?} MiB"
if [ -n "$warm_rss" ] && [ -n "$last_rss" ]; then
    awk -v a="$warm_rss" -v b="$last_rss" 'BEGIN { printf "soak: growth from warm-up to end %+.1f %% (cap %s MiB)\n", 100 * (b - a) / a, "'"$mib"'" }'
fi
echo "soak: samples in $out"

#!/usr/bin/env bash
# Tracker frames/s with and without one live-view page attached, side by
# side (issue 12's acceptance: unchanged within noise). Each repetition runs
# the same synthetic replay at full speed twice, alternating:
#
#   without: kinreg run synthetic -n FRAMES -p ipc://...   (nobody listening)
#   with:    kinreg run synthetic -n FRAMES --view 127.0.0.1:0, and one page
#            attached: an SSE client reading /events for the whole run (every
#            pose, status and 100k-point model snapshot, once a second, in
#            base64), so the model topic is built and sent and the page's
#            buffer is drained.
#
#   bench/view_overhead.sh [REPS] [FRAMES]    (default 5 repetitions, 300 frames)
#
# The order alternates (odd repetitions run `without` first, even ones
# `with`), so a load that drifts over time favours neither. Beside frames/s
# it prints the CPU seconds the kinreg process used (user + system, from
# /usr/bin/time): on a shared machine whose load swings, the cost of the view
# shows more steadily there than in the frame rate.
#
# Environment: KINREG (default build/kinreg), BACKEND (default auto), OUT
# (default build/view_overhead), VIEWER=chromium to attach headless Chromium
# (WebGL in software, which on a small machine mostly measures the browser's
# own CPU use) instead of the SSE client.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
reps=${1:-5}
frames=${2:-300}
kinreg=${KINREG:-$here/build/kinreg}
backend=${BACKEND:-auto}
out=${OUT:-$here/build/view_overhead}
viewer=${VIEWER:-sse}
[ -x "$kinreg" ] || { echo "view_overhead: $kinreg not found: build first (scripts/setup.sh test)" >&2; exit 1; }
"$kinreg" view --help >/dev/null 2>&1 || { echo "view_overhead: $kinreg has no live view (libmicrohttpd-dev)" >&2; exit 1; }
mkdir -p "$out"

echo "# $(date -u +%Y-%m-%d) on $(uname -n): $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), backend $backend, $frames synthetic frames, viewer $viewer"

fps_of() { sed -n 's/.*(\([0-9.]*\) frames\/s).*/\1/p' "$1" | tail -1; }

cpu_of() { sed -n 's/^cpu \([0-9.]*\) \([0-9.]*\)$/\1 \2/p' "$1" | awk '{printf "%.1f", $1 + $2}'; }

run_without() { # LOG
    /usr/bin/time -f 'cpu %U %S' "$kinreg" run synthetic -q --progress 0 -b "$backend" -n "$frames" -p "ipc://$out/plain.sock" 2>"$1"
}

run_with() { # LOG
    /usr/bin/time -f 'cpu %U %S' "$kinreg" run synthetic -q --progress 0 -b "$backend" -n "$frames" --view 127.0.0.1:0 2>"$1" &
    local run=$! url="" viewer_pid=""
    for _ in $(seq 100); do
        url=$(grep -o 'http://127.0.0.1:[0-9]*/' "$1" 2>/dev/null || true)
        [ -n "$url" ] && break
        sleep 0.05
    done
    if [ -n "$url" ]; then
        if [ "$viewer" = chromium ]; then
            chromium --headless --no-sandbox --disable-dev-shm-usage --enable-unsafe-swiftshader \
                --remote-debugging-port=0 "$url" >/dev/null 2>&1 &
        else
            curl -sN "${url}events" >"$out/events.txt" 2>/dev/null &
        fi
        viewer_pid=$!
    fi
    wait "$run" || true
    [ -n "$viewer_pid" ] && { kill "$viewer_pid" 2>/dev/null || true; wait "$viewer_pid" 2>/dev/null || true; }
    [ "$viewer" = chromium ] || echo "  page received $(grep -c '^event: pose' "$out/events.txt" || true) poses, $(grep -c '^event: model' "$out/events.txt" || true) model chunks" >&2
}

printf '%-4s %14s %14s %14s %14s\n' rep "without fps" "with fps" "without cpu s" "with cpu s"
a=() b=() c=() d=()
for r in $(seq "$reps"); do
    if [ $((r % 2)) -eq 1 ]; then
        run_without "$out/without_$r.log"
        run_with "$out/with_$r.log"
    else
        run_with "$out/with_$r.log"
        run_without "$out/without_$r.log"
    fi
    x=$(fps_of "$out/without_$r.log") y=$(fps_of "$out/with_$r.log")
    u=$(cpu_of "$out/without_$r.log") v=$(cpu_of "$out/with_$r.log")
    a+=("$x") b+=("$y") c+=("$u") d+=("$v")
    printf '%-4s %14s %14s %14s %14s\n' "$r" "$x" "$y" "$u" "$v"
done
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }
printf '%-4s %14s %14s %14s %14s   (medians of %s)\n' med "$(median "${a[@]}")" "$(median "${b[@]}")" \
    "$(median "${c[@]}")" "$(median "${d[@]}")" "$reps"

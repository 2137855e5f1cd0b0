#!/usr/bin/env bash
# Capture → publish latency of the live path, measured on libfreenect's
# fakenect replay at the recorded rate (the acceptance figure of the live
# capture issue). The kinreg program runs with libfreenect swapped for
# fakenect, which delivers each frame of a dump through the real API at the
# pace it was recorded; kinreg reports the median and 99th percentile of the
# time from the frame's arrival in libfreenect's callback to its pose leaving
# on the ZeroMQ socket.
#
#   bench/live_latency.sh [BACKEND]        BACKEND: cpu (default), cuda, auto
#
# Environment: KINREG (default build/kinreg), DATA (default ../shared/data),
# OUT (default build/live_latency), FAKENECT_DIR (default
# /usr/lib/<arch>/fakenect). Runs on two dumps: TUM fr1/xyz (400 frames,
# converted to a fakenect dump with `kinreg convert`, 30 Hz) and the 2011
# Kinect recording fakenect/planes (36 frames, about 4 Hz).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
backend=${1:-cpu}
kinreg=${KINREG:-$here/build/kinreg}
data=${DATA:-$here/../shared/data}
out=${OUT:-$here/build/live_latency}
fakenect=${FAKENECT_DIR:-/usr/lib/$(gcc -dumpmachine 2>/dev/null || echo x86_64-linux-gnu)/fakenect}

[ -x "$kinreg" ] || { echo "live_latency: $kinreg not found: build first (scripts/setup.sh test)" >&2; exit 1; }
[ -e "$fakenect/libfreenect.so.0.5" ] || { echo "live_latency: no fakenect library in $fakenect: install libfreenect-bin" >&2; exit 1; }
mkdir -p "$out"

echo "# $(date -u +%Y-%m-%d) on $(uname -n): $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), backend $backend"

run_live() { # NAME DUMP [kinreg options...]
    local name=$1 dump=$2
    shift 2
    LD_LIBRARY_PATH="$fakenect" FAKENECT_PATH="$dump" FAKENECT_LOOP=0 \
        "$kinreg" run -q -b "$backend" kinect -t "$out/$name.txt" "$@" 2>"$out/$name.log" >/dev/null
    echo "## $name"
    grep -E '^kinreg: ' "$out/$name.log"
}

fr1=$data/tum/fr1_xyz_head
if [ -d "$fr1" ]; then
    [ -f "$out/fr1_dump/INDEX.txt" ] || "$kinreg" convert -q --force "tum:$fr1" "$out/fr1_dump" >/dev/null 2>"$out/convert.log"
    run_live fr1_xyz "$out/fr1_dump" --intrinsics fr1
else
    echo "live_latency: $fr1 absent, skipping fr1" >&2
fi
if [ -d "$data/fakenect/planes" ]; then
    run_live planes "$data/fakenect/planes"
else
    echo "live_latency: $data/fakenect/planes absent, skipping planes" >&2
fi

#!/bin/sh
# The live refiner (issue 9) on TUM fr1_xyz_head: runs with --refine off and
# on, interleaved, REPEATS times each (same source, backend and options), then
# once more with --refine on --deterministic (every window applied in step, so
# the ATE repeats). Prints each run's summary (frames/s, keyframes, windows)
# and the ATE of the tracked and the refined trajectory.
# Usage: bench/live_refine.sh [BUILD_DIR] [BACKEND] [REPEATS]
set -eu
build=${1:-build}
backend=${2:-cpu}
repeats=${3:-2}
data=${KINREG_DATA:-../shared/data}
seq="$data/tum/fr1_xyz_head"
[ -d "$seq" ] || { echo "bench/live_refine.sh: $seq is absent" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
k="$build/kinreg"
gt="$seq/groundtruth.txt"

ate() { printf '%-8s ' "$1"; "$k" eval "$gt" "$2" | grep 'ATE rmse'; }
run() { "$k" run -q -b "$backend" "tum:$seq" --intrinsics fr1 "$@" 2>&1 | grep 'frames in\|live refiner'; }

i=1
while [ "$i" -le "$repeats" ]; do
    echo "== --refine off, run $i"
    run -t "$out/off.txt"
    ate tracked "$out/off.txt"
    echo "== --refine on, run $i"
    run --refine on -t "$out/on.txt" --trajectory-refined "$out/on-refined.txt"
    ate tracked "$out/on.txt"
    ate refined "$out/on-refined.txt"
    i=$((i + 1))
done
echo "== --refine on --deterministic"
run --refine on --deterministic -t "$out/det.txt" --trajectory-refined "$out/det-refined.txt"
ate tracked "$out/det.txt"
ate refined "$out/det-refined.txt"

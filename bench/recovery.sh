#!/bin/sh
# Recovery after tracking loss (issue 13), CPU engine: the synthetic scan with
# 20 jumps of up to 30 deg / 30 cm and 5 covered stretches beside the same scan
# without them, and TUM fr1_xyz_head at every 8th frame with and without
# recovery. Prints kinreg's run summary (losses, recoveries, time per attempt)
# and the ATE of each run, and of its final trajectory (lost stretches filled
# in); then the search alone against the truth on every
# jump and uncovering, and the pipeline's figures over the same scan (events
# right again within 3 frames, ms per attempt and per event, ATE over all
# frames and over the frames not LOST, beside the run without jumps).
# Usage: bench/recovery.sh [BUILD_DIR] [BACKEND]
set -eu
build=${1:-build}
backend=${2:-cpu}
data=${KINREG_DATA:-../shared/data}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
k="$build/kinreg"

ate() { "$k" eval "$1" "$2" | grep 'ATE rmse'; }

echo "== synthetic, no jumps"
"$k" demo -q -b "$backend" --out "$out/plain" | grep -E '^(ATE|final)'
for method in emicp newton; do
    echo "== synthetic, 20 jumps up to 30 deg / 0.3 m, 5 covered stretches of 10 frames, --recover $method"
    "$k" demo -q -b "$backend" --jumps 20 --covered 5 --recover "$method" --out "$out/jumps-$method" |
        grep -E '^(ATE|final)'
done
if [ -d "$data/tum/fr1_xyz_head" ]; then
    # The model snapshots are built in the background: runs differ, so the
    # recovery run is repeated (FR1_RUNS, default 3).
    for method in emicp newton off; do
        runs=1
        [ "$method" = emicp ] && runs=${FR1_RUNS:-3}
        i=0
        while [ "$i" -lt "$runs" ]; do
            i=$((i + 1))
            echo "== tum fr1_xyz_head, every 8th frame, --recover $method (run $i of $runs)"
            "$k" run -q -b "$backend" "tum:$data/tum/fr1_xyz_head" --every 8 --recover "$method" \
                -t "$out/t8-$method.txt" --trajectory-final "$out/f8-$method.txt"
            ate "$data/tum/fr1_xyz_head/groundtruth.txt" "$out/t8-$method.txt"
            printf 'final trajectory: '
            ate "$data/tum/fr1_xyz_head/groundtruth.txt" "$out/f8-$method.txt"
        done
    done
fi
if [ -x "$build/tests/kinreg_tests" ]; then
    echo "== the search alone and the pipeline's figures (tests/test_recovery_search.c)"
    KR_RECOVERY_SEARCH_FULL=1 KR_RECOVERY_BACKEND="$backend" "$build/tests/kinreg_tests" recovery_search |
        grep -E 'events|without jumps|FAIL'
fi

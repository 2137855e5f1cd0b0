#!/bin/sh
# The whole run refined afterwards (issue 13): the demo scan with 20 jumps of
# up to 30 deg / 30 cm and 5 covered stretches beside the same scan without
# them. Each is tracked by kinreg demo (its final trajectory: LOST stretches
# filled in), recorded by kinreg record, and refined by kinreg refine
# --sequence --signed --every-frame with keyframes every MIN_MOVE; prints the
# ATE of each trajectory and the ratios to the run without jumps.
# Usage: bench/refine_after_run.sh [BUILD_DIR] [BACKEND] [MIN_MOVE]
# (BACKEND cuda for the refinement on a GPU: 301 keyframes in 47 s on an H100;
# on the 2-core CPU 141 keyframes took 9.6 min.)
set -eu
build=${1:-build}
backend=${2:-cpu}
min_move=${3:-0.02,2}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
k="$build/kinreg"

ate() { "$k" eval "$1" "$2" | sed -n 's/^ATE rmse *//p'; }

for scan in plain jumps; do
    loss=""
    [ "$scan" = jumps ] && loss="--jumps 20 --covered 5"
    echo "== synthetic, $scan: kinreg demo -b $backend --deterministic $loss"
    # shellcheck disable=SC2086 # the loss options
    "$k" demo -q -b "$backend" --deterministic $loss --out "$out/$scan" | grep -E '^(ATE|final)'
    # shellcheck disable=SC2086
    "$k" record -q -f tum $loss "$out/$scan-rec" synthetic
    traj="$out/$scan/trajectory_final.txt"
    [ -f "$traj" ] || traj="$out/$scan/trajectory.txt"
    echo "== refined: kinreg refine --sequence --signed --min-move $min_move --backend $backend"
    "$k" refine -q --sequence "tum:$out/$scan-rec" --trajectory "$traj" --signed \
        --min-move "$min_move" --backend "$backend" --every-frame "$out/$scan-every.txt" \
        -o "$out/$scan-kf.txt"
    echo "$scan: $(wc -l < "$out/$scan-kf.txt") keyframes"
    ate "$out/$scan/groundtruth.txt" "$traj" > "$out/$scan-final.ate"
    ate "$out/$scan/groundtruth.txt" "$out/$scan-every.txt" > "$out/$scan-refined.ate"
done
read -r plain_final _ < "$out/plain-final.ate"
read -r plain_refined _ < "$out/plain-refined.ate"
read -r jumps_final _ < "$out/jumps-final.ate"
read -r jumps_refined _ < "$out/jumps-refined.ate"
echo "ATE, every frame (cm): without jumps $plain_final, refined $plain_refined;" \
    "with jumps (final trajectory) $jumps_final, refined $jumps_refined"
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
echo "with jumps refined / without jumps as tracked: $(ratio "$jumps_refined" "$plain_final")x;" \
    "/ without jumps refined: $(ratio "$jumps_refined" "$plain_refined")x"

#!/usr/bin/env bash
# The tracker's polish (whole Gauss-Newton steps after the finest level,
# pipeline/track/track_step.h) on and off, on the same frames in one run:
# synthetic scans recorded once to TUM folders (so both settings read the
# same frames), and a real TUM sequence whole and with every 8th frame (fast
# motion). ATE by `kinreg eval` (Horn alignment, 20 ms association) and the
# frame rate the run reports.
#
#   bench/polish.sh [SEQUENCE_DIR] [KINREG]      (environment: SEEDS, DURATION,
#                                                 BACKEND, RUNS, POLISH)
#
# Writes under out/polish/ and prints one table last.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
seq=${1:-$here/../shared/data/tum/fr1_xyz_head}
kinreg=${2:-$here/build/kinreg}
seeds=${SEEDS:-1 2 3}
duration=${DURATION:-20}
backend=${BACKEND:-cpu}
runs=${RUNS:-1}
settings=${POLISH:-0 6}
out=$here/out/polish
mkdir -p "$out"
[ -x "$kinreg" ] || { echo "no kinreg program at $kinreg (build first)" >&2; exit 1; }

ate() { # GT EST -> ATE RMSE in cm
    "$kinreg" eval --json "$1" "$2" | python3 -c 'import json,sys; print("%.3f" % (100*json.load(sys.stdin)["ate"]["rmse"]))'
}

rows=()
measure() { # NAME SOURCE GT [run options...]
    local name=$1 src=$2 gt=$3
    shift 3
    for p in $settings; do
        for r in $(seq "$runs"); do
            local traj=$out/${name}_polish${p}_run$r.txt log=$out/${name}_polish${p}_run$r.log
            "$kinreg" run -b "$backend" "$src" --polish "$p" -t "$traj" "$@" > "$log" 2>&1
            local fps
            fps=$(grep -o '([0-9.]* frames/s)' "$log" | tail -1 | tr -d '(' | cut -d' ' -f1)
            rows+=("$(printf '%-22s polish %-2s run %s  ATE %7s cm  %6s frames/s' "$name" "$p" "$r" "$(ate "$gt" "$traj")" "$fps")")
            echo "${rows[-1]}"
        done
    done
}

for s in $seeds; do
    dir=$out/synthetic_$s
    [ -f "$dir/groundtruth.txt" ] ||
        "$kinreg" record -q -f tum --force --duration "$duration" "$dir" "synthetic:$s" > /dev/null
    measure "synthetic:$s" "tum:$dir" "$dir/groundtruth.txt" --deterministic
done
if [ -d "$seq" ]; then
    measure "$(basename "$seq")" "tum:$seq" "$seq/groundtruth.txt" --intrinsics fr1 --deterministic
    measure "$(basename "$seq") every 8" "tum:$seq" "$seq/groundtruth.txt" --intrinsics fr1 --every 8 --deterministic
else
    echo "no TUM sequence at $seq: real-data rows skipped" >&2
fi
echo "== $(date -u +%F) $(uname -n), backend $backend"
printf '%s\n' "${rows[@]}"

#!/usr/bin/env bash
# Side by side on the same TUM frames and machine, in one run: kinreg (CPU
# backend) and Open3D's frame-to-frame point-to-plane ICP, each evaluated
# with the same `kinreg eval` (ATE after Horn alignment, 20 ms association).
#
#   bench/compare_tum.sh [SEQUENCE_DIR] [KINREG]
#
# Needs the bench venv (bench/setup_venv.sh) for Open3D. Writes trajectories
# and JSON under out/compare/ and prints a summary table last.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
seq=${1:-$here/../shared/data/tum/fr1_xyz_head}
kinreg=${2:-$here/build/kinreg}
py=$here/.venv-bench/bin/python
out=$here/out/compare
mkdir -p "$out"
threads=$(nproc)
export OMP_NUM_THREADS=$threads

[ -d "$seq" ] || { echo "no TUM sequence at $seq" >&2; exit 1; }
[ -x "$kinreg" ] || { echo "no kinreg program at $kinreg (build first)" >&2; exit 1; }
[ -x "$py" ] || { echo "no Open3D venv: run bench/setup_venv.sh" >&2; exit 1; }
gt=$seq/groundtruth.txt

ate() { "$kinreg" eval --json "$gt" "$1" | "$py" -c 'import json,sys; print("%.3f" % (100*json.load(sys.stdin)["ate"]["rmse"]))'; }

echo "== kinreg run (end to end, PNG decoding included)"
"$kinreg" run -q -b cpu "tum:$seq" --intrinsics fr1 -t "$out/kinreg.txt" 2>&1 | tee "$out/kinreg_run.log"
kin_fps=$(grep -o '([0-9.]* frames/s)' "$out/kinreg_run.log" | tr -d '(' | cut -d' ' -f1)
echo "== kinreg bench (per-stage medians, no file reading)"
"$kinreg" bench -b cpu "tum:$seq" --intrinsics fr1 --frames 400 -o "$out/kinreg_bench.json" | tee "$out/kinreg_bench.txt"
kin_ms=$("$py" -c 'import json,sys; print("%.1f" % json.load(open(sys.argv[1]))["median_ms"]["frame"])' "$out/kinreg_bench.json")
kin_ate=$(ate "$out/kinreg.txt")

rows=()
for voxel in 0.02 0.015; do
    echo "== Open3D point-to-plane ICP, voxel $voxel"
    "$py" "$here/bench/open3d_compare.py" "$seq" --voxel "$voxel" --out "$out/open3d_$voxel.txt" \
        --kinreg "$kinreg" --json >"$out/open3d_$voxel.json"
    ms=$("$py" -c 'import json,sys; d=json.load(open(sys.argv[1])); print("%.1f" % d["ms_frame"]["median"])' "$out/open3d_$voxel.json")
    rows+=("Open3D ICP p2plane (voxel $voxel m)|$(ate "$out/open3d_$voxel.txt")|$ms|")
done

echo
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(date -u +%Y-%m-%d)"
printf '%-40s %10s %16s %12s\n' "method (same $(grep -vc '^#' "$seq/depth.txt") frames)" "ATE cm" "ms/frame median" "frames/s"
printf '%-40s %10s %16s %12s\n' "kinreg (k-d tree Newton, frame-to-model)" "$kin_ate" "$kin_ms" "$kin_fps"
for r in "${rows[@]}"; do
    IFS='|' read -r name a ms _ <<<"$r"
    printf '%-40s %10s %16s %12s\n' "$name" "$a" "$ms" "-"
done

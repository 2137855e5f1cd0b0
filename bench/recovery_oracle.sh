#!/bin/sh
# What the recovery limits (issue 13): the demo scan with 20 jumps of up to
# 30 deg / 30 cm and 5 covered stretches, tracked by kinreg demo five ways —
# without the jumps; with them as kinreg recovers; and with recovery given
# the ground truth (bench/recovery_oracle.patch, applied to a temporary
# clone of this checkout's HEAD and kept out of the library):
#   replace    where kinreg recovers, Newton tracking from the true pose
#              instead of from what the search found;
#   exact      where kinreg recovers, the true pose itself;
#   immediate  at every attempt, Newton tracking from the true pose,
#              accepted unless LOST (no waiting for a better view).
# Prints each run's losses and ATE (published and final trajectory) and
# every oracle recovery's distance from kinreg's own.
# Usage: bench/recovery_oracle.sh [SEED] (default 1: the demo's scan).
# Builds a CPU-only kinreg (~3 min on 2 cores); each run ~30 s there.
set -eu
seed=${1:-1}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git clone -q "$root" "$work/src"
if ! git -C "$work/src" apply "$root/bench/recovery_oracle.patch"; then
    echo "recovery_oracle: bench/recovery_oracle.patch no longer applies to HEAD; update it" >&2
    exit 1
fi
echo "== building a CPU-only kinreg with the oracle (HEAD $(git -C "$root" rev-parse --short HEAD))"
cmake -S "$work/src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DKINREG_CUDA=OFF > "$work/cmake.log"
cmake --build "$work/build" -j"$(nproc)" --target kinreg_tool > "$work/build.log"
k="$work/build/kinreg"
loss="--jumps 20 --covered 5"
run() {
    name=$1
    shift
    # shellcheck disable=SC2086 # the loss options
    "$k" demo -b cpu --deterministic --seed "$seed" "$@" --out "$work/$name" > "$work/$name.log" 2>&1
    grep -E '^(ATE|final)|tracking lost' "$work/$name.log" | sed "s/^/$name: /"
}
echo "== kinreg demo -b cpu --deterministic --seed $seed [$loss]"
run plain
# shellcheck disable=SC2086
run jumps $loss
gt="$work/jumps/groundtruth.txt"
for mode in replace exact immediate; do
    # shellcheck disable=SC2086
    KR_ORACLE_GT="$gt" KR_ORACLE=$mode run "$mode" $loss
done
echo "== where kinreg recovered: its pose against Newton tracking from the truth"
grep '^oracle: frame.*: recovered' "$work/replace.log" | sed 's/^oracle: //'

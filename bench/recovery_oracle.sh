#!/bin/sh
# What the recovery limits (issue 13): the demo scan with 20 jumps of up to
# 30 deg / 30 cm and 5 covered stretches, tracked as kinreg demo -b cpu
# --deterministic does, five ways — without the jumps; with them as kinreg
# recovers; and with recovery given the ground truth, through the library's
# recovery hook (kr_pipeline_config.recover_fn) in bench/recovery_oracle.c:
#   replace    where kinreg recovers, Newton tracking from the true pose
#              instead of from what the search found;
#   exact      where kinreg recovers, the true pose itself;
#   immediate  at every attempt, Newton tracking from the true pose,
#              accepted unless LOST (no waiting for a better view).
# Prints each run's losses and ATE (published and final trajectory) and
# every oracle recovery's distance from kinreg's own.
# Usage: bench/recovery_oracle.sh [SEED] (default 1: the demo's scan).
# Builds a CPU-only libkinreg from this checkout (~3 min on 2 cores), or uses
# the one in KINREG_BUILD (a build folder of this checkout); each run ~30 s
# there.
set -eu
seed=${1:-1}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
build=${KINREG_BUILD:-}
if [ -z "$build" ]; then
    build="$work/build"
    echo "== building a CPU-only libkinreg (checkout at $(git -C "$root" rev-parse --short HEAD))"
    cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DKINREG_CUDA=OFF -DKINREG_TESTS=OFF \
        > "$work/cmake.log"
    cmake --build "$build" -j"$(nproc)" --target kinreg > "$work/build.log"
fi
build=$(cd "$build" && pwd)
if [ ! -e "$build/libkinreg.so" ]; then
    echo "recovery_oracle: no libkinreg.so in $build" >&2
    exit 1
fi
k="$work/recovery_oracle"
${CC:-cc} -std=c11 -O2 -Wall -Wextra -D_GNU_SOURCE -I"$root/include" \
    "$root/bench/recovery_oracle.c" -o "$k" -L"$build" -lkinreg -Wl,-rpath,"$build" -lm
loss="--jumps 20 --covered 5"
run() {
    name=$1
    shift
    "$k" --seed "$seed" "$@" > "$work/$name.log" 2>&1
    grep -E '^(ATE|final)|loss events' "$work/$name.log" | sed "s/^/$name: /"
}
echo "== kinreg demo -b cpu --deterministic --seed $seed [$loss]"
run plain none
# shellcheck disable=SC2086 # the loss options
run jumps $loss none
for mode in replace exact immediate; do
    # shellcheck disable=SC2086
    run "$mode" $loss "$mode"
done
echo "== where kinreg recovered: its pose against Newton tracking from the truth"
grep '^oracle: frame.*: recovered' "$work/replace.log" | sed 's/^oracle: //'

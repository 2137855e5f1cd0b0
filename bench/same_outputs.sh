#!/usr/bin/env bash
# same_outputs.sh BEFORE AFTER [DATA]: do two kinreg programs give the same
# --deterministic outputs? The check a refactor that promises no behaviour
# change must pass (issue 28): the demo (plain and with jumps: recovery and
# the fill), and the TUM head (plain, every 8th frame with the final
# trajectory, the live refiner). Prints "same FILE" or "DIFF FILE" per
# output and exits 1 on any difference.
#
#   bench/same_outputs.sh /tmp/old/kinreg build/kinreg [../shared/data]
#   BACKEND=cuda bench/same_outputs.sh ...   # the CUDA engine (GPU machine)
set -u
BEFORE=${1:?usage: same_outputs.sh BEFORE_KINREG AFTER_KINREG [DATA]}
AFTER=${2:?usage: same_outputs.sh BEFORE_KINREG AFTER_KINREG [DATA]}
DATA=${3:-$(dirname "$0")/../../shared/data}
B=${BACKEND:-cpu}
HEAD=$DATA/tum/fr1_xyz_head
OUT=$(mktemp -d /tmp/kinreg_same_XXXXXX)

outputs() { # KINREG DIR
    local k=$1 o=$2
    mkdir -p "$o"
    "$k" demo -b "$B" --deterministic --out "$o/demo" -q >"$o/demo.log" 2>&1
    "$k" demo -b "$B" --deterministic --jumps 20 --covered 5 --out "$o/demojumps" -q \
        >"$o/demojumps.log" 2>&1
    if [ -d "$HEAD" ]; then
        local run=("$k" run "tum:$HEAD" --intrinsics fr1 -b "$B" --deterministic -q)
        "${run[@]}" -t "$o/fr1.txt" >"$o/fr1.log" 2>&1
        "${run[@]}" --every 8 -t "$o/fr1e8.txt" --trajectory-final "$o/fr1e8_final.txt" \
            >"$o/fr1e8.log" 2>&1
        "${run[@]}" --refine on -t "$o/fr1r.txt" --trajectory-refined "$o/fr1r_refined.txt" \
            >"$o/fr1r.log" 2>&1
    fi
}

outputs "$BEFORE" "$OUT/before"
outputs "$AFTER" "$OUT/after"
[ -d "$HEAD" ] || echo "SKIP the TUM head: $HEAD not found (pass DATA)"
status=0
for f in demo/trajectory.txt demo/trajectory_final.txt demo/model.ply \
    demojumps/trajectory.txt demojumps/trajectory_final.txt \
    fr1.txt fr1e8.txt fr1e8_final.txt fr1r.txt fr1r_refined.txt; do
    [ -e "$OUT/before/$f" ] || [ -e "$OUT/after/$f" ] || continue
    if cmp -s "$OUT/before/$f" "$OUT/after/$f"; then echo "same $f"; else
        echo "DIFF $f"
        status=1
    fi
done
echo "outputs in $OUT"
exit $status

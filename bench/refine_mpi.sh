#!/usr/bin/env bash
# Distributed refinement (issue 10) on the synthetic long scan: VIEWS depth
# views from a loop inside a bumpy room (kinreg refine --synthetic room:N),
# every view but the first moved by a seeded random rotation and translation,
# refined on 1, 2 and 4 MPI ranks (CPU) or on 1 and 2 GPUs. Prints per run the
# wall time, LM iterations, the all-reduce payload per iteration and the
# largest error against the ground truth (relative to view 0), then whether
# every run returned the same poses as the first (within 1 µm and 1e-4°).
#   bench/refine_mpi.sh [KINREG]            CPU: 1, 2, 4 ranks
#   MODE=gpu bench/refine_mpi.sh [KINREG]   CUDA: --devices 0, then 0,1, then
#                                           mpirun -np 2, a GPU per rank
#                                           (DEVICES="0 0,0": two contexts on one GPU;
#                                           GPU_RANKS="": no mpirun run)
# Environment: VIEWS (200), SEED (1), PERTURB (0.1:0.2,0.1:0.3: degrees, cm),
# RANKS ("1 2 4"), DEVICES ("0 0,1"), CORES (nproc; OpenMP threads per rank = CORES / ranks),
# OPTIONS (the refinement's: "--cell 0.02 --levels 1 --signed --subset 1":
# signed fields on every grid point, which bring this scan back within 1 mm /
# 0.1°).
# Ranks are started with --bind-to none: Open MPI binds each of two ranks to
# one core by default, and their OpenMP parts then run on one thread.
# Each run's time (end to end: the process, wall clock) is given with the
# refinement's parts: fields (normals, fields; on the devices they are split
# among them, for ranks each builds all), sums (the evaluations that ranks or
# devices share), solve (rank 0's host), fit (the measure) and read; the
# speed-up over the first run end to end, of the refinement, fields and sums.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
kinreg=${1:-$here/build/kinreg}
views=${VIEWS:-200}
seed=${SEED:-1}
perturb=${PERTURB:-0.1:0.2,0.1:0.3}
cores=${CORES:-$(nproc)}
options=${OPTIONS:---cell 0.02 --levels 1 --signed --subset 1}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# CI and containers run as root; more ranks than cores is the point of the 4-rank run.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMP_WAIT_POLICY=passive
problem="refine --synthetic room:$views --perturb $perturb --seed $seed $options --json -q"
echo "synthetic room scan: $views views, perturbation $perturb (deg, cm), seed $seed, $options; $(nproc) cores"
runs=()
# One run: its name, then the command; its wall time goes to $out/NAME.wall.
run() {
    local name=$1 t0
    shift
    t0=$(date +%s%N)
    "$@" -o "$out/$name.conf" >"$out/$name.json"
    echo "$(($(date +%s%N) - t0))e-9" >"$out/$name.wall"
    runs+=("$name")
}
ranks() { # NP then the rest of kinreg's arguments
    local np=$1 threads=$((cores / $1 > 0 ? cores / $1 : 1))
    shift
    # shellcheck disable=SC2086
    OMP_NUM_THREADS=$threads mpirun --oversubscribe --bind-to none -x OMP_NUM_THREADS -np "$np" \
        "$kinreg" $problem "$@"
}
if [ "${MODE:-cpu}" = gpu ]; then
    for devices in ${DEVICES:-0 0,1}; do
        # shellcheck disable=SC2086
        run "d$devices" "$kinreg" $problem --backend cuda --devices "$devices"
    done
    for np in ${GPU_RANKS-2}; do
        run "g$np" ranks "$np" --backend cuda
    done
else
    for np in ${RANKS:-1 2 4}; do
        run "r$np" ranks "$np"
    done
fi
python3 - "$out" "${runs[@]}" <<'PY'
import json, math, sys
out, runs = sys.argv[1], sys.argv[2:]
def poses(path):
    rows = []
    for line in open(path):
        f = line.split()
        if f and f[0] == "bmesh":
            t = list(map(float, f[2:5])); x, y, z, w = map(float, f[5:9])
            rows.append((t, (x, y, z, w)))
    return rows
def diff(a, b):
    mm = deg = 0.0
    for (ta, qa), (tb, qb) in zip(a, b):
        mm = max(mm, 1000 * math.dist(ta, tb))
        # conj(qa)·qb: its vector part's length and w give the angle without acos's
        # loss near 1 (the files carry 9 digits).
        (x1, y1, z1, w1), (x2, y2, z2, w2) = qa, qb
        w = w1 * w2 + x1 * x2 + y1 * y2 + z1 * z2
        v = (w1 * x2 - x1 * w2 - y1 * z2 + z1 * y2, w1 * y2 - y1 * w2 - z1 * x2 + x1 * z2,
             w1 * z2 - z1 * w2 - x1 * y2 + y1 * x2)
        deg = max(deg, 2 * math.degrees(math.atan2(math.hypot(*v), abs(w))))
    return mm, deg
first = None
for r in runs:
    d = json.load(open(f"{out}/{r}.json"))
    e = d["errors"]
    label = {"r": f"{d['ranks']} rank(s)", "d": f"devices {r[1:]}",
             "g": f"{d['ranks']} GPU ranks"}[r[0]]
    wall = float(open(f"{out}/{r}.wall").read())
    print(f"{label:>12}: {wall:6.2f} s end to end, refinement {d['seconds']:.2f} s (fields {d['fields_seconds']:.2f} s, sums {d['sums_seconds']:.2f} s "
          f"in {d['evaluations']} evaluations, solve {d['solve_seconds']:.2f} s, fit {d['fit_seconds']:.2f} s, "
          f"read {d['read_seconds']:.2f} s)  {d['iterations']:3d} LM it  backend {d['backend']}  "
          f"solver {d['solver']}  all-reduce {d['bytes_per_iteration']:.0f} B/iteration  "
          f"error {max(x['deg_before'] for x in e):.3f} deg {max(x['mm_before'] for x in e):.2f} mm -> "
          f"{d['max_deg']:.4f} deg {d['max_mm']:.3f} mm")
    p = poses(f"{out}/{r}.conf")
    if first is None:
        first = (r, p, wall, d["seconds"], d["sums_seconds"], d["fields_seconds"])
    else:
        mm, deg = diff(first[1], p)
        print(f"{'':>12}  speed-up {first[2] / wall:.2f}x end to end, {first[3] / d['seconds']:.2f}x "
              f"refinement (fields {first[5] / d['fields_seconds']:.2f}x, sums {first[4] / d['sums_seconds']:.2f}x) "
              f"over {first[0]}; poses differ by "
              f"{mm:.2g} mm {deg:.2g} deg ({'within' if mm <= 1e-3 and deg <= 1e-4 else 'BEYOND'} 1 um / 1e-4 deg)")
PY

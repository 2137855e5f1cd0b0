#!/usr/bin/env bash
# Acceptance run of issue 9: the five Stanford bunny scans, each moved away
# from bun.conf by a random 3–5° and 1–2 cm (seeded), refined jointly; prints
# each seed's largest error against bun.conf (relative to bun000) and time,
# then the worst over all seeds and the median time.
#   bench/refine_bunny.sh [KINREG [SEEDS [EXTRA OPTIONS...]]]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
kinreg=${1:-$here/build/kinreg}
seeds=${2:-10}
shift $(($# < 2 ? $# : 2))
conf=${KINREG_DATA:-$here/../shared/data}/bunny/bun.conf
[ -f "$conf" ] || { echo "refine_bunny: no $conf (shared data absent)" >&2; exit 77; }
for seed in $(seq 1 "$seeds"); do
    "$kinreg" refine "$conf" --perturb 3:5,1:2 --seed "$seed" --json "$@"
done | python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin if l.strip()]
for r in rows:
    print("seed %2d  max %.4f deg %.4f mm  rms %.4f -> %.4f mm  %d it  %.3f s" % (r["seed"], r["max_deg"], r["max_mm"],
          1000 * r["rms_before_m"], 1000 * r["rms_after_m"], r["iterations"], r["seconds"]))
t = sorted(r["seconds"] for r in rows)
ok = sum(r["max_deg"] <= 0.2 and r["max_mm"] <= 1.0 for r in rows)
print("worst %.4f deg %.4f mm over %d seeds; %d/%d within 0.2 deg and 1 mm; median time %.3f s (max %.3f)" % (
      max(r["max_deg"] for r in rows), max(r["max_mm"] for r in rows), len(rows), ok, len(rows), t[len(t) // 2], t[-1]))
'

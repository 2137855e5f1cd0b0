#!/usr/bin/env python3
"""softassign_coarse.py: Softassign coarse to fine against the seed's form, side by side.

Registers real range scans with `kinreg register --method softassign` on the
same input (the same --seed, so the same 5000-point subsamples) in the seed's
form (--coarse-points 0: every point at every temperature) and with each
--variant's options (default: the default coarse to fine schedule, every
temperature but the last 6 on about 512 points of each set). Cases: crops of each
scan (register_sweep.py's) against the whole scan, and each scan against the
next of its set, from the truth turned by each --angles degrees about a
seeded axis. Prints, per case, the seed form's error and time and how far
each variant's pose is from it, then per variant a summary: the largest
disagreement (over all cases, and where the seed form itself is within 1
degree of the truth) and the median times.

    bench/softassign_coarse.py build/kinreg /work/data/scans/bunny/bun.conf ... \\
        [--scans 3] [--angles 0,20,40] [--args '--engine cpu'] \\
        [--variant '' --variant '--fine-temperatures 12']

Needs numpy."""
import argparse, math, os, sys, tempfile
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import register_sweep as rs  # noqa: E402


def angle_between(Ra, Rb):
    c = (np.trace(Ra @ Rb.T) - 1) / 2
    return math.degrees(math.acos(max(-1.0, min(1.0, c))))


def pose_of(r):
    return np.array(r['matrix'])[:3, :3], np.array(r['t'])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('kinreg')
    ap.add_argument('confs', nargs='+')
    ap.add_argument('--scans', type=int, default=3, help='scans per set')
    ap.add_argument('--angles', default='0,20,40')
    ap.add_argument('--crops', default='half_x,top')
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--args', default='', help='extra kinreg register options')
    ap.add_argument('--variant', action='append',
                    help='options of a schedule to compare with the seed form (repeatable; default: none, '
                    'the default schedule)')
    ap.add_argument('--tmp', default='/tmp')
    a = ap.parse_args()
    angles = [float(x) for x in a.angles.split(',')]
    extra = ['--method', 'softassign', '--seed', str(a.seed)] + a.args.split()
    rng = np.random.default_rng(a.seed)
    variants = ['--coarse-points 0'] + (a.variant or [''])
    rows = {v: [] for v in variants[1:]}
    with tempfile.TemporaryDirectory(dir=a.tmp) as tmp:
        for conf in a.confs:
            scans = rs.load_conf(conf)[:a.scans + 1]
            name = os.path.basename(conf)
            for k, (path, R, t) in enumerate(scans[:a.scans]):
                P = rs.read_ply(path)
                whole = os.path.join(tmp, 'whole.ply')
                rs.write_ply(whole, P)
                cases = []
                for crop, C in rs.crops(P, a.crops.split(',')):
                    f = os.path.join(tmp, crop + '.ply')
                    rs.write_ply(f, C)
                    cases.append(('%s %d %s' % (name, k, crop), f, whole, np.eye(3), np.zeros(3),
                                  C.mean(0)))
                if k + 1 < len(scans):
                    # src = scan k in its own frame, dst = scan k+1 in its own:
                    # the truth maps k's frame into k+1's.
                    p2, R2, t2 = scans[k + 1]
                    Q = rs.read_ply(p2)
                    nxt = os.path.join(tmp, 'next.ply')
                    rs.write_ply(nxt, Q)
                    Rt, tt = R2.T @ R, R2.T @ (t - t2)
                    cases.append(('%s %d->%d' % (name, k, k + 1), whole, nxt, Rt, tt, P.mean(0)))
                for label, src, dst, Rt, tt, c in cases:
                    for ang in angles:
                        axis = rng.normal(size=3)
                        Rd = rs.rot(axis, ang)
                        # start: the truth turned about the source centroid's image
                        ci = Rt @ c + tt
                        R0, t0 = Rd @ Rt, Rd @ (tt - ci) + ci
                        got = []
                        for v in variants:
                            r, wall, err = rs.run(a.kinreg, src, dst, R0, t0, extra + v.split())
                            if r is None:
                                print('%s %g deg: %s failed: %s' % (label, ang, v or 'default', err))
                                break
                            got.append(r)
                        if len(got) < len(variants):
                            continue
                        Ra, ta = pose_of(got[0])
                        e0 = (angle_between(Ra, Rt), 1000 * np.linalg.norm(ta - tt))
                        line = '%-24s %3g deg | seed form %.3f deg %.2f mm %.1f ms' % (
                            label, ang, e0[0], e0[1], got[0]['median_ms'])
                        for v, r in zip(variants[1:], got[1:]):
                            Rb, tb = pose_of(r)
                            d_deg, d_mm = angle_between(Ra, Rb), 1000 * np.linalg.norm(ta - tb)
                            rows[v].append((d_deg, d_mm, got[0]['median_ms'], r['median_ms'], e0[0],
                                            angle_between(Rb, Rt)))
                            line += ' | [%s] apart %.4f deg %.4f mm, %.1f ms' % (
                                v or 'default', d_deg, d_mm, r['median_ms'])
                        print(line, flush=True)
    for v, rw in rows.items():
        if not rw:
            sys.exit('no case ran')
        A = np.array(rw)
        good = A[A[:, 4] < 5.0]
        right = sum(1 for r in rw if r[5] < 5.0)
        print('\n[%s] %d cases: apart at most %.4f deg / %.4f mm (median %.4f deg); where the seed form found the pair '
              '(within 5 deg of the truth, %d): at most %.4f deg / %.4f mm; time median %.1f ms (seed form) -> '
              '%.1f ms, %.1fx; within 5 deg of the truth: %d (seed form), %d (this)' %
              (v or 'default', len(A), A[:, 0].max(), A[:, 1].max(), np.median(A[:, 0]), len(good),
               good[:, 0].max() if len(good) else float('nan'), good[:, 1].max() if len(good) else float('nan'),
               np.median(A[:, 2]), np.median(A[:, 3]), np.median(A[:, 2]) / np.median(A[:, 3]), len(good), right))


if __name__ == '__main__':
    main()

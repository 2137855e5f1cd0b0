#!/usr/bin/env python3
"""EM-ICP side by side on the GPU machine: kinreg's fused and cuBLAS engines and
the seed's dense formulation written with CuPy (the anchor,
../shared/tools/anchors/emicp_dense_cupy.py), on the SAME points.

The points are made by the anchor's own code (its surface(), its seed 1, its
motion: 20 deg about (1,2,3) and (2,-1,1.5) cm), written to ASCII PLY files
that `kinreg register` reads, and handed to the anchor's emicp() in the same
process. Every run uses the seed's schedule unscaled (sigma2 0.01 -> 1e-5,
factor 0.9, d02 0.01: 66 steps; kinreg with --extent 0.1 --full-schedule).
Also Softassign 2000 x 2000 (seed schedule) on the fused and cuBLAS engines.

  python3 bench/emicp_anchor.py [--kinreg build/kinreg] [--sizes 5000,20000,100000]
                               [--anchor-max 20000] [--repeat 5] [--json]

Prints a table of medians (ms), iterations and the pose error against the
known motion; --json prints the rows as one JSON list instead.
"""
import argparse, json, os, subprocess, sys, tempfile, time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ANCHOR = os.path.join(HERE, '..', '..', 'shared', 'tools', 'anchors', 'emicp_dense_cupy.py')


def load_anchor(path):
    """The anchor's definitions (imports, surface, rot, horn_w, emicp) without
    its benchmark loop, which starts at `rng = np.random.default_rng(1)`."""
    src = open(path).read()
    cut = src.index('rng = np.random.default_rng(1)')
    ns = {'__name__': 'anchor'}
    exec(compile(src[:cut], path, 'exec'), ns)
    return ns


def write_ply(path, pts):
    with open(path, 'w') as f:
        f.write('ply\nformat ascii 1.0\nelement vertex %d\nproperty float x\nproperty float y\n'
                'property float z\nend_header\n' % len(pts))
        np.savetxt(f, pts, fmt='%.9g')


def pose_error(R, t, Rg, tg):
    ang = np.degrees(np.arccos(np.clip((np.trace(R.T @ Rg) - 1) / 2, -1, 1)))
    return ang, 1000 * np.linalg.norm(np.asarray(t) - tg)


def run_kinreg(exe, args):
    out = subprocess.run([exe, 'register', '--json'] + args, capture_output=True, text=True)
    if out.returncode != 0:
        return {'error': (out.stderr or out.stdout).strip().splitlines()[-1]}
    return json.loads(out.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--kinreg', default=os.path.join(HERE, '..', 'build', 'kinreg'))
    ap.add_argument('--anchor', default=ANCHOR)
    ap.add_argument('--sizes', default='5000,20000,100000')
    ap.add_argument('--anchor-max', type=int, default=20000, help='largest N for the dense CuPy anchor')
    ap.add_argument('--cublas-max', type=int, default=20000, help='largest N for the cuBLAS engine')
    ap.add_argument('--repeat', type=int, default=5)
    ap.add_argument('--json', action='store_true')
    a = ap.parse_args()

    A = load_anchor(a.anchor)
    cp = A['cp']
    rng = np.random.default_rng(1)
    Rg = A['rot']([1, 2, 3], 20)
    tg = np.array([0.02, -0.01, 0.015])
    rows = []
    tmp = tempfile.mkdtemp(prefix='kinreg_anchor_')
    common = ['--extent', '0.1', '--full-schedule', '--subsample', '0', '--repeat', str(a.repeat)]
    for n in [int(s) for s in a.sizes.split(',')]:
        # Exactly the anchor's data for this n (same generator, same order).
        P = A['surface'](n, rng)
        Q = A['surface'](n, rng)
        Y = ((Q - tg) @ Rg).astype(np.float32)  # X ~ Rg Y + tg
        fx, fy = os.path.join(tmp, 'dst_%d.ply' % n), os.path.join(tmp, 'src_%d.ply' % n)
        write_ply(fx, P)
        write_ply(fy, Y)
        for engine in ('fused', 'cublas'):
            if engine == 'cublas' and n > a.cublas_max:
                continue
            r = run_kinreg(a.kinreg, ['--engine', engine] + common + [fy, fx])
            row = {'method': 'emicp', 'impl': 'kinreg ' + engine, 'n': n}
            if 'error' in r:
                row['error'] = r['error']
            else:
                M = np.array(r['matrix'])
                ang, mm = pose_error(M[:3, :3], M[:3, 3], Rg, tg)
                row.update(median_ms=r['median_ms'], iters=r['iterations'], rot_err_deg=ang,
                           trans_err_mm=mm, device=r['device'])
            rows.append(row)
        if n <= a.anchor_max:
            X, Yd = cp.asarray(P), cp.asarray(Y)
            A['emicp'](X[:500], Yd[:500])
            cp.cuda.Device().synchronize()
            times = []
            for _ in range(3):
                cp.cuda.Device().synchronize()
                t0 = time.perf_counter()
                R, t, it = A['emicp'](X, Yd)
                cp.cuda.Device().synchronize()
                times.append(time.perf_counter() - t0)
            ang, mm = pose_error(R, t, Rg, tg)
            rows.append({'method': 'emicp', 'impl': 'cupy anchor (dense)', 'n': n,
                         'median_ms': 1000 * sorted(times)[1], 'iters': it, 'rot_err_deg': ang,
                         'trans_err_mm': mm})
    # Softassign, 2000 x 2000, the seed's schedule (100 temperatures x 5 steps x 3 Sinkhorn).
    for engine in ('fused', 'cublas'):
        r = run_kinreg(a.kinreg, ['--engine', engine, '--method', 'softassign', '--synthetic', '2000',
                                  '--extent', '0.1', '--full-schedule', '--repeat', str(a.repeat)])
        row = {'method': 'softassign', 'impl': 'kinreg ' + engine, 'n': 2000}
        if 'error' in r:
            row['error'] = r['error']
        else:
            row.update(median_ms=r['median_ms'], iters=r['iterations'],
                       rot_err_deg=r.get('rot_err_deg'), trans_err_mm=r.get('trans_err_mm'))
        rows.append(row)

    if a.json:
        print(json.dumps(rows, indent=1))
        return
    print('%-11s %-22s %7s %10s %6s %9s %8s' % ('method', 'implementation', 'N=M', 'median ms', 'steps',
                                               'rot deg', 'trans mm'))
    for r in rows:
        if 'error' in r:
            print('%-11s %-22s %7d  %s' % (r['method'], r['impl'], r['n'], r['error']))
        else:
            print('%-11s %-22s %7d %10.2f %6d %9.4f %8.3f' % (r['method'], r['impl'], r['n'], r['median_ms'],
                                                            r['iters'], r['rot_err_deg'], r['trans_err_mm']))


if __name__ == '__main__':
    sys.exit(main())

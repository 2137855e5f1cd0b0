#!/usr/bin/env python3
"""register_sweep.py: kinreg register on real range scans, cropped and turned.

For every scan of the given scan sets (Stanford .conf files) it makes crops
(half of the scan along x or y, its top 40 %, a 30 % corner) and registers
each crop against the whole scan from start poses turned by 0 to 90 degrees
about seeded random axes through the crop's centroid (the truth is the
identity: a crop lies where it was cut from). With --pairs it also registers
each scan onto the next one of its set (the truth from the .conf). A result
counts as right within --deg degrees and --mm millimetres of the truth; every
result is also sorted by what kinreg said of it (trusted or not), so the table
shows the basin and whether any wrong result was called good.

    bench/register_sweep.py build/kinreg /work/data/scans/bunny/bun.conf ... \\
        [--angles 0,15,30,45,60,75,90] [--crops half_x,half_y,top,corner] [--pairs]
        [--scans 3] [--args '--method softassign+newton'] [--csv out.csv]

Needs numpy. Scans are PLY (ASCII or binary: read by a small reader here).
Writes temporary PLY files to a scratch folder (--tmp, default /tmp)."""
import argparse, json, math, os, subprocess, sys, tempfile, time
import numpy as np


def read_ply(path):
    """Vertices x, y, z of a PLY (ASCII or binary little/big endian)."""
    with open(path, 'rb') as f:
        fmt, n, props, in_vertex, before = 'ascii', 0, [], False, []
        while True:
            line = f.readline().decode('latin1').strip()
            w = line.split()
            if not w:
                continue
            if w[0] == 'format':
                fmt = w[1]
            elif w[0] == 'element':
                in_vertex = w[1] == 'vertex'
                if in_vertex:
                    n = int(w[2])
                elif n == 0:
                    before.append(int(w[2]))
            elif w[0] == 'property' and in_vertex:
                props.append((w[-2], w[-1]))
            elif w[0] == 'end_header':
                break
        names = [p[1] for p in props]
        if fmt == 'ascii':
            cols = [names.index(c) for c in 'xyz']
            return np.loadtxt(f, max_rows=n, usecols=cols).reshape(-1, 3)
        conv = {'float': 'f4', 'float32': 'f4', 'double': 'f8', 'float64': 'f8', 'uchar': 'u1', 'uint8': 'u1',
                'char': 'i1', 'int8': 'i1', 'short': 'i2', 'int16': 'i2', 'ushort': 'u2', 'uint16': 'u2',
                'int': 'i4', 'int32': 'i4', 'uint': 'u4', 'uint32': 'u4'}
        e = '<' if fmt == 'binary_little_endian' else '>'
        dt = np.dtype([(nm, e + conv[t]) for t, nm in props])
        a = np.frombuffer(f.read(n * dt.itemsize), dtype=dt, count=n)
        return np.stack([a['x'], a['y'], a['z']], axis=1).astype(np.float64)


def write_ply(path, P):
    with open(path, 'wb') as f:
        f.write(b'ply\nformat binary_little_endian 1.0\nelement vertex %d\n' % len(P))
        f.write(b'property float x\nproperty float y\nproperty float z\nend_header\n')
        f.write(np.asarray(P, dtype='<f4').tobytes())


def quat_of(R):
    w = math.sqrt(max(0.0, 1 + R[0, 0] + R[1, 1] + R[2, 2])) / 2
    x = math.copysign(math.sqrt(max(0.0, 1 + R[0, 0] - R[1, 1] - R[2, 2])) / 2, R[2, 1] - R[1, 2])
    y = math.copysign(math.sqrt(max(0.0, 1 - R[0, 0] + R[1, 1] - R[2, 2])) / 2, R[0, 2] - R[2, 0])
    z = math.copysign(math.sqrt(max(0.0, 1 - R[0, 0] - R[1, 1] + R[2, 2])) / 2, R[1, 0] - R[0, 1])
    return x, y, z, w


def rot(axis, deg):
    a = np.asarray(axis, float) / np.linalg.norm(axis)
    K = np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])
    t = math.radians(deg)
    return np.eye(3) + math.sin(t) * K + (1 - math.cos(t)) * K @ K


def R_of_quat(q):
    x, y, z, w = q / np.linalg.norm(q)
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def load_conf(path):
    out = []
    for line in open(path):
        w = line.split()
        if len(w) == 9 and w[0] == 'bmesh':
            t = np.array(list(map(float, w[2:5])))
            q = np.array(list(map(float, w[5:9])))
            out.append((os.path.join(os.path.dirname(path), w[1]), R_of_quat(q).T, t))
    return out


def crops(P, kinds):
    c = P.mean(0)
    for k in kinds:
        if k == 'half_x':
            yield k, P[P[:, 0] > np.median(P[:, 0])]
        elif k == 'half_y':
            yield k, P[P[:, 1] > np.median(P[:, 1])]
        elif k == 'top':
            yield k, P[P[:, 1] > np.quantile(P[:, 1], 0.6)]
        elif k == 'corner':
            d = P - c
            yield k, P[(d[:, 0] > np.quantile(d[:, 0], 0.35)) & (d[:, 1] > np.quantile(d[:, 1], 0.35))]


def run(kinreg, src, dst, R0, t0, extra):
    q = quat_of(R0)
    init = '%.9g %.9g %.9g %.9g %.9g %.9g %.9g' % (t0[0], t0[1], t0[2], q[0], q[1], q[2], q[3])
    cmd = [kinreg, 'register', '--json', '--init', init] + extra + [src, dst]
    t = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.time() - t
    if p.returncode != 0:
        return None, wall, p.stderr.strip().splitlines()[-1] if p.stderr.strip() else 'exit %d' % p.returncode
    return json.loads(p.stdout), wall, ''


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('kinreg')
    ap.add_argument('confs', nargs='+')
    ap.add_argument('--angles', default='0,15,30,45,60,75,90')
    ap.add_argument('--crops', default='half_x,half_y,top,corner')
    ap.add_argument('--pairs', action='store_true')
    ap.add_argument('--scans', type=int, default=0, help='scans per set (0: all)')
    ap.add_argument('--starts', type=int, default=1, help='random axes per angle')
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--deg', type=float, default=0.5)
    ap.add_argument('--mm', type=float, default=2.0)
    ap.add_argument('--args', default='', help='extra kinreg register options')
    ap.add_argument('--csv')
    ap.add_argument('--tmp', default='/tmp')
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    angles = [float(x) for x in a.angles.split(',')]
    extra = a.args.split()
    tmp = tempfile.mkdtemp(prefix='kinreg_sweep_', dir=a.tmp)
    rows = []
    for conf in a.confs:
        scans = load_conf(conf)
        if a.scans:
            scans = scans[:: max(1, len(scans) // a.scans)][: a.scans]
        for si, (path, A, t) in enumerate(scans):
            P = read_ply(path)
            name = os.path.basename(path)
            jobs = []
            for kind, C in crops(P, a.crops.split(',')):
                f = os.path.join(tmp, 'crop_%s.ply' % kind)
                write_ply(f, C)
                jobs.append((kind, f, path, C.mean(0), np.eye(3), np.zeros(3), len(C) / len(P)))
            if a.pairs:
                full = load_conf(conf)
                k = [p for p, _, _ in full].index(path)
                npath, B, u = full[(k + 1) % len(full)]
                # src = this scan, dst = the next: T = T_dst^-1 T_src
                Rt = B.T @ A
                tt = B.T @ (t - u)
                jobs.append(('next', path, npath, P.mean(0), Rt, tt, float('nan')))
            for kind, src, dst, c, Rt, tt, frac in jobs:
                for deg in angles:
                    for _ in range(a.starts):
                        axis = rng.normal(size=3)
                        Rd = rot(axis, deg)
                        # start: the truth turned by deg about the source centroid (in dst's frame)
                        R0 = Rt @ Rd
                        t0 = tt + Rt @ c - R0 @ c
                        r, wall, err = run(a.kinreg, src, dst, R0, t0, extra)
                        if r is None:
                            rows.append((name, kind, frac, deg, float('nan'), float('nan'), False, wall, err,
                                         float('nan')))
                            continue
                        Re = np.array([row[:3] for row in r['matrix'][:3]])
                        te = np.array([row[3] for row in r['matrix'][:3]])
                        dR = Rt.T @ Re
                        e_deg = math.degrees(math.acos(max(-1, min(1, (np.trace(dR) - 1) / 2))))
                        e_mm = 1000 * np.linalg.norm(Re @ c + te - (Rt @ c + tt))
                        trusted = bool(r.get('trusted', True))
                        ms = float(r.get('median_ms', float('nan')))
                        rows.append((name, kind, frac, deg, e_deg, e_mm, trusted, wall, '', ms))
                        print('%-26s %-7s %5.2f %3.0f deg -> %8.3f deg %8.2f mm %-9s %.2f s (%.0f ms registering) %s' %
                              (name, kind, frac, deg, e_deg, e_mm, 'trusted' if trusted else 'flagged', wall, ms,
                               err), flush=True)
    if a.csv:
        with open(a.csv, 'w') as f:
            f.write('scan,crop,kept,start_deg,err_deg,err_mm,trusted,seconds,error\n')
            for r in rows:
                f.write('%s,%s,%.3f,%g,%.4f,%.3f,%d,%.3f,%s\n' % (r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8]))
    # The table: for each crop kind and start angle, right / flagged / wrong-but-trusted.
    print('\n%-8s %6s %8s %8s %10s %8s' % ('crop', 'deg', 'right', 'flagged', 'WRONG+ok', 'median s'))
    kinds = sorted(set(r[1] for r in rows))
    for kind in kinds:
        for deg in angles:
            sel = [r for r in rows if r[1] == kind and r[3] == deg]
            if not sel:
                continue
            right = sum(1 for r in sel if r[4] <= a.deg and r[5] <= a.mm)
            flagged = sum(1 for r in sel if not (r[4] <= a.deg and r[5] <= a.mm) and not r[6])
            wrong_ok = sum(1 for r in sel if not (r[4] <= a.deg and r[5] <= a.mm) and r[6])
            print('%-8s %6g %4d/%-3d %8d %10d %8.2f' % (kind, deg, right, len(sel), flagged, wrong_ok,
                                                       float(np.median([r[7] for r in sel]))))
    tot = len(rows)
    right = sum(1 for r in rows if r[4] <= a.deg and r[5] <= a.mm)
    wrong_ok = sum(1 for r in rows if not (r[4] <= a.deg and r[5] <= a.mm) and r[6])
    print('all: %d of %d right (%.1f %%), %d wrong but trusted' % (right, tot, 100.0 * right / max(tot, 1), wrong_ok))
    ms = [r[9] for r in rows if r[9] == r[9]]
    if ms:
        print('registering (the --json median_ms, process start and reading excluded): median %.0f ms, max %.0f ms'
              % (float(np.median(ms)), max(ms)))


if __name__ == '__main__':
    main()

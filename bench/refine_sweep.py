#!/usr/bin/env python3
"""refine_sweep.py: kinreg refine on real scan sets from rough starts.

For every scan set given (Stanford .conf files) and every perturbation
(A degrees, C centimetres: `kinreg refine --perturb A,C` moves every scan but
the gauge by a random rotation of A degrees about its centre and a translation
of C cm) it runs `kinreg refine SET --perturb A,C --seed S --json` for seeds
1..N and scores each scan against the published poses. A scan is right
within --deg degrees and --mm millimetres of the published pose; a scan that
ends farther from it than it started (in degrees or millimetres) is worse.
The table also gives the multi-view fit before and after (the score
kinreg reports: RMS nearest-neighbour distance between overlapping scans,
weighted by overlap), how many runs fit at least as well as the published
alignment (itself a registration, not the truth: a run that is not within
the thresholds but fits as well is not wrong), and the time.

    bench/refine_sweep.py build/kinreg /work/data/scans/bunny/bun.conf ... \\
        [--perturb 5,2 --perturb 10,5 --perturb 20,5] [--seeds 10]
        [--args '--backend cuda'] [--json out.json]

Prints one line per set and perturbation, then the worst cases."""
import argparse, json, os, statistics, subprocess, sys, time


def run(kinreg, conf, perturb, seed, extra):
    cmd = [kinreg, 'refine', conf, '--perturb', perturb, '--seed', str(seed), '--json', '-q'] + extra
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.time() - t0
    if p.returncode != 0:
        return {'error': p.stderr.strip().splitlines()[-1:] or ['exit %d' % p.returncode], 'wall': wall}
    d = json.loads(p.stdout)
    d['wall'] = wall
    return d


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('kinreg')
    ap.add_argument('sets', nargs='+')
    ap.add_argument('--perturb', action='append', help='A,C (default 5,2 10,5 20,5)')
    ap.add_argument('--seeds', type=int, default=10)
    ap.add_argument('--deg', type=float, default=0.3)
    ap.add_argument('--mm', type=float, default=1.0)
    ap.add_argument('--args', default='', help='more kinreg refine options')
    ap.add_argument('--json', help='write every run here')
    a = ap.parse_args()
    perturbs = a.perturb or ['5,2', '10,5', '20,5']
    extra = a.args.split()
    runs, worst = [], []
    print('| set | scans | perturbation | runs | scans right | scans worse than start | max deg | max mm '
          '| fit before -> after (mm, median) | published fit | runs fitting as well | kept input '
          '| seconds (median, max) |')
    print('|---|---:|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---|')
    for conf in a.sets:
        name = os.path.basename(os.path.dirname(os.path.abspath(conf)))
        p = subprocess.run([a.kinreg, 'refine', conf, '--iterations', '0', '--json', '-q'] + extra,
                           capture_output=True, text=True, check=True)
        published = json.loads(p.stdout)['fit_before']['score_m']
        for pt in perturbs:
            right = worse = total = kept = 0
            maxdeg = maxmm = 0.0
            fb, fa, secs, failed, as_well = [], [], [], 0, 0
            for seed in range(1, a.seeds + 1):
                print('  %s %s seed %d ...' % (name, pt, seed), end='\r', file=sys.stderr, flush=True)
                d = run(a.kinreg, conf, pt, seed, extra)
                d.update(set=name, perturb=pt, seed=seed)
                runs.append(d)
                if 'error' in d:
                    failed += 1
                    worst.append((1e9, '%s %s seed %d: %s' % (name, pt, seed, d['error'][0])))
                    continue
                secs.append(d['seconds'])
                kept += bool(d.get('kept_input'))
                fb.append(1e3 * d['fit_before']['score_m'])
                fa.append(1e3 * d['fit_after']['score_m'])
                as_well += d['fit_after']['score_m'] <= published * 1.001
                for e in d['errors']:
                    if e['deg_before'] == 0 and e['mm_before'] == 0:
                        continue  # the gauge
                    total += 1
                    ok = e['deg'] <= a.deg and e['mm'] <= a.mm
                    bad = e['deg'] > e['deg_before'] + 1e-6 or e['mm'] > e['mm_before'] + 1e-6
                    right += ok
                    worse += bad
                    maxdeg, maxmm = max(maxdeg, e['deg']), max(maxmm, e['mm'])
                    if not ok:
                        worst.append((e['deg'], '%s %s seed %d: %s %.2f deg %.1f mm (from %.1f deg %.1f mm)%s' % (
                            name, pt, seed, e['scan'], e['deg'], e['mm'], e['deg_before'], e['mm_before'],
                            ', worse' if bad else '')))
            med = lambda v: statistics.median(v) if v else float('nan')
            print('| %s | %d | %s deg, %s cm | %d%s | %d / %d | %d | %.2f | %.1f | %.3f -> %.3f | %.3f | %d '
                  '| %d | %.2f, %.2f |' % (
                      name, total // max(1, a.seeds - failed) + 1, *pt.split(','), a.seeds,
                      ' (%d failed)' % failed if failed else '', right, total, worse, maxdeg, maxmm, med(fb),
                      med(fa), 1e3 * published, as_well, kept, med(secs), max(secs) if secs else float('nan')),
                  flush=True)
    print(file=sys.stderr)
    if worst:
        print('\nscans not within %.2f deg / %.1f mm (worst first, at most 20):' % (a.deg, a.mm))
        for _, line in sorted(worst, reverse=True)[:20]:
            print('  ' + line)
    if a.json:
        with open(a.json, 'w') as f:
            json.dump(runs, f)


if __name__ == '__main__':
    main()

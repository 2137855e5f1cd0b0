#!/usr/bin/env python3
"""Open3D peer for kinreg: frame-to-frame point-to-plane ICP on a TUM RGB-D
depth sequence, timed per stage, written as a TUM trajectory and scored by ATE.

The ATE is computed twice: by this script's own NumPy code (timestamp
association as in TUM's associate.py, Umeyama/Kabsch SVD alignment without
scale) and by `kinreg eval` when the kinreg program is found. The two use
different alignment algorithms (SVD here, Horn's quaternion method in kinreg),
so their agreement also cross-checks kinreg's evaluator.

Run it with ./.venv-bench (bench/setup_venv.sh) and OMP_NUM_THREADS set, e.g.
    OMP_NUM_THREADS=2 .venv-bench/bin/python bench/open3d_compare.py
See bench/README.md.

Open3D's RGB-D odometry is not run: it needs a colour image per frame
(photometric term), and the shared fr1_xyz_head data holds depth only.
"""

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

try:
    import open3d as o3d
except ImportError:  # pragma: no cover - environment problem, not a bug
    sys.exit("open3d_compare: cannot import open3d; run bench/setup_venv.sh and use .venv-bench/bin/python")

REPO = Path(__file__).resolve().parents[1]
DEFAULT_SEQ = REPO.parent / "shared" / "data" / "tum" / "fr1_xyz_head"

# TUM fr1 (Kinect v1) intrinsics and PNG depth scale (value / 5000 = metres).
FR1 = dict(width=640, height=480, fx=517.3, fy=516.5, cx=318.6, cy=255.3)
DEPTH_SCALE = 5000.0


# ---- TUM files -------------------------------------------------------------


def read_list(path):
    """Lines of a TUM list file as lists of fields, comments skipped."""
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                rows.append(line.split())
    return rows


def read_trajectory(path):
    """TUM trajectory -> (stamps [n], poses [n, 4, 4] camera-to-world)."""
    rows = read_list(path)
    stamps = np.array([float(r[0]) for r in rows])
    poses = np.array([pose_matrix([float(v) for v in r[1:4]], [float(v) for v in r[4:8]]) for r in rows])
    return stamps, poses


def pose_matrix(t, q):
    """4x4 from translation and quaternion (x, y, z, w)."""
    x, y, z, w = np.asarray(q, float) / np.linalg.norm(q)
    T = np.eye(4)
    T[:3, :3] = [
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ]
    T[:3, 3] = t
    return T


def matrix_quaternion(R):
    """Unit quaternion (x, y, z, w), w >= 0, of a rotation matrix."""
    K = np.array([
        [R[0, 0] - R[1, 1] - R[2, 2], R[1, 0] + R[0, 1], R[2, 0] + R[0, 2], R[2, 1] - R[1, 2]],
        [R[1, 0] + R[0, 1], R[1, 1] - R[0, 0] - R[2, 2], R[2, 1] + R[1, 2], R[0, 2] - R[2, 0]],
        [R[2, 0] + R[0, 2], R[2, 1] + R[1, 2], R[2, 2] - R[0, 0] - R[1, 1], R[1, 0] - R[0, 1]],
        [R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1], R[0, 0] + R[1, 1] + R[2, 2]],
    ]) / 3.0
    w, V = np.linalg.eigh(K)  # Bar-Itzhack: robust for any rotation
    q = V[:, np.argmax(w)]
    return -q if q[3] < 0 else q


def write_trajectory(path, stamps, poses):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        f.write("# timestamp tx ty tz qx qy qz qw (Open3D point-to-plane ICP, frame to frame)\n")
        for s, T in zip(stamps, poses):
            q = matrix_quaternion(T[:3, :3])
            f.write("%.6f %.9f %.9f %.9f %.9f %.9f %.9f %.9f\n" % (s, *T[:3, 3], *q))


# ---- evaluation (independent of kinreg) -------------------------------------


def associate(a, b, max_dt):
    """One-to-one pairs (i, j) with |a_i - b_j| <= max_dt, taken greedily by
    increasing difference (TUM associate.py), sorted by b's stamp."""
    cand = []
    for j, t in enumerate(b):
        lo, hi = np.searchsorted(a, [t - max_dt, t + max_dt], side="left")
        for i in range(max(lo - 1, 0), min(hi + 1, len(a))):
            d = abs(a[i] - t)
            if d <= max_dt:
                cand.append((d, j, i))
    cand.sort()
    used_a, used_b, pairs = set(), set(), []
    for d, j, i in cand:
        if i not in used_a and j not in used_b:
            used_a.add(i)
            used_b.add(j)
            pairs.append((i, j))
    pairs.sort(key=lambda p: b[p[1]])
    return pairs


def umeyama_rigid(src, dst):
    """R, t minimising sum |dst - (R src + t)|^2 by SVD (Umeyama 1991, no scale)."""
    cs, cd = src.mean(0), dst.mean(0)
    H = (src - cs).T @ (dst - cd)
    U, S, Vt = np.linalg.svd(H)
    D = np.eye(3)
    D[2, 2] = np.sign(np.linalg.det(Vt.T @ U.T))
    R = Vt.T @ D @ U.T
    return R, cd - R @ cs


def ate(gt_stamps, gt_poses, est_stamps, est_poses, max_dt=0.02):
    order = np.argsort(gt_stamps)
    gt_stamps, gt_poses = gt_stamps[order], gt_poses[order]
    pairs = associate(gt_stamps, est_stamps, max_dt)
    if len(pairs) < 3:
        raise SystemExit("open3d_compare: fewer than 3 estimate/ground-truth pairs within %g s" % max_dt)
    g = np.array([gt_poses[i][:3, 3] for i, _ in pairs])
    e = np.array([est_poses[j][:3, 3] for _, j in pairs])
    R, t = umeyama_rigid(e, g)
    err = np.linalg.norm(g - (e @ R.T + t), axis=1)
    return dict(pairs=len(pairs), rmse=float(np.sqrt(np.mean(err ** 2))), mean=float(err.mean()),
                median=float(np.median(err)), max=float(err.max()))


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def find_kinreg(explicit):
    if explicit:
        return explicit
    for cand in (os.environ.get("KINREG"), REPO / "build" / "kinreg"):
        if cand and Path(cand).is_file() and os.access(cand, os.X_OK):
            return str(cand)
    return shutil.which("kinreg")


def kinreg_eval(kinreg, gt_path, est_path):
    """ATE from `kinreg eval --json`, or None with the reason."""
    if not kinreg:
        return None, "kinreg program not found (build it, or pass --kinreg PATH)"
    r = subprocess.run([kinreg, "eval", "--json", str(gt_path), str(est_path)], capture_output=True, text=True)
    if r.returncode != 0:
        return None, "kinreg eval failed (%d): %s" % (r.returncode, (r.stderr or r.stdout).strip())
    try:
        return json.loads(r.stdout), None
    except json.JSONDecodeError as exc:
        return None, "kinreg eval printed no JSON: %s" % exc


# ---- the peer ---------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sequence", nargs="?", default=str(DEFAULT_SEQ),
                    help="TUM sequence directory with depth.txt (default: %(default)s)")
    ap.add_argument("--out", default=str(REPO / "out" / "open3d_icp.txt"), help="TUM trajectory to write")
    ap.add_argument("--voxel", type=float, default=0.02, help="voxel size for downsampling, m (default 0.02)")
    ap.add_argument("--max-corr", type=float, default=0.05, help="ICP max correspondence distance, m (default 0.05)")
    ap.add_argument("--max-depth", type=float, default=4.0, help="depth truncation, m (default 4.0)")
    ap.add_argument("--max-iter", type=int, default=30, help="ICP iterations per frame (Open3D default 30)")
    ap.add_argument("--init", choices=("velocity", "identity"), default="velocity",
                    help="ICP initial guess: previous relative motion or identity (default velocity)")
    ap.add_argument("--frames", type=int, default=0, help="use only the first N frames (0 = all)")
    ap.add_argument("--kinreg", help="kinreg program for the cross-check (default build/kinreg or PATH)")
    ap.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = ap.parse_args()

    seq = Path(args.sequence)
    if not (seq / "depth.txt").is_file():
        sys.exit("open3d_compare: %s has no depth.txt (give a TUM RGB-D sequence directory)" % seq)
    frames = read_list(seq / "depth.txt")
    if args.frames:
        frames = frames[: args.frames]
    if len(frames) < 2:
        sys.exit("open3d_compare: need at least 2 depth frames")
    gt_path = seq / "groundtruth.txt"
    gt = read_trajectory(gt_path) if gt_path.is_file() else None

    intr = o3d.camera.PinholeCameraIntrinsic(FR1["width"], FR1["height"], FR1["fx"], FR1["fy"], FR1["cx"], FR1["cy"])
    icp = o3d.pipelines.registration
    estimation = icp.TransformationEstimationPointToPlane()
    criteria = icp.ICPConvergenceCriteria(max_iteration=args.max_iter)
    normal_search = o3d.geometry.KDTreeSearchParamHybrid(radius=2.5 * args.voxel, max_nn=30)

    def load(name):
        return o3d.io.read_image(str(seq / name))

    def preprocess(depth):
        pcd = o3d.geometry.PointCloud.create_from_depth_image(depth, intr, depth_scale=DEPTH_SCALE,
                                                              depth_trunc=args.max_depth)
        pcd = pcd.voxel_down_sample(args.voxel)
        pcd.estimate_normals(normal_search)
        return pcd

    # Start at the ground-truth pose of the first frame when there is one, so
    # the trajectory lives in the ground-truth frame (ATE aligns anyway).
    stamps = np.array([float(r[0]) for r in frames])
    pose = np.eye(4)
    if gt is not None:
        k = int(np.argmin(np.abs(gt[0] - stamps[0])))
        if abs(gt[0][k] - stamps[0]) <= 0.02:
            pose = gt[1][k].copy()

    t_load, t_pre, t_reg, fitness, rmse_in = [], [], [], [], []
    t0 = time.perf_counter()
    depth = load(frames[0][1])
    t_load.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    prev = preprocess(depth)
    t_pre.append(time.perf_counter() - t0)
    poses, motion = [pose.copy()], np.eye(4)
    points = [len(prev.points)]
    for row in frames[1:]:
        t0 = time.perf_counter()
        depth = load(row[1])
        t1 = time.perf_counter()
        cur = preprocess(depth)
        t2 = time.perf_counter()
        init = motion if args.init == "velocity" else np.eye(4)
        # source = current frame, target = previous frame: the result maps
        # current-camera points into the previous camera, T_prev_cur.
        res = icp.registration_icp(cur, prev, args.max_corr, init, estimation, criteria)
        t3 = time.perf_counter()
        t_load.append(t1 - t0)
        t_pre.append(t2 - t1)
        t_reg.append(t3 - t2)
        fitness.append(res.fitness)
        rmse_in.append(res.inlier_rmse)
        points.append(len(cur.points))
        motion = np.asarray(res.transformation).copy()
        pose = pose @ motion
        poses.append(pose.copy())
        prev = cur

    out = Path(args.out)
    write_trajectory(out, stamps, poses)

    ms = lambda v: 1000.0 * v  # noqa: E731
    per_frame = [p + r for p, r in zip(t_pre[1:], t_reg)]
    summary = {
        "sequence": str(seq),
        "frames": len(frames),
        "trajectory": str(out),
        "open3d": o3d.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "machine": "%s, %d CPUs" % (cpu_model(), os.cpu_count()),
        "params": dict(voxel=args.voxel, max_corr=args.max_corr, max_depth=args.max_depth,
                       max_iter=args.max_iter, init=args.init),
        "points_median": int(statistics.median(points)),
        "ms_registration": dict(median=ms(statistics.median(t_reg)), mean=ms(statistics.mean(t_reg))),
        "ms_preprocess": dict(median=ms(statistics.median(t_pre)), mean=ms(statistics.mean(t_pre))),
        "ms_frame": dict(median=ms(statistics.median(per_frame)), mean=ms(statistics.mean(per_frame))),
        "ms_png_load": dict(median=ms(statistics.median(t_load)), mean=ms(statistics.mean(t_load))),
        "icp_fitness_median": float(statistics.median(fitness)),
        "icp_inlier_rmse_median": float(statistics.median(rmse_in)),
    }
    if gt is not None:
        est_stamps, est_poses = read_trajectory(out)  # the file as written, as kinreg reads it
        summary["ate_numpy"] = ate(gt[0], gt[1], est_stamps, est_poses)
        kr, why = kinreg_eval(find_kinreg(args.kinreg), gt_path, out)
        if kr:
            summary["ate_kinreg"] = dict(pairs=kr["pairs"], **{k: kr["ate"][k] for k in ("rmse", "mean", "median", "max")})
            summary["rpe_kinreg"] = kr["rpe"]
            summary["ate_rmse_abs_diff"] = abs(kr["ate"]["rmse"] - summary["ate_numpy"]["rmse"])
        else:
            summary["ate_kinreg"] = None
            summary["ate_kinreg_error"] = why

    if args.json:
        print(json.dumps(summary, indent=2))
        return
    p = summary
    print("Open3D %s point-to-plane ICP, frame to frame: %s (%d frames, ~%d points/frame after %.0f mm voxels)"
          % (p["open3d"], seq, p["frames"], p["points_median"], 1000 * args.voxel))
    print("  OMP_NUM_THREADS=%s, %s" % (p["omp_num_threads"], p["machine"]))
    for key, label in (("ms_registration", "registration"), ("ms_preprocess", "preprocess (points, voxels, normals)"),
                       ("ms_frame", "per frame (preprocess + registration)"), ("ms_png_load", "PNG load (not counted)")):
        print("  %-40s median %7.2f ms   mean %7.2f ms" % (label, p[key]["median"], p[key]["mean"]))
    print("  ICP fitness median %.3f, inlier RMSE median %.2f mm"
          % (p["icp_fitness_median"], 1000 * p["icp_inlier_rmse_median"]))
    print("  trajectory: %s" % out)
    if gt is not None:
        a = p["ate_numpy"]
        print("  ATE (numpy, SVD)    rmse %.3f cm  mean %.3f  median %.3f  max %.3f  (%d pairs)"
              % (100 * a["rmse"], 100 * a["mean"], 100 * a["median"], 100 * a["max"], a["pairs"]))
        if p["ate_kinreg"]:
            k = p["ate_kinreg"]
            print("  ATE (kinreg eval)   rmse %.3f cm  mean %.3f  median %.3f  max %.3f  (%d pairs)"
                  % (100 * k["rmse"], 100 * k["mean"], 100 * k["median"], 100 * k["max"], k["pairs"]))
            print("  |ATE numpy - kinreg| = %.2e m" % p["ate_rmse_abs_diff"])
            if p["rpe_kinreg"]:
                r = p["rpe_kinreg"]
                print("  RPE (kinreg eval)   trans rmse %.3f cm per %g s, rot rmse %.3f deg"
                      % (100 * r["trans_rmse"], r["delta"], r["rot_rmse_deg"]))
        else:
            print("  ATE (kinreg eval)   not run: %s" % p["ate_kinreg_error"])


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Open3D's ScalableTSDFVolume on a TUM-layout depth sequence at its ground
truth poses: the peer kinreg mesh runs beside in bench/surface_compare.sh.

Prints one JSON line: frames, integrate seconds (sum over the frames), mesh
extraction seconds, vertices and triangles; writes the mesh as PLY.

    OMP_NUM_THREADS=2 .venv-bench/bin/python bench/surface_open3d.py DIR OUT.ply \\
        [--voxel 0.005] [--truncation-voxels 4] [--max-depth 3]
"""

import argparse
import json
import time
from pathlib import Path

import numpy as np
import open3d as o3d


def read_list(path):
    rows = []
    for line in Path(path).read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            rows.append(line.split())
    return rows


def pose_matrix(row):
    tx, ty, tz, qx, qy, qz, qw = map(float, row[1:8])
    x, y, z, w = qx, qy, qz, qw
    R = np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                  [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                  [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])
    T = np.eye(4)
    T[:3, :3] = R
    T[:3, 3] = [tx, ty, tz]
    return T


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("out")
    ap.add_argument("--voxel", type=float, default=0.005)
    ap.add_argument("--truncation-voxels", type=float, default=4)
    ap.add_argument("--max-depth", type=float, default=3.0)
    a = ap.parse_args()
    d = Path(a.dir)
    for line in (d / "kinreg-intrinsics.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            w, h, fx, fy, cx, cy = (float(v) for v in line.split()[:6])
    K = o3d.camera.PinholeCameraIntrinsic(int(w), int(h), fx, fy, cx, cy)
    gt = {round(float(r[0]), 6): pose_matrix(r) for r in read_list(d / "groundtruth.txt")}
    vol = o3d.pipelines.integration.ScalableTSDFVolume(
        voxel_length=a.voxel, sdf_trunc=a.truncation_voxels * a.voxel,
        color_type=o3d.pipelines.integration.TSDFVolumeColorType.NoColor)
    colour = o3d.geometry.Image(np.zeros((int(h), int(w), 3), np.uint8))
    frames, integrate_s = 0, 0.0
    for stamp, name in ((float(r[0]), r[1]) for r in read_list(d / "depth.txt")):
        T = gt.get(round(stamp, 6))
        if T is None:
            continue
        depth = o3d.io.read_image(str(d / name))
        rgbd = o3d.geometry.RGBDImage.create_from_color_and_depth(
            colour, depth, depth_scale=5000.0, depth_trunc=a.max_depth,
            convert_rgb_to_intensity=False)
        t0 = time.perf_counter()
        vol.integrate(rgbd, K, np.linalg.inv(T))
        integrate_s += time.perf_counter() - t0
        frames += 1
    t0 = time.perf_counter()
    mesh = vol.extract_triangle_mesh()
    mesh_s = time.perf_counter() - t0
    o3d.io.write_triangle_mesh(a.out, mesh)
    print(json.dumps({"peer": "open3d " + o3d.__version__, "frames": frames,
                      "integrate_s": integrate_s, "mesh_s": mesh_s,
                      "vertices": len(mesh.vertices), "triangles": len(mesh.triangles)}))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""A picture of a kinreg mesh (PLY from `kinreg mesh` or `kinreg run --mesh`):
the triangles drawn with matplotlib, shaded by their normals against a light
(or in their vertex colours when the PLY has them), seen from the tracker's
first camera (the world frame's origin, looking along +z, y down), or from
the first pose of a TUM trajectory (--camera, e.g. a sequence's ground
truth for a mesh made with --groundtruth).

    python3 bench/surface_picture.py MESH.ply OUT.png [--camera TUM.txt] [--title TEXT]

Needs NumPy and matplotlib (Debian: python3-numpy python3-matplotlib).
Decimate large meshes first (`kinreg mesh --decimate 4`): matplotlib draws
about 100 000 triangles in a minute.
"""

import argparse

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.collections import PolyCollection  # noqa: E402


def read_ply(path):
    with open(path, "rb") as f:
        header = b""
        while not header.endswith(b"end_header\n"):
            header += f.readline()
        text = header.decode()
        if "binary_little_endian" not in text:
            raise SystemExit(f"{path}: expected binary little-endian PLY (kinreg's)")
        nv = int(text.split("element vertex ")[1].split()[0])
        nf = int(text.split("element face ")[1].split()[0])
        fields = [("p", "<f4", 3)]
        if "property float nx" in text:
            fields.append(("n", "<f4", 3))
        if "property uchar red" in text:
            fields.append(("c", "u1", 3))
        vt = np.dtype(fields)
        v = np.frombuffer(f.read(nv * vt.itemsize), vt)
        ft = np.dtype([("k", "u1"), ("i", "<i4", 3)])
        faces = np.frombuffer(f.read(nf * ft.itemsize), ft)["i"]
    return v, faces


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mesh")
    ap.add_argument("out")
    ap.add_argument("--title", default="")
    ap.add_argument("--camera", help="view from this TUM trajectory's first pose")
    a = ap.parse_args()
    v, faces = read_ply(a.mesh)
    p = v["p"].astype(np.float64)
    if a.camera:
        rows = [r.split() for r in open(a.camera) if r.strip() and not r.startswith("#")]
        tx, ty, tz, x, y, z, w = map(float, rows[0][1:8])
        R = np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                      [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                      [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])
        p = (p - np.array([tx, ty, tz])) @ R          # world -> camera: R^T (p - t)
    tri = p[faces]                               # F x 3 x 3, camera 0's frame
    z = tri[:, :, 2].mean(axis=1)
    keep = (tri[:, :, 2] > 0.1).all(axis=1)       # in front of the first camera
    tri, z = tri[keep], z[keep]
    uv = tri[:, :, :2] / tri[:, :, 2:3]           # pinhole projection
    uv[:, :, 1] *= -1                             # image y down
    n = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    n /= np.linalg.norm(n, axis=1, keepdims=True) + 1e-12
    light = np.array([0.3, -0.5, -0.8])
    light /= np.linalg.norm(light)
    shade = np.clip(np.abs(n @ light), 0.15, 1.0)
    if "c" in v.dtype.names:
        rgb = v["c"][faces].mean(axis=1)[keep] / 255.0 * shade[:, None]
    else:
        rgb = np.repeat(shade[:, None], 3, axis=1) * np.array([0.85, 0.82, 0.75])
    order = np.argsort(-z)                        # far first: the painter's algorithm
    fig, ax = plt.subplots(figsize=(8, 6), dpi=100)
    ax.add_collection(PolyCollection(uv[order], facecolors=rgb[order], edgecolors="none"))
    ax.set_xlim(-0.62, 0.62)
    ax.set_ylim(-0.47, 0.47)
    ax.set_aspect("equal")
    ax.axis("off")
    if a.title:
        ax.set_title(a.title, fontsize=10)
    fig.tight_layout()
    fig.savefig(a.out)
    print(f"{a.out}: {len(order)} triangles drawn of {len(faces)}")


if __name__ == "__main__":
    main()

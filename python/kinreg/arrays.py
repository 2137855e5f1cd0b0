"""kinreg messages as numpy arrays: poses as vectors and 4x4 matrices, model
snapshots as N x 6 arrays (x, y, z, nx, ny, nz). Needs numpy
(pip install "./python[numpy]", or Debian's python3-numpy).

Poses are camera-to-world, T_world_camera: a point p_c in the camera frame
(x right, y down, z forward) is T[:3, :3] @ p_c + T[:3, 3] in the world
frame, the first camera's frame. Quaternions come in x, y, z, w order
(docs/PROTOCOL.md).
"""
from typing import Dict, Iterable, Optional, Set

try:
    import numpy as np
except ImportError as e:  # pragma: no cover - depends on the installation
    raise ImportError('kinreg.arrays needs numpy: pip install "kinreg[numpy]" '
                      "(Debian: apt install python3-numpy)") from e

from .wire import MESH_VERTEX_SIZE, MODEL_POINT_SIZE, FormatError, Message

# One packed model point: three u16 position quanta, two u8 normal bytes.
_MODEL_POINT = np.dtype([("q", "<u2", (3,)), ("n", "u1", (2,))])
assert _MODEL_POINT.itemsize == MODEL_POINT_SIZE
_MESH_VERTEX = np.dtype([("q", "<u2", (3,)), ("n", "u1", (2,)), ("rgba", "u1", (4,))])
assert _MESH_VERTEX.itemsize == MESH_VERTEX_SIZE


def quaternion_matrix(q) -> np.ndarray:
    """Rotation matrices (..., 3, 3) of quaternions (..., 4) in x, y, z, w
    order, normalised first (a wire quaternion is unit to float precision)."""
    q = np.asarray(q, dtype=np.float64)
    q = q / np.linalg.norm(q, axis=-1, keepdims=True)
    x, y, z, w = np.moveaxis(q, -1, 0)
    r = np.empty(q.shape[:-1] + (3, 3))
    r[..., 0, 0] = 1 - 2 * (y * y + z * z)
    r[..., 0, 1] = 2 * (x * y - z * w)
    r[..., 0, 2] = 2 * (x * z + y * w)
    r[..., 1, 0] = 2 * (x * y + z * w)
    r[..., 1, 1] = 1 - 2 * (x * x + z * z)
    r[..., 1, 2] = 2 * (y * z - x * w)
    r[..., 2, 0] = 2 * (x * z - y * w)
    r[..., 2, 1] = 2 * (y * z + x * w)
    r[..., 2, 2] = 1 - 2 * (x * x + y * y)
    return r


def pose_matrix(msg: Message) -> np.ndarray:
    """T_world_camera (4 x 4, float64) of a pose, refine or final message."""
    t = np.eye(4)
    t[:3, :3] = quaternion_matrix(msg["q"])
    t[:3, 3] = msg["t"]
    return t


def covariance_matrix(msg: Message) -> Optional[np.ndarray]:
    """The pose's 6 x 6 covariance (float64) of (x, y, z in metres, rotation
    about the world's x, y, z axes in radians), symmetric, in the order and
    fixed-axis convention of ROS's PoseWithCovariance; None when the message
    has none (a LOST frame, a refine or interpolated pose, a version 1-4
    sender)."""
    upper = msg.get("covariance")
    if upper is None:
        return None
    c = np.zeros((6, 6))
    c[np.triu_indices(6)] = upper
    return c + np.triu(c, 1).T


def pose_arrays(messages: Iterable[Message]) -> Dict[str, np.ndarray]:
    """Poses of many pose/refine/final messages, in their order: "frame" (N,)
    int64, "timestamp" (N,), "t" (N, 3), "q" (N, 4; x, y, z, w) and "T"
    (N, 4, 4) camera-to-world matrices, "covariance" (N, 6, 6; NaN where a
    message has none). Other topics are skipped."""
    poses = [m for m in messages if m["topic"] in ("pose", "refine", "final")]
    t = np.array([m["t"] for m in poses], dtype=np.float64).reshape(-1, 3)
    q = np.array([m["q"] for m in poses], dtype=np.float64).reshape(-1, 4)
    T = np.tile(np.eye(4), (len(poses), 1, 1))
    if poses:
        T[:, :3, :3] = quaternion_matrix(q)
        T[:, :3, 3] = t
    cov = np.full((len(poses), 6, 6), np.nan)
    for i, m in enumerate(poses):
        c = covariance_matrix(m)
        if c is not None:
            cov[i] = c
    return {
        "frame": np.array([m["frame"] for m in poses], dtype=np.int64),
        "timestamp": np.array([m["timestamp"] for m in poses], dtype=np.float64),
        "t": t,
        "q": q,
        "T": T,
        "covariance": cov,
    }


def _unpack_points(packed: np.ndarray, chunk: Message) -> np.ndarray:
    """Quantised positions and octahedral normals (a model point's first 8
    bytes, a mesh vertex's too) -> len x 6 float32."""
    origin = np.asarray(chunk["origin"], dtype=np.float32)
    out = np.empty((len(packed), 6), dtype=np.float32)
    out[:, :3] = origin + np.float32(chunk["scale"]) * packed["q"].astype(np.float32)
    # Octahedral normal: (u, v, 1 - |u| - |v|), the lower half folded over
    # (a zero coordinate counts as positive), then normalised.
    uv = packed["n"].astype(np.float32) / np.float32(127.5) - np.float32(1)
    u, v = uv[:, 0], uv[:, 1]
    z = 1 - np.abs(u) - np.abs(v)
    folded = z < 0
    sign_u = np.where(u >= 0, np.float32(1), np.float32(-1))
    sign_v = np.where(v >= 0, np.float32(1), np.float32(-1))
    u, v = (np.where(folded, (1 - np.abs(v)) * sign_u, u),
            np.where(folded, (1 - np.abs(u)) * sign_v, v))
    n = np.stack([u, v, z], axis=1)
    out[:, 3:] = n / np.linalg.norm(n, axis=1, keepdims=True)
    return out


def model_points(chunk: Message) -> np.ndarray:
    """A model chunk's points (count x 6, float32): position in the world
    frame (m) and unit normal. Positions are within scale / 2 of the sent
    ones, normals within about a degree (docs/PROTOCOL.md)."""
    if chunk.get("topic") != "model":
        raise FormatError(f"model_points needs a model chunk, not a {chunk.get('topic')} message")
    return _unpack_points(np.frombuffer(chunk["points"], dtype=_MODEL_POINT, count=chunk["count"]),
                          chunk)


def mesh_chunk(chunk: Message) -> Dict[str, np.ndarray]:
    """A mesh chunk's own vertices and triangles: "vertices" (n x 6 float32,
    position and unit normal, as model_points), "rgba" (n x 4 uint8; a = 255
    where a colour was measured, 0 where none) and "faces" (m x 3 int64,
    indices into this chunk's vertices)."""
    if chunk.get("topic") != "mesh":
        raise FormatError(f"mesh_chunk needs a mesh chunk, not a {chunk.get('topic')} message")
    packed = np.frombuffer(chunk["vertex_bytes"], dtype=_MESH_VERTEX, count=chunk["vertices"])
    faces = np.frombuffer(chunk["face_bytes"], dtype="<u2", count=3 * chunk["faces"])
    return {"vertices": _unpack_points(packed, chunk), "rgba": packed["rgba"].copy(),
            "faces": faces.astype(np.int64).reshape(-1, 3)}


class MeshSnapshots:
    """Puts the `mesh` topic's chunks together into whole meshes.

    add(chunk) returns the snapshot as a dict of arrays, as mesh_chunk's with
    every chunk's vertices one after another and the triangles' indices
    moved with them (a vertex on a chunk border appears once per chunk),
    once its last chunk arrives, else None. A chunk of a newer snapshot
    first drops the incomplete one (counted in .dropped); .frame is the
    number of frames fused into the last mesh returned.
    """

    def __init__(self) -> None:
        self.frame: Optional[int] = None
        self.dropped = 0
        self._snapshot: Optional[int] = None
        self._parts: Dict[int, Dict[str, np.ndarray]] = {}

    def add(self, chunk: Message) -> Optional[Dict[str, np.ndarray]]:
        snap = chunk["snapshot"]
        if self._snapshot is not None and snap < self._snapshot:
            return None
        if snap != self._snapshot:
            if self._parts:
                self.dropped += 1
            self._snapshot, self._parts = snap, {}
        self._parts[chunk["chunk"]] = mesh_chunk(chunk)
        if len(self._parts) < chunk["chunks"]:
            return None
        parts = [self._parts[i] for i in range(chunk["chunks"])]
        starts = np.cumsum([0] + [len(p["vertices"]) for p in parts[:-1]])
        self._snapshot, self._parts, self.frame = snap + 1, {}, chunk["frame"]
        return {"vertices": np.concatenate([p["vertices"] for p in parts]),
                "rgba": np.concatenate([p["rgba"] for p in parts]),
                "faces": np.concatenate([p["faces"] + s for p, s in zip(parts, starts)])}


class ModelSnapshots:
    """Collects model chunks into whole snapshots.

    add(chunk) returns the snapshot's points (total_points x 6, float32, as
    model_points) once its last missing chunk arrives, else None. A chunk of
    a newer snapshot before that drops the incomplete one (a chunk was lost:
    the next snapshot comes a period later); chunks of older snapshots are
    ignored. .frame is the frame of the last snapshot returned, .dropped
    counts the snapshots given up.
    """

    def __init__(self) -> None:
        self.frame: Optional[int] = None
        self.dropped = 0
        self._last: Optional[int] = None      # the last snapshot returned
        self._snapshot: Optional[int] = None  # the one being collected
        self._points = np.empty((0, 6), dtype=np.float32)
        self._have: Set[int] = set()
        self._chunks = 0

    def add(self, chunk: Message) -> Optional[np.ndarray]:
        snap = chunk["snapshot"]
        if (self._last is not None and snap <= self._last) or (
                self._snapshot is not None and snap < self._snapshot):
            return None
        if snap != self._snapshot:
            if self._snapshot is not None:
                self.dropped += 1
            self._snapshot = snap
            self._points = np.empty((chunk["total_points"], 6), dtype=np.float32)
            self._have = set()
            self._chunks = chunk["chunks"]
        if chunk["chunks"] != self._chunks or chunk["total_points"] != len(self._points):
            raise FormatError(f"model snapshot {snap}: chunk {chunk['chunk']} disagrees with the "
                              "others on its size")
        first = chunk["first_point"]
        self._points[first:first + chunk["count"]] = model_points(chunk)
        self._have.add(chunk["chunk"])
        if len(self._have) < self._chunks:
            return None
        points = self._points
        self._last, self._snapshot, self.frame = snap, None, chunk["frame"]
        self._points, self._have = np.empty((0, 6), dtype=np.float32), set()
        return points


def depth_image(msg: Message) -> np.ndarray:
    """A `depth` message's thumbnail as a (height, width) float32 array of
    metres, 0 where the sensor had no depth."""
    if msg.get("topic") != "depth":
        raise FormatError(f"expected a depth message, got {msg.get('topic')!r}")
    mm = np.frombuffer(msg["samples"], dtype="<u2", count=msg["width"] * msg["height"])
    return (mm.astype(np.float32) / 1000.0).reshape(msg["height"], msg["width"])

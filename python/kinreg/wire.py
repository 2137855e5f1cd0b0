"""Decoding of kinreg's wire payloads (docs/PROTOCOL.md), standard library only.

Little-endian, no padding ("<"): the layouts of docs/PROTOCOL.md byte for byte.
Version 2 changed only the status record (its text grew from 64 to 320
bytes), version 3 too (messages_dropped before the text), version 4 too
(frames_total before the text); version 5 added the pose's covariance to
the pose record (112 -> 200 bytes); all five decode.
Model chunks (version 2 on) decode to their header and packed points; the
points as numbers: kinreg.arrays (numpy).
"""
import math
import struct
from typing import Any, Callable, Dict, List

WIRE_VERSION = 5
WIRE_VERSION_MIN = 1

# pose/refine/final (112 bytes, versions 1 to 4): magic, version, kind, seq, frame,
# timestamp, tx ty tz, qx qy qz qw, state, method, iterations,
# inlier_fraction, rms, condition, latency_ms, reserved; version 5 (200
# bytes): then the covariance's upper triangle (21 f32, row by row) and a
# reserved u32.
POSE_V4 = struct.Struct("<4sHHQQd3d4dBBHffffI")
POSE = struct.Struct("<4sHHQQd3d4dBBHffffI21fI")
POSE_MAGIC = b"KRPS"
# status: magic, version, kind, seq, event, state, reserved, fps, frames_in,
# frames_out, frames_dropped, frames_lost, model_points, [messages_dropped
# from version 3], [frames_total from version 4], text (320 bytes from
# version 2, 64 in version 1).
_STATUS_V4 = struct.Struct("<4sHHQBBHfQQQQQQQ320s")  # version 5's status is version 4's
STATUS = {5: _STATUS_V4, 4: _STATUS_V4, 3: struct.Struct("<4sHHQBBHfQQQQQQ320s"),
          2: struct.Struct("<4sHHQBBHfQQQQQ320s"), 1: struct.Struct("<4sHHQBBHfQQQQQ64s")}
STATUS_MAGIC = b"KRST"
# model chunk header (64 bytes): magic, version, kind, seq, snapshot, frame,
# total_points, first_point, count, chunk, chunks, origin x y z, scale; then
# count points of 8 bytes (3 u16 position quanta, 2 u8 octahedral normal).
MODEL = struct.Struct("<4sHHQQQIIIHH3ff")
MODEL_MAGIC = b"KRMD"
MODEL_POINT_SIZE = 8
MODEL_CHUNK_POINTS = 16384
assert POSE_V4.size == 112 and POSE.size == 200 and STATUS[4].size == 400 and STATUS[3].size == 392 and STATUS[2].size == 384 and STATUS[1].size == 128
assert MODEL.size == 64
# depth thumbnail header (40 bytes, version 4 on): magic, version, kind, seq,
# frame, timestamp, width, height, step, reserved; then width x height u16 mm.
DEPTH = struct.Struct("<4sHHQQdHHHH")
DEPTH_MAGIC = b"KRDP"
DEPTH_MAX_SAMPLES = 65536
assert DEPTH.size == 40
# mesh chunk header (64 bytes, version 5 on): magic, version, kind, seq,
# snapshot, frame, total faces, first face, vertices, faces, chunk, chunks,
# origin, scale; then vertices x 12 bytes and faces x 3 u16.
MESH = struct.Struct("<4sHHQQQIIHHHH3ff")
MESH_MAGIC = b"KRMS"
MESH_VERTEX_SIZE = 12
MESH_FACE_SIZE = 6
assert MESH.size == 64

# Topic names and their kind codes. `model`, `depth` and `mesh` are only sent to
# subscribers that ask for them by name (docs/PROTOCOL.md).
TOPICS = {"pose": 1, "status": 2, "refine": 3, "model": 4, "final": 5, "depth": 6, "mesh": 7}
STATES = ["good", "poor", "lost"]
METHODS = ["newton", "emicp", "softassign", "refine", "predicted", "interpolated"]
EVENTS = ["started", "progress", "stalled", "stopped", "error", "lost", "recovered"]


class FormatError(ValueError):
    """A payload that is not a kinreg message of a version this decoder reads."""


Message = Dict[str, Any]


def _name(table: List[str], i: int) -> str:
    return table[i] if 0 <= i < len(table) else "unknown"


def _check_header(what: str, payload: bytes, layouts: Callable[[int], struct.Struct],
                  magic: bytes) -> tuple:
    if len(payload) not in {layouts(v).size for v in range(WIRE_VERSION_MIN, WIRE_VERSION + 1)}:
        raise FormatError(f"{what} payload has {len(payload)} bytes, expected {layouts(WIRE_VERSION).size}")
    head_magic, version = struct.unpack_from("<4sH", payload)
    if head_magic != magic:
        raise FormatError(f"{what} payload has magic {head_magic!r}, expected {magic!r}")
    if not WIRE_VERSION_MIN <= version <= WIRE_VERSION:
        raise FormatError(f"{what} payload has wire version {version}, this decoder reads "
                          f"{WIRE_VERSION_MIN} to {WIRE_VERSION}")
    layout = layouts(version)
    if len(payload) != layout.size:
        raise FormatError(f"{what} payload has {len(payload)} bytes, expected {layout.size} "
                          f"(wire version {version})")
    return layout.unpack(payload)


def decode_pose(payload: bytes) -> Message:
    """pose, refine or final payload -> dict (the JSON fields of `kinreg sub`)."""
    f = _check_header("pose", payload, lambda v: POSE if v >= 5 else POSE_V4, POSE_MAGIC)
    kind = f[2]
    names = {TOPICS[t]: t for t in ("pose", "refine", "final")}
    if kind not in names:
        raise FormatError(f"pose payload has kind {kind}, expected 1 (pose), 3 (refine) or 5 (final)")
    return {
        "topic": names[kind],
        "seq": f[3],
        "frame": f[4],
        "timestamp": f[5],
        "t": list(f[6:9]),
        "q": list(f[9:13]),  # x, y, z, w; camera-to-world
        "state": _name(STATES, f[13]),
        "method": _name(METHODS, f[14]),
        "iterations": f[15],
        "inlier_fraction": f[16],
        "rms": f[17],
        "condition": f[18],
        "latency_ms": f[19],
        # 6x6 covariance of (x, y, z, rotation about the world's x, y, z), upper
        # triangle row by row (m^2, m rad, rad^2); None when unknown.
        "covariance": _covariance(f[21:42]) if len(f) > 21 else None,
    }


def _covariance(upper: Any) -> Any:
    """The 21 values as a list, or None when any is NaN (unknown)."""
    values = [float(v) for v in upper]
    return None if any(math.isnan(v) for v in values) else values


def decode_status(payload: bytes) -> Message:
    """status payload (version 1 to 5) -> dict."""
    f = _check_header("status", payload, lambda v: STATUS[v], STATUS_MAGIC)
    if f[2] != TOPICS["status"]:
        raise FormatError(f"status payload has kind {f[2]}, expected 2 (status)")
    return {
        "topic": "status",
        "seq": f[3],
        "event": _name(EVENTS, f[4]),
        "state": _name(STATES, f[5]),
        "frames_in": f[8],
        "frames_out": f[9],
        "frames_dropped": f[10],
        "frames_lost": f[11],
        "fps": f[7],
        "model_points": f[12],
        "messages_dropped": f[13] if len(f) >= 15 else 0,  # version 3 on
        "frames_total": f[14] if len(f) == 16 else 0,  # version 4 on; 0 = unknown (live)
        # The last byte of the field is a terminator: a sender that filled it
        # all (not kinreg) yields one byte less, as the C decoder does.
        "text": f[-1][:-1].split(b"\0", 1)[0].decode("utf-8", "replace"),
    }


def decode_model(payload: bytes) -> Message:
    """model chunk payload -> dict: its header fields (those `kinreg sub
    --format json` prints, and "origin") and "points", the chunk's packed
    points as bytes (kinreg.arrays.model_points decodes them)."""
    if len(payload) < MODEL.size:
        raise FormatError(f"model payload has {len(payload)} bytes, expected at least {MODEL.size}")
    (magic, version, kind, seq, snapshot, frame, total, first, count, chunk, chunks, ox, oy, oz,
     scale) = MODEL.unpack_from(payload)
    if magic != MODEL_MAGIC:
        raise FormatError(f"model payload has magic {magic!r}, expected {MODEL_MAGIC!r}")
    if not 2 <= version <= WIRE_VERSION:  # the model topic exists from version 2 on
        raise FormatError(f"model payload has wire version {version}, this decoder reads 2 to "
                          f"{WIRE_VERSION}")
    if kind != TOPICS["model"]:
        raise FormatError(f"model payload has kind {kind}, expected 4 (model)")
    if len(payload) != MODEL.size + MODEL_POINT_SIZE * count:
        raise FormatError(f"model payload has {len(payload)} bytes, expected "
                          f"{MODEL.size + MODEL_POINT_SIZE * count} for {count} points")
    if (chunk >= chunks or first + count > total or count > MODEL_CHUNK_POINTS
            or not (math.isfinite(scale) and scale > 0)):
        raise FormatError(f"model chunk {chunk} of {chunks} (points {first}..+{count} of {total}, "
                          f"scale {scale:g}) does not fit its snapshot")
    return {
        "topic": "model",
        "seq": seq,
        "snapshot": snapshot,
        "frame": frame,
        "total_points": total,
        "first_point": first,
        "count": count,
        "chunk": chunk,
        "chunks": chunks,
        "origin": [ox, oy, oz],  # m, the snapshot's bounding-box minimum
        "scale": scale,          # m per position quantum
        "points": bytes(payload[MODEL.size:]),
    }


# The fields of a model chunk that `kinreg sub --format json` prints (its
# points are for programs, not lines).
MODEL_JSON_FIELDS = ("topic", "seq", "snapshot", "frame", "total_points", "first_point", "count",
                     "chunk", "chunks", "scale")


def decode_depth(payload: bytes) -> Message:
    """depth thumbnail payload -> dict: its header fields, "valid" (samples
    with depth) and "samples", the little-endian u16 millimetres as bytes
    (kinreg.arrays.depth_image gives them as an array of metres)."""
    if len(payload) < DEPTH.size:
        raise FormatError(f"depth payload has {len(payload)} bytes, expected at least {DEPTH.size}")
    magic, version, kind, seq, frame, stamp, width, height, step, _ = DEPTH.unpack_from(payload)
    if magic != DEPTH_MAGIC:
        raise FormatError(f"depth payload has magic {magic!r}, expected {DEPTH_MAGIC!r}")
    if not 4 <= version <= WIRE_VERSION:  # the depth topic exists from version 4 on
        raise FormatError(f"depth payload has wire version {version}, this decoder reads 4 to "
                          f"{WIRE_VERSION}")
    if kind != TOPICS["depth"]:
        raise FormatError(f"depth payload has kind {kind}, expected 6 (depth)")
    n = width * height
    if not 0 < n <= DEPTH_MAX_SAMPLES or len(payload) != DEPTH.size + 2 * n:
        raise FormatError(f"depth payload has {len(payload)} bytes for {width}x{height} samples")
    samples = bytes(payload[DEPTH.size:])
    return {"topic": "depth", "seq": seq, "frame": frame, "timestamp": stamp, "width": width,
            "height": height, "step": step,
            "valid": sum(1 for (v,) in struct.iter_unpack("<H", samples) if v),
            "samples": samples}


# The fields of a depth thumbnail that `kinreg sub --format json` prints.
DEPTH_JSON_FIELDS = ("topic", "seq", "frame", "timestamp", "width", "height", "step", "valid")


def decode_mesh(payload: bytes) -> Message:
    """mesh chunk payload -> dict: its header fields (those `kinreg sub
    --format json` prints, and "origin"), "vertex_bytes" and "face_bytes"
    (kinreg.arrays.mesh_chunk and MeshSnapshots decode them)."""
    if len(payload) < MESH.size:
        raise FormatError(f"mesh payload has {len(payload)} bytes, expected at least {MESH.size}")
    (magic, version, kind, seq, snapshot, frame, total, first, nv, nf, chunk, chunks, ox, oy, oz,
     scale) = MESH.unpack_from(payload)
    if magic != MESH_MAGIC:
        raise FormatError(f"mesh payload has magic {magic!r}, expected {MESH_MAGIC!r}")
    if not 5 <= version <= WIRE_VERSION:  # the mesh topic exists from version 5 on
        raise FormatError(f"mesh payload has wire version {version}, this decoder reads 5 to "
                          f"{WIRE_VERSION}")
    if kind != TOPICS["mesh"]:
        raise FormatError(f"mesh payload has kind {kind}, expected 7 (mesh)")
    size = MESH.size + MESH_VERTEX_SIZE * nv + MESH_FACE_SIZE * nf
    if len(payload) != size:
        raise FormatError(f"mesh payload has {len(payload)} bytes, expected {size} for {nv} "
                          f"vertices and {nf} triangles")
    if chunk >= chunks or first + nf > total or not (math.isfinite(scale) and scale > 0):
        raise FormatError(f"mesh chunk {chunk} of {chunks} (triangles {first}..+{nf} of {total}, "
                          f"scale {scale:g}) does not fit its snapshot")
    at = MESH.size + MESH_VERTEX_SIZE * nv
    face_bytes = bytes(payload[at:])
    if nf and max(struct.unpack(f"<{3 * nf}H", face_bytes)) >= nv:
        raise FormatError(f"mesh chunk {chunk}: a triangle names a vertex past its {nv}")
    return {
        "topic": "mesh",
        "seq": seq,
        "snapshot": snapshot,
        "frame": frame,
        "total_faces": total,
        "first_face": first,
        "vertices": nv,
        "faces": nf,
        "chunk": chunk,
        "chunks": chunks,
        "origin": [ox, oy, oz],  # m, the snapshot's bounding-box minimum
        "scale": scale,          # m per position quantum
        "vertex_bytes": bytes(payload[MESH.size:at]),
        "face_bytes": face_bytes,
    }


# The fields of a mesh chunk that `kinreg sub --format json` prints.
MESH_JSON_FIELDS = ("topic", "seq", "snapshot", "frame", "total_faces", "first_face", "vertices",
                    "faces", "chunk", "chunks", "scale")


def decode(topic: str, payload: bytes) -> Message:
    """Decode a message by its topic frame ("pose", "refine", "final", "status", "model",
    "depth" or "mesh")."""
    if topic not in TOPICS:
        raise FormatError(f"message on unknown topic {topic!r}")
    if topic == "mesh":
        return decode_mesh(payload)
    if topic == "model":
        return decode_model(payload)
    if topic == "depth":
        return decode_depth(payload)
    msg = decode_status(payload) if topic == "status" else decode_pose(payload)
    if msg["topic"] != topic:
        raise FormatError(f"message on topic {topic!r} carries a {msg['topic']} payload")
    return msg


def json_safe(v: Any) -> Any:
    """JSON has no NaN or infinity: null, as `kinreg sub` prints."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, list):
        return [json_safe(x) for x in v]
    return v


class GapCounter:
    """Per-topic sequence numbers -> messages missed before each message."""

    def __init__(self) -> None:
        self.last: Dict[str, int] = {}

    def gap(self, topic: str, seq: int) -> int:
        last = self.last.get(topic)
        self.last[topic] = seq
        # First message of a topic: no gap. A number that does not advance
        # means the publisher restarted: counting starts over.
        return seq - last - 1 if last is not None and seq > last else 0

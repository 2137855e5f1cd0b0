"""Decoding of kinreg's wire payloads (docs/PROTOCOL.md), standard library only.

Little-endian, no padding ("<"): the layouts of docs/PROTOCOL.md byte for byte.
Version 2 changed only the status record (its text grew from 64 to 320
bytes), version 3 too (messages_dropped before the text); all three decode.
"""
import math
import struct

WIRE_VERSION = 3
WIRE_VERSION_MIN = 1

# pose/refine/final (112 bytes, versions 1 to 3): magic, version, kind, seq, frame,
# timestamp, tx ty tz, qx qy qz qw, state, method, iterations,
# inlier_fraction, rms, condition, latency_ms, reserved.
POSE = struct.Struct("<4sHHQQd3d4dBBHffffI")
POSE_MAGIC = b"KRPS"
# status: magic, version, kind, seq, event, state, reserved, fps, frames_in,
# frames_out, frames_dropped, frames_lost, model_points, [messages_dropped
# from version 3], text (320 bytes from version 2, 64 in version 1).
STATUS = {3: struct.Struct("<4sHHQBBHfQQQQQQ320s"), 2: struct.Struct("<4sHHQBBHfQQQQQ320s"),
          1: struct.Struct("<4sHHQBBHfQQQQQ64s")}
STATUS_MAGIC = b"KRST"
assert POSE.size == 112 and STATUS[3].size == 392 and STATUS[2].size == 384 and STATUS[1].size == 128

TOPICS = {"pose": 1, "status": 2, "refine": 3, "final": 5}
STATES = ["good", "poor", "lost"]
METHODS = ["newton", "emicp", "softassign", "refine", "predicted", "interpolated"]
EVENTS = ["started", "progress", "stalled", "stopped", "error", "lost", "recovered"]


class FormatError(ValueError):
    """A payload that is not a kinreg message of a version this decoder reads."""


def _name(table, i):
    return table[i] if 0 <= i < len(table) else "unknown"


def _check_header(what, payload, layouts, magic):
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


def decode_pose(payload):
    """pose, refine or final payload -> dict (the JSON fields of `kinreg sub`)."""
    f = _check_header("pose", payload, lambda v: POSE, POSE_MAGIC)
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
    }


def decode_status(payload):
    """status payload (version 1, 2 or 3) -> dict."""
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
        "messages_dropped": f[13] if len(f) == 15 else 0,  # version 3 on
        # The last byte of the field is a terminator: a sender that filled it
        # all (not kinreg) yields one byte less, as the C decoder does.
        "text": f[-1][:-1].split(b"\0", 1)[0].decode("utf-8", "replace"),
    }


def decode(topic, payload):
    """Decode a message by its topic frame ("pose", "refine", "final" or "status")."""
    if topic not in TOPICS:
        raise FormatError(f"message on unknown topic {topic!r}")
    msg = decode_status(payload) if topic == "status" else decode_pose(payload)
    if msg["topic"] != topic:
        raise FormatError(f"message on topic {topic!r} carries a {msg['topic']} payload")
    return msg


def json_safe(v):
    """JSON has no NaN or infinity: null, as `kinreg sub` prints."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, list):
        return [json_safe(x) for x in v]
    return v


class GapCounter:
    """Per-topic sequence numbers -> messages missed before each message."""

    def __init__(self):
        self.last = {}

    def gap(self, topic, seq):
        last = self.last.get(topic)
        self.last[topic] = seq
        # First message of a topic: no gap. A number that does not advance
        # means the publisher restarted: counting starts over.
        return seq - last - 1 if last is not None and seq > last else 0

#!/usr/bin/env python3
"""Subscribe to a kinreg pose stream and print TUM or JSON lines.

A self-contained example of decoding kinreg's wire format (docs/PROTOCOL.md)
with pyzmq and the standard library's struct module; it prints the same lines
as `kinreg sub`. Needs pyzmq (Debian: apt install python3-zmq).

    python3 kinreg_sub.py tcp://127.0.0.1:5555
    python3 kinreg_sub.py --format json --count 100 tcp://127.0.0.1:5555
"""
import argparse
import json
import math
import struct
import sys

import zmq

WIRE_VERSION = 1

# Little-endian, no padding ("<"): the layouts of docs/PROTOCOL.md byte for byte.
# pose/refine (112 bytes): magic, version, kind, seq, frame, timestamp,
# tx ty tz, qx qy qz qw, state, method, iterations, inlier_fraction, rms,
# condition, latency_ms, reserved.
POSE = struct.Struct("<4sHHQQd3d4dBBHffffI")
POSE_MAGIC = b"KRPS"
# status (128 bytes): magic, version, kind, seq, event, state, reserved, fps,
# frames_in, frames_out, frames_dropped, frames_lost, model_points, text.
STATUS = struct.Struct("<4sHHQBBHfQQQQQ64s")
STATUS_MAGIC = b"KRST"
assert POSE.size == 112 and STATUS.size == 128

TOPICS = {"pose": 1, "status": 2, "refine": 3}
STATES = ["good", "poor", "lost"]
METHODS = ["newton", "emicp", "softassign", "refine", "predicted"]
EVENTS = ["started", "progress", "stalled", "stopped", "error", "lost", "recovered"]


class FormatError(ValueError):
    """A payload that is not a kinreg v1 message."""


def name(table, i):
    return table[i] if 0 <= i < len(table) else "unknown"


def check_header(what, payload, layout, magic):
    if len(payload) != layout.size:
        raise FormatError(f"{what} payload has {len(payload)} bytes, expected {layout.size}")
    fields = layout.unpack(payload)
    if fields[0] != magic:
        raise FormatError(f"{what} payload has magic {fields[0]!r}, expected {magic!r}")
    if fields[1] != WIRE_VERSION:
        raise FormatError(f"{what} payload has wire version {fields[1]}, this decoder reads {WIRE_VERSION}")
    return fields


def decode_pose(payload):
    """pose or refine payload -> dict (the JSON fields of `kinreg sub`)."""
    f = check_header("pose", payload, POSE, POSE_MAGIC)
    kind = f[2]
    if kind not in (TOPICS["pose"], TOPICS["refine"]):
        raise FormatError(f"pose payload has kind {kind}, expected 1 (pose) or 3 (refine)")
    return {
        "topic": "pose" if kind == TOPICS["pose"] else "refine",
        "seq": f[3],
        "frame": f[4],
        "timestamp": f[5],
        "t": list(f[6:9]),
        "q": list(f[9:13]),  # x, y, z, w; camera-to-world
        "state": name(STATES, f[13]),
        "method": name(METHODS, f[14]),
        "iterations": f[15],
        "inlier_fraction": f[16],
        "rms": f[17],
        "condition": f[18],
        "latency_ms": f[19],
    }


def decode_status(payload):
    """status payload -> dict."""
    f = check_header("status", payload, STATUS, STATUS_MAGIC)
    if f[2] != TOPICS["status"]:
        raise FormatError(f"status payload has kind {f[2]}, expected 2 (status)")
    return {
        "topic": "status",
        "seq": f[3],
        "event": name(EVENTS, f[4]),
        "state": name(STATES, f[5]),
        "frames_in": f[8],
        "frames_out": f[9],
        "frames_dropped": f[10],
        "frames_lost": f[11],
        "fps": f[7],
        "model_points": f[12],
        "text": f[13].split(b"\0", 1)[0].decode("utf-8", "replace"),
    }


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


def main():
    ap = argparse.ArgumentParser(description="Print a kinreg pose stream as TUM or JSON lines.")
    ap.add_argument("endpoint", help="e.g. tcp://127.0.0.1:5555")
    ap.add_argument("--format", choices=["tum", "json"], default="tum")
    ap.add_argument("--topics", help="comma-separated pose,refine,status "
                    "(default: pose,status for tum, all for json)")
    ap.add_argument("--count", type=int, default=0, help="exit after N pose/refine messages")
    ap.add_argument("--timeout", type=float, default=0, help="exit after SEC seconds without a message")
    ap.add_argument("--follow", action="store_true",
                    help="keep going after a 'stopped' or 'error' status")
    args = ap.parse_args()

    if args.topics:
        topics = args.topics.split(",")
        bad = [t for t in topics if t not in TOPICS]
        if bad:
            ap.error(f"unknown topic {bad[0]!r} (expected pose, refine, status)")
    else:
        topics = ["pose", "status"] + (["refine"] if args.format == "json" else [])

    ctx = zmq.Context()
    sock = ctx.socket(zmq.SUB)
    sock.setsockopt(zmq.LINGER, 0)
    for t in topics:
        sock.setsockopt(zmq.SUBSCRIBE, t.encode())
    sock.connect(args.endpoint)
    poller = zmq.Poller()
    poller.register(sock, zmq.POLLIN)

    gaps = GapCounter()
    received = {"pose": 0, "refine": 0, "status": 0}
    n_gaps = missed = malformed = poses = 0
    code = 0
    try:
        while True:
            if not poller.poll(args.timeout * 1000 if args.timeout > 0 else None):
                if not any(received.values()):
                    print(f"kinreg_sub.py: no message from {args.endpoint} within {args.timeout:g} s",
                          file=sys.stderr)
                    code = 1
                break
            frames = sock.recv_multipart()
            try:
                if len(frames) != 2:
                    raise FormatError(f"message has {len(frames)} frames, expected 2")
                topic = frames[0].decode("ascii", "replace")
                if topic not in TOPICS:
                    raise FormatError(f"message on unknown topic {topic!r}")
                msg = decode_status(frames[1]) if topic == "status" else decode_pose(frames[1])
                if msg["topic"] != topic:
                    raise FormatError(f"message on topic {topic!r} carries a {msg['topic']} payload")
            except FormatError as e:
                malformed += 1
                print(f"kinreg_sub.py: skipped a malformed message: {e}", file=sys.stderr)
                continue
            msg["gap"] = gaps.gap(topic, msg["seq"])
            received[topic] += 1
            if msg["gap"]:
                n_gaps += 1
                missed += msg["gap"]
                print(f"gap: {msg['gap']} {topic} message{'s' if msg['gap'] != 1 else ''} "
                      f"missed before seq {msg['seq']}", file=sys.stderr)
            if args.format == "json":
                print(json.dumps({k: json_safe(v) for k, v in msg.items()}, separators=(",", ":")))
            elif topic == "status":
                print(f"status: {msg['event']}, tracking {msg['state']}, frames in {msg['frames_in']} "
                      f"out {msg['frames_out']} dropped {msg['frames_dropped']} lost {msg['frames_lost']}, "
                      f"{msg['fps']:.1f} fps, model {msg['model_points']} points"
                      + (f": {msg['text']}" if msg["text"] else ""), file=sys.stderr)
            else:
                print("%.6f %.9f %.9f %.9f %.9f %.9f %.9f %.9f"
                      % (msg["timestamp"], *msg["t"], *msg["q"]))
            sys.stdout.flush()
            if topic != "status":
                poses += 1
                if args.count and poses >= args.count:
                    break
            elif msg["event"] in ("stopped", "error") and not args.follow:
                # A failed run ends with "error" and sends no "stopped" after it.
                if msg["event"] == "error":
                    print(f"kinreg_sub.py: the publisher stopped with an error: {msg['text']}",
                          file=sys.stderr)
                    code = 1
                break
    except KeyboardInterrupt:
        pass  # Ctrl-C is the normal way to end a live subscription
    finally:
        sock.close()
        ctx.term()
    print(f"kinreg_sub.py: received {sum(received.values())} messages ({received['pose']} pose, "
          f"{received['refine']} refine, {received['status']} status), {n_gaps} gap"
          f"{'' if n_gaps == 1 else 's'}, {missed} missed, {malformed} malformed", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())

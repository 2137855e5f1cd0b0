"""kinreg-sub: print a kinreg pose stream as TUM or JSON lines, as `kinreg sub` does."""
import argparse
import json
import math
import os
import sys
from typing import List, Optional

from .connect import add_curve_options, check_curve_options, open_subscriber
from .wire import DEPTH_JSON_FIELDS, MESH_JSON_FIELDS, MODEL_JSON_FIELDS, TOPICS, json_safe


def terminal_text(text: str) -> str:
    """Status text from the network, safe for a terminal: control characters
    (C0, DEL, C1) as \\n \\r \\t \\e or \\xNN and backslashes doubled, as
    `kinreg sub` prints them (bytes that were not UTF-8 arrive as U+FFFD)."""
    named = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\x1b": "\\e", "\\": "\\\\"}
    out = []
    for ch in text:
        o = ord(ch)
        if ch in named:
            out.append(named[ch])
        elif o < 0x20 or o == 0x7f:
            out.append(f"\\x{o:02x}")
        elif 0x80 <= o < 0xa0:
            out.append("".join(f"\\x{b:02x}" for b in ch.encode("utf-8")))
        else:
            out.append(ch)
    return "".join(out)


def main(argv: Optional[List[str]] = None, prog: Optional[str] = None) -> int:
    prog = prog or os.path.basename(sys.argv[0]) or "kinreg-sub"
    ap = argparse.ArgumentParser(prog=prog, description="Print a kinreg pose stream as TUM or JSON lines.")
    ap.add_argument("endpoint", help="e.g. tcp://127.0.0.1:5555")
    ap.add_argument("--format", choices=["tum", "json"], default="tum")
    ap.add_argument("--topics", help="comma-separated pose,refine,status,model,final,depth (model: "
                    "one line per chunk of a model snapshot, its header fields only; depth: one "
                    "line per depth thumbnail, likewise) (default: "
                    "pose,status for tum; for json pose,refine,status,final)")
    ap.add_argument("--count", type=int, default=0, help="exit after N pose/refine/final messages")
    ap.add_argument("--timeout", type=float, default=0, help="exit after SEC seconds without a message")
    ap.add_argument("--final", action="store_true",
                    help="tum: hold the poses and print, once the stream has ended, one line per "
                    "frame in frame order, a 'final' message's pose in place of its frame's")
    ap.add_argument("--follow", action="store_true",
                    help="keep going after a 'stopped' or 'error' status")
    add_curve_options(ap)
    args = ap.parse_args(argv)
    check_curve_options(ap, args)

    if args.final:
        if args.format == "json" or args.topics:
            ap.error("--final prints TUM lines of the topics pose and final: it takes neither "
                     "--format json nor --topics")
        topics = ["pose", "final", "status"]
    elif args.topics:
        topics = args.topics.split(",")
        bad = [t for t in topics if t not in TOPICS]
        if bad:
            ap.error(f"unknown topic {bad[0]!r} (expected pose, refine, status, model, final, depth)")
    else:
        topics = ["pose", "status"] + (["refine", "final"] if args.format == "json" else [])

    sub = open_subscriber(args, topics, prog)
    if sub is None:
        return 2

    received = {topic: 0 for topic in TOPICS}
    n_gaps = missed = poses = replaced = 0
    held = {}  # --final: the newest pose or final message of each frame
    nonfinite = [0]
    code = 0

    def print_tum(msg):
        if not all(math.isfinite(v) for v in (msg["timestamp"], *msg["t"], *msg["q"])):
            # kinreg's trajectory reader rejects nan/inf lines: say so, write none.
            nonfinite[0] += 1
            print(f"{prog}: {msg['topic']} seq {msg['seq']} not written: a value is not finite",
                  file=sys.stderr)
        else:
            print("%.6f %.9f %.9f %.9f %.9f %.9f %.9f %.9f"
                  % (msg["timestamp"], *msg["t"], *msg["q"]))

    try:
        while True:
            msg = sub.receive(args.timeout if args.timeout > 0 else None)
            if msg is None:
                if not any(received.values()):
                    print(f"{prog}: no message from {args.endpoint} within {args.timeout:g} s",
                          file=sys.stderr)
                    code = 1
                break
            topic = msg["topic"]
            if topic in topics:  # status arrives anyway: the stream's end
                received[topic] += 1
                if msg["gap"]:
                    n_gaps += 1
                    missed += msg["gap"]
                    print(f"gap: {msg['gap']} {topic} message{'s' if msg['gap'] != 1 else ''} "
                          f"missed before seq {msg['seq']}", file=sys.stderr)
                if args.format == "json":
                    header = {"model": MODEL_JSON_FIELDS, "depth": DEPTH_JSON_FIELDS,
                              "mesh": MESH_JSON_FIELDS}.get(topic)
                    fields = msg if header is None else {k: msg[k] for k in header + ("gap",)}
                    print(json.dumps({k: json_safe(v) for k, v in fields.items()}, separators=(",", ":")))
                elif topic == "model":
                    print(f"model: snapshot {msg['snapshot']} of frame {msg['frame']}, chunk "
                          f"{msg['chunk'] + 1}/{msg['chunks']}, {msg['count']} of "
                          f"{msg['total_points']} points", file=sys.stderr)
                elif topic == "mesh":
                    print(f"mesh: snapshot {msg['snapshot']} after {msg['frame']} frames, chunk "
                          f"{msg['chunk'] + 1}/{msg['chunks']}, {msg['faces']} of "
                          f"{msg['total_faces']} triangles", file=sys.stderr)
                elif topic == "depth":
                    print(f"depth: frame {msg['frame']}, {msg['width']}x{msg['height']} samples "
                          f"(every {msg['step']} pixels)", file=sys.stderr)
                elif topic == "status":
                    print(f"status: {msg['event']}, tracking {msg['state']}, frames in {msg['frames_in']} "
                          f"out {msg['frames_out']} dropped {msg['frames_dropped']} LOST {msg['frames_lost']}, "
                          f"{msg['fps']:.1f} fps, model {msg['model_points']} points"
                          + (f", publisher dropped {msg['messages_dropped']}" if msg["messages_dropped"] else "")
                          + (f": {terminal_text(msg['text'])}" if msg["text"] else ""), file=sys.stderr)
                elif args.final:
                    before = held.get(msg["frame"])
                    replaced += topic == "final" and before is not None and before["topic"] != "final"
                    held[msg["frame"]] = msg
                else:
                    print_tum(msg)
                sys.stdout.flush()
            if topic in ("pose", "refine", "final"):
                poses += 1
                if args.count and poses >= args.count:
                    break
            elif topic == "status" and msg["event"] in ("stopped", "error") and not args.follow:
                # A failed run ends with "error" and sends no "stopped" after it.
                if msg["event"] == "error":
                    print(f"{prog}: the publisher stopped with an error: {terminal_text(msg['text'])}",
                          file=sys.stderr)
                    code = 1
                break
    except KeyboardInterrupt:
        pass  # Ctrl-C is the normal way to end a live subscription
    finally:
        sub.close()
    if args.final:
        for frame in sorted(held):
            print_tum(held[frame])
        sys.stdout.flush()
        print(f"{prog}: final trajectory of {len(held)} frames, {replaced} of them from final "
              "messages", file=sys.stderr)
    print(f"{prog}: received {sum(received.values())} messages ({received['pose']} pose, "
          f"{received['refine']} refine, {received['status']} status, {received['final']} final), "
          f"{n_gaps} gap"
          f"{'' if n_gaps == 1 else 's'}, {missed} missed, {sub.malformed} malformed"
          + (f", {nonfinite[0]} not finite" if nonfinite[0] else ""), file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())

"""kinreg-bridge: a kinreg pose stream to Foxglove and ROS 2 tools, without ROS.

Subscribes to `kinreg run`'s pose stream and logs every pose to a Foxglove
WebSocket server (`--foxglove`, Foxglove's own SDK, `foxglove-sdk`) and/or an
MCAP recording (`--mcap`, ROS 2's bag format, written by the same SDK):

  /kinreg/pose                  foxglove.PoseInFrame          protobuf
  /kinreg/tf                    foxglove.FrameTransform       protobuf
  /kinreg/pose_with_covariance  geometry_msgs/msg/PoseWithCovarianceStamped  ROS 2 (CDR)
  /tf                           tf2_msgs/msg/TFMessage        ROS 2 (CDR)
  /tf_static                    tf2_msgs/msg/TFMessage        once, at the first pose

Frames (REP 103 / 105): the pose is that of the camera's optical frame
(`camera_optical_frame`: x right, y down, z forward) in kinreg's world
(`kinreg_world`), whose axes are those of the first camera's optical frame.
A static transform places `kinreg_world` in `odom` (REP 105: x forward,
y left, z up), which shares its origin (the first camera's position) and
takes the first camera to have been level; `--odom-frame ''` leaves it out. Each message is stamped with the
sensor's timestamp (the pose's `timestamp`), which is also its MCAP log time.

Covariance: each tracked pose carries its 6x6 covariance (wire version 5,
docs/PROTOCOL.md) of (x, y, z, rotation about X, Y, Z) in kinreg_world, the
order and fixed-axis convention PoseWithCovariance defines, so it goes into
the message as it is. A pose without one (a LOST frame, a version 1-4
sender) is marked "unknown" as sensor_msgs defines it for its covariances:
element 0 is -1, the rest 0.

`ros2 bag info FILE.mcap` / `ros2 bag play` read the ROS 2 topics; Foxglove
reads them all. Needs `pip install "./python[foxglove]"`.
"""
import argparse
import math
import os
import signal
import sys
from typing import Any, Dict, List, Optional, Sequence

from .connect import add_curve_options, check_curve_options, open_subscriber

# The ROS 2 message definitions, concatenated as MCAP's ros2msg encoding
# and `ros2 bag record` write them (the dependencies after a line of '=').
_SEP = "=" * 80 + "\n"
_HEADER = ("MSG: std_msgs/Header\nbuiltin_interfaces/Time stamp\nstring frame_id\n" + _SEP
           + "MSG: builtin_interfaces/Time\nint32 sec\nuint32 nanosec\n")
_VECTOR = "MSG: geometry_msgs/Vector3\nfloat64 x\nfloat64 y\nfloat64 z\n"
_POINT = "MSG: geometry_msgs/Point\nfloat64 x\nfloat64 y\nfloat64 z\n"
_QUAT = "MSG: geometry_msgs/Quaternion\nfloat64 x 0\nfloat64 y 0\nfloat64 z 0\nfloat64 w 1\n"
POSE_WITH_COVARIANCE_STAMPED = (
    "std_msgs/Header header\ngeometry_msgs/PoseWithCovariance pose\n" + _SEP + _HEADER + _SEP
    + "MSG: geometry_msgs/PoseWithCovariance\ngeometry_msgs/Pose pose\nfloat64[36] covariance\n"
    + _SEP + "MSG: geometry_msgs/Pose\ngeometry_msgs/Point position\n"
    "geometry_msgs/Quaternion orientation\n" + _SEP + _POINT + _SEP + _QUAT)
TF_MESSAGE = (
    "geometry_msgs/TransformStamped[] transforms\n" + _SEP
    + "MSG: geometry_msgs/TransformStamped\nstd_msgs/Header header\nstring child_frame_id\n"
    "geometry_msgs/Transform transform\n" + _SEP + _HEADER + _SEP
    + "MSG: geometry_msgs/Transform\ngeometry_msgs/Vector3 translation\n"
    "geometry_msgs/Quaternion rotation\n" + _SEP + _VECTOR + _SEP + _QUAT)

# kinreg_world (optical axes) in odom (body axes, REP 103): optical x = -body y,
# optical y = -body z, optical z = body x; as a quaternion (x, y, z, w).
OPTICAL_IN_BODY = (-0.5, 0.5, -0.5, 0.5)

UNKNOWN_COVARIANCE = [-1.0] + [0.0] * 35


def _stamp(ns: int) -> Dict[str, int]:
    return {"sec": ns // 1_000_000_000, "nanosec": ns % 1_000_000_000}


def _transform(ns: int, parent: str, child: str, t, q) -> Dict[str, Any]:
    return {"header": {"stamp": _stamp(ns), "frame_id": parent}, "child_frame_id": child,
            "transform": {"translation": dict(zip("xyz", t)), "rotation": dict(zip("xyzw", q))}}


class Bridge:
    """Logs poses to the sinks of one foxglove.Context (a WebSocket server,
    an MCAP file, or both). pose(msg) takes a decoded pose message."""

    def __init__(self, world_frame: str = "kinreg_world", camera_frame: str = "camera_optical_frame",
                 odom_frame: str = "odom") -> None:
        import foxglove
        from foxglove.channels import FrameTransformChannel, PoseInFrameChannel
        from mcap_ros2._dynamic import serialize_dynamic

        self.world, self.camera, self.odom = world_frame, camera_frame, odom_frame
        self.context = foxglove.Context()
        self._pose = PoseInFrameChannel("/kinreg/pose", context=self.context)
        self._frame = FrameTransformChannel("/kinreg/tf", context=self.context)

        def ros2(topic: str, name: str, text: str):
            schema = foxglove.Schema(name=name, encoding="ros2msg", data=text.encode())
            channel = foxglove.Channel(topic, schema=schema, message_encoding="cdr", context=self.context)
            return channel, serialize_dynamic(name, text)[name]

        self._cov, self._encode_cov = ros2("/kinreg/pose_with_covariance",
                                           "geometry_msgs/msg/PoseWithCovarianceStamped",
                                           POSE_WITH_COVARIANCE_STAMPED)
        self._tf, self._encode_tf = ros2("/tf", "tf2_msgs/msg/TFMessage", TF_MESSAGE)
        self._tf_static, _ = ros2("/tf_static", "tf2_msgs/msg/TFMessage", TF_MESSAGE)
        self.poses = 0
        self.skipped = 0

    def pose(self, msg: Dict[str, Any]) -> bool:
        """Logs one pose on every topic; False (and nothing logged) when a
        value is not finite, which no consumer can use."""
        from foxglove.messages import FrameTransform, Pose, PoseInFrame, Quaternion, Timestamp, Vector3

        t, q, ts = msg["t"], msg["q"], msg["timestamp"]
        if not all(math.isfinite(v) for v in (ts, *t, *q)):
            self.skipped += 1
            return False
        ns = max(0, round(ts * 1e9))
        stamp = Timestamp(ns // 10**9, ns % 10**9)

        def frame_transform(parent, child, t, q):
            return FrameTransform(timestamp=stamp, parent_frame_id=parent, child_frame_id=child,
                                  translation=Vector3(x=t[0], y=t[1], z=t[2]),
                                  rotation=Quaternion(x=q[0], y=q[1], z=q[2], w=q[3]))

        if self.poses == 0 and self.odom:
            # odom shares the world's origin (the first camera's position); its
            # axes are the first camera's body axes.
            static = _transform(ns, self.odom, self.world, (0, 0, 0), OPTICAL_IN_BODY)
            self._tf_static.log(self._encode_tf({"transforms": [static]}), log_time=ns)
            self._frame.log(frame_transform(self.odom, self.world, (0, 0, 0), OPTICAL_IN_BODY), log_time=ns)
        pose = Pose(position=Vector3(x=t[0], y=t[1], z=t[2]),
                    orientation=Quaternion(x=q[0], y=q[1], z=q[2], w=q[3]))
        self._pose.log(PoseInFrame(timestamp=stamp, frame_id=self.world, pose=pose), log_time=ns)
        self._frame.log(frame_transform(self.world, self.camera, t, q), log_time=ns)
        cov = {"header": {"stamp": _stamp(ns), "frame_id": self.world},
               "pose": {"pose": {"position": dict(zip("xyz", t)), "orientation": dict(zip("xyzw", q))},
                        "covariance": full_covariance(msg.get("covariance"))}}
        self._cov.log(self._encode_cov(cov), log_time=ns)
        self._tf.log(self._encode_tf({"transforms": [_transform(ns, self.world, self.camera, t, q)]}),
                     log_time=ns)
        self.poses += 1
        return True


def full_covariance(upper: Optional[Sequence[float]]) -> List[float]:
    """The 36 row-major values of a symmetric 6x6 from its upper triangle (21,
    row by row), or the "unknown" marker when there is none."""
    if upper is None:
        return list(UNKNOWN_COVARIANCE)
    full = [0.0] * 36
    k = 0
    for i in range(6):
        for j in range(i, 6):
            full[6 * i + j] = full[6 * j + i] = float(upper[k])
            k += 1
    return full


def _host_port(text: str) -> tuple:
    host, _, port = text.rpartition(":")
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not [HOST:]PORT (e.g. 8765 or 0.0.0.0:8765)")
    return host or "127.0.0.1", int(port)


def main(argv: Optional[List[str]] = None, prog: Optional[str] = None) -> int:
    prog = prog or os.path.basename(sys.argv[0]) or "kinreg-bridge"
    ap = argparse.ArgumentParser(
        prog=prog, description="Bridge a kinreg pose stream to Foxglove (WebSocket) and to an MCAP "
        "recording (foxglove.PoseInFrame, foxglove.FrameTransform, ROS 2 "
        "geometry_msgs/PoseWithCovarianceStamped and /tf).",
        epilog="e.g. kinreg run tum:DIR -p tcp://127.0.0.1:5555 & "
        "kinreg-bridge tcp://127.0.0.1:5555 --foxglove 8765 --mcap run.mcap")
    ap.add_argument("endpoint", help="the pose stream, e.g. tcp://127.0.0.1:5555")
    ap.add_argument("--foxglove", metavar="[HOST:]PORT", type=_host_port,
                    help="serve a Foxglove WebSocket on HOST:PORT (HOST default 127.0.0.1; "
                    "port 0 picks a free one)")
    ap.add_argument("--mcap", metavar="FILE", help="record the topics to FILE.mcap (replaced if it exists)")
    ap.add_argument("--world-frame", default="kinreg_world", help="kinreg's world (default: %(default)s)")
    ap.add_argument("--camera-frame", default="camera_optical_frame",
                    help="the camera's optical frame (default: %(default)s)")
    ap.add_argument("--odom-frame", default="odom",
                    help="REP 105 frame to place the world in ('' for none; default: %(default)s)")
    ap.add_argument("--count", type=int, default=0, help="exit after N poses")
    ap.add_argument("--timeout", type=float, default=0, help="exit after SEC seconds without a message")
    ap.add_argument("--follow", action="store_true", help="keep going after a 'stopped' or 'error' status")
    add_curve_options(ap)
    args = ap.parse_args(argv)
    check_curve_options(ap, args)
    if not args.foxglove and not args.mcap:
        ap.error("nothing to bridge to: give --foxglove [HOST:]PORT, --mcap FILE, or both")
    if args.mcap and not os.path.isdir(os.path.dirname(os.path.abspath(args.mcap))):
        ap.error(f"--mcap {args.mcap}: its directory does not exist")

    try:
        import foxglove
        bridge = Bridge(args.world_frame, args.camera_frame, args.odom_frame)
    except ImportError as e:
        print(f"{prog}: {e.name or e} is missing: pip install \"kinreg[foxglove]\" "
              "(from a checkout: pip install \"./python[foxglove]\")", file=sys.stderr)
        return 2
    sub = open_subscriber(args, ["pose"], prog)
    if sub is None:
        return 2
    server = writer = None
    code = 0

    def interrupt(signum, frame):  # SIGTERM as Ctrl-C: the MCAP file is closed whole
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)
    try:
        if args.foxglove:
            host, port = args.foxglove
            try:
                server = foxglove.start_server(name="kinreg", host=host, port=port, context=bridge.context)
            except Exception as e:  # the SDK raises its own error types
                print(f"{prog}: cannot serve Foxglove on {host}:{port}: {e} (choose another "
                      "--foxglove port, or 0 for a free one)", file=sys.stderr)
                return 2
            print(f"{prog}: Foxglove WebSocket on ws://{host}:{server.port}", file=sys.stderr, flush=True)
        if args.mcap:
            try:
                writer = foxglove.open_mcap(args.mcap, allow_overwrite=True, context=bridge.context)
            except Exception as e:
                print(f"{prog}: cannot write {args.mcap}: {e}", file=sys.stderr)
                return 2
        while True:
            msg = sub.receive(args.timeout if args.timeout > 0 else None)
            if msg is None:
                if bridge.poses == 0:
                    print(f"{prog}: no message from {args.endpoint} within {args.timeout:g} s",
                          file=sys.stderr)
                    code = 1
                break
            if msg["topic"] == "pose":
                bridge.pose(msg)
                if args.count and bridge.poses >= args.count:
                    break
            elif msg["event"] in ("stopped", "error") and not args.follow:
                if msg["event"] == "error":
                    print(f"{prog}: the publisher stopped with an error", file=sys.stderr)
                    code = 1
                break
    except KeyboardInterrupt:
        pass  # Ctrl-C ends a live bridge; the MCAP file is still closed whole
    finally:
        sub.close()
        if writer is not None:
            writer.close()
        if server is not None:
            server.stop()
    print(f"{prog}: bridged {bridge.poses} poses" + (f" to {args.mcap}" if args.mcap else "")
          + (f", {bridge.skipped} not finite (left out)" if bridge.skipped else ""), file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())

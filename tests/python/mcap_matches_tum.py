"""Reads an MCAP recording of kinreg-bridge with the mcap library's own
reader and decoders (not the SDK that wrote it) and checks every pose
against the TUM trajectory the run wrote:
    python mcap_matches_tum.py FILE.mcap TRAJ.txt
Prints one line per check; exit 0 only if all hold."""
import math
import sys

from mcap.reader import make_reader
from mcap_protobuf.decoder import DecoderFactory as ProtobufDecoders
from mcap_ros2.decoder import DecoderFactory as Ros2Decoders


def stamp_ns(s):
    """ROS 2 builtin_interfaces/Time or protobuf's google.protobuf.Timestamp."""
    if hasattr(s, "nanosec"):
        return s.sec * 10**9 + s.nanosec
    return s.seconds * 10**9 + s.nanos


def check_covariance(i: int, cov: list) -> int:
    """The pose's covariance as the stream sent it: symmetric, a plausible
    standard deviation on each axis (10 µm to 5 cm, 0.0005° to 3°) — or all
    zero for the first frame, which defines the world, or "unknown" (-1 then
    zeros) for a frame that has none (a LOST frame)."""
    if cov[0] == -1.0 and not any(cov[1:]):
        return 0
    if i == 0 and not any(cov):
        return 0
    if any(abs(cov[6 * a + b] - cov[6 * b + a]) > 1e-12 for a in range(6) for b in range(6)):
        print(f"FAIL pose {i}: covariance not symmetric: {cov}")
        return 1
    sd = [math.sqrt(cov[7 * k]) if cov[7 * k] > 0 else 0.0 for k in range(6)]
    if not (all(1e-5 <= s <= 0.05 for s in sd[:3]) and all(1e-5 <= s <= 0.05 for s in sd[3:])):
        print(f"FAIL pose {i}: covariance's standard deviations {sd} out of range")
        return 1
    return 0


def main(mcap_path, tum_path):
    tum = []
    with open(tum_path) as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                tum.append([float(v) for v in line.split()])
    seen = {}  # topic -> list of (log_time, decoded)
    schemas = {}
    with open(mcap_path, "rb") as f:
        reader = make_reader(f, decoder_factories=[ProtobufDecoders(), Ros2Decoders()])
        for schema, channel, message, decoded in reader.iter_decoded_messages():
            seen.setdefault(channel.topic, []).append((message.log_time, decoded))
            schemas[channel.topic] = (schema.name, schema.encoding, channel.message_encoding)
    expect = {"/kinreg/pose": ("foxglove.PoseInFrame", "protobuf", "protobuf"),
              "/kinreg/tf": ("foxglove.FrameTransform", "protobuf", "protobuf"),
              "/kinreg/pose_with_covariance": ("geometry_msgs/msg/PoseWithCovarianceStamped", "ros2msg", "cdr"),
              "/tf": ("tf2_msgs/msg/TFMessage", "ros2msg", "cdr"),
              "/tf_static": ("tf2_msgs/msg/TFMessage", "ros2msg", "cdr")}
    bad = 0
    for topic, kind in expect.items():
        if schemas.get(topic) != kind:
            print(f"FAIL {topic}: schema {schemas.get(topic)}, expected {kind}")
            bad += 1
    n = len(tum)
    poses = seen.get("/kinreg/pose", [])
    covs = seen.get("/kinreg/pose_with_covariance", [])
    tfs = seen.get("/tf", [])
    camera_tf = [(lt, m) for lt, m in seen.get("/kinreg/tf", []) if m.child_frame_id == "camera_optical_frame"]
    for name, got in (("PoseInFrame", poses), ("PoseWithCovarianceStamped", covs), ("TFMessage", tfs),
                      ("FrameTransform", camera_tf)):
        if len(got) != n:
            print(f"FAIL {name}: {len(got)} messages, the TUM file has {n} poses")
            bad += 1
    worst = 0.0
    for i, row in enumerate(tum[:min(n, len(poses), len(covs), len(tfs), len(camera_tf))]):
        ts, t, q = row[0], row[1:4], row[4:8]
        ns = round(ts * 1e9)
        p = poses[i][1]
        c = covs[i][1]
        tf = tfs[i][1].transforms[0]
        ft = camera_tf[i][1]
        values = [
            (p.pose.position.x, p.pose.position.y, p.pose.position.z, p.pose.orientation.x,
             p.pose.orientation.y, p.pose.orientation.z, p.pose.orientation.w),
            (c.pose.pose.position.x, c.pose.pose.position.y, c.pose.pose.position.z,
             c.pose.pose.orientation.x, c.pose.pose.orientation.y, c.pose.pose.orientation.z,
             c.pose.pose.orientation.w),
            (tf.transform.translation.x, tf.transform.translation.y, tf.transform.translation.z,
             tf.transform.rotation.x, tf.transform.rotation.y, tf.transform.rotation.z, tf.transform.rotation.w),
            (ft.translation.x, ft.translation.y, ft.translation.z, ft.rotation.x, ft.rotation.y,
             ft.rotation.z, ft.rotation.w)]
        for v in values:
            worst = max(worst, max(abs(a - b) for a, b in zip(v, (*t, *q))))
        stamps = [stamp_ns(p.timestamp), stamp_ns(c.header.stamp), stamp_ns(tf.header.stamp),
                  stamp_ns(ft.timestamp), poses[i][0], covs[i][0]]
        # The TUM file keeps microseconds; the stream the sensor's double.
        if any(abs(s - ns) > 1000 for s in stamps):
            print(f"FAIL pose {i}: stamps {stamps}, TUM {ns}")
            bad += 1
        frames = (p.frame_id, c.header.frame_id, tf.header.frame_id, ft.parent_frame_id, tf.child_frame_id)
        if frames != ("kinreg_world",) * 4 + ("camera_optical_frame",):
            print(f"FAIL pose {i}: frames {frames}")
            bad += 1
        bad += check_covariance(i, list(c.pose.covariance))
    # The TUM file holds 9 decimals; the messages the doubles.
    if not worst <= 1e-8:
        print(f"FAIL poses differ from the TUM file by up to {worst:g}")
        bad += 1
    static = seen.get("/tf_static", [])
    if len(static) != 1 or static[0][1].transforms[0].header.frame_id != "odom":
        print(f"FAIL /tf_static: {len(static)} messages, expected one odom -> kinreg_world")
        bad += 1
    else:
        # kinreg_world's axes (optical) in odom's (REP 103 body): x -> -y, y -> -z, z -> x.
        st = static[0][1].transforms[0].transform
        got = (st.translation.x, st.translation.y, st.translation.z,
               st.rotation.x, st.rotation.y, st.rotation.z, st.rotation.w)
        if got != (0, 0, 0, -0.5, 0.5, -0.5, 0.5):
            print(f"FAIL /tf_static: odom -> kinreg_world is {got}")
            bad += 1
    print(f"mcap: {n} poses on {len(seen)} topics, largest difference {worst:.3g}, {bad} failures")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))

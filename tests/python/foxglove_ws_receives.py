"""A Foxglove WebSocket client written from the protocol's specification
(the `websockets` library, protobuf decoded from the schema the server
advertises), not from the SDK that serves: it starts kinreg-bridge with
--foxglove on a free port, subscribes to /kinreg/pose, starts the run, and
checks every PoseInFrame it receives against the run's TUM trajectory.
    python foxglove_ws_receives.py KINREG KINREG_BRIDGE WORKDIR
Prints one summary line; exit 0 only if every pose arrived and matches."""
import base64
import json
import os
import re
import struct
import subprocess
import sys
import time

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from websockets.sync.client import connect

SUBPROTOCOLS = ["foxglove.sdk.v1", "foxglove.websocket.v1"]
FRAMES = 40


def message_class(channel):
    files = descriptor_pb2.FileDescriptorSet.FromString(base64.b64decode(channel["schema"]))
    pool = descriptor_pool.DescriptorPool()
    for f in files.file:
        pool.Add(f)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(channel["schemaName"]))


def main(kinreg, bridge_exe, work):
    endpoint = f"ipc://{work}/fg.ipc"
    traj = f"{work}/fg_traj.txt"
    bridge = subprocess.Popen([bridge_exe, endpoint, "--foxglove", "127.0.0.1:0", "--timeout", "60"],
                              stderr=subprocess.PIPE, text=True)
    run = None
    try:
        line = bridge.stderr.readline()
        m = re.search(r"ws://([\d.]+):(\d+)", line)
        if not m:
            print(f"FAIL the bridge did not say where it serves: {line!r}")
            return 1
        url = f"ws://{m.group(1)}:{m.group(2)}"
        with connect(url, subprotocols=SUBPROTOCOLS, open_timeout=10) as ws:
            channels = {}
            deadline = time.time() + 10
            while "/kinreg/pose" not in channels and time.time() < deadline:
                msg = ws.recv(timeout=10)
                if isinstance(msg, str):
                    op = json.loads(msg)
                    if op.get("op") == "advertise":
                        channels.update({c["topic"]: c for c in op["channels"]})
            if "/kinreg/pose" not in channels:
                print(f"FAIL no /kinreg/pose advertised (got {sorted(channels)})")
                return 1
            pose_channel = channels["/kinreg/pose"]
            PoseInFrame = message_class(pose_channel)
            ws.send(json.dumps({"op": "subscribe", "subscriptions": [{"id": 7, "channelId": pose_channel["id"]}]}))
            time.sleep(0.5)  # the server handles the subscription before the first pose
            run = subprocess.Popen([kinreg, "run", "-q", "-b", "cpu", "-n", str(FRAMES), "--wait-subscriber", "20",
                                    "-p", endpoint, "-t", traj], stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
            got = []
            while len(got) < FRAMES:
                try:
                    msg = ws.recv(timeout=60)
                except TimeoutError:
                    break
                if isinstance(msg, bytes) and msg[0] == 0x01:
                    sub_id, _log_time = struct.unpack_from("<IQ", msg, 1)
                    if sub_id == 7:
                        got.append(PoseInFrame.FromString(msg[13:]))
        if run.wait(60) != 0:
            print(f"FAIL kinreg run exited {run.returncode}")
            return 1
        tum = [[float(v) for v in l.split()] for l in open(traj) if l.strip() and not l.startswith("#")]
        worst, bad = 0.0, 0
        for p, row in zip(got, tum):
            v = (p.pose.position.x, p.pose.position.y, p.pose.position.z, p.pose.orientation.x,
                 p.pose.orientation.y, p.pose.orientation.z, p.pose.orientation.w)
            worst = max(worst, max(abs(a - b) for a, b in zip(v, row[1:8])))
            bad += p.frame_id != "kinreg_world"
        ok = len(got) == len(tum) == FRAMES and worst <= 1e-8 and bad == 0
        print(f"{'ok' if ok else 'FAIL'} foxglove: {len(got)} PoseInFrame of {len(tum)} poses over "
              f"{pose_channel['schemaEncoding']} ({pose_channel['schemaName']}), largest difference "
              f"{worst:.3g}, {bad} in another frame")
        return 0 if ok else 1
    finally:
        if run is not None and run.poll() is None:
            run.kill()
        bridge.terminate()
        bridge.wait(10)


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))

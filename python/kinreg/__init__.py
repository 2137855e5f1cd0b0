"""kinreg: decode and subscribe to the kinreg depth-sensor pose stream.

Poses are camera-to-world (T_world_camera): the world frame is the first
camera frame; camera axes x right, y down, z forward (the optical-frame
convention of ROS REP 103); quaternions in x, y, z, w order as in ROS
geometry_msgs/Pose. See docs/PROTOCOL.md.

kinreg.arrays (needs numpy) gives poses as arrays and 4x4 T_world_camera
matrices, model snapshots as N x 6 arrays, depth thumbnails as images and
the surface's mesh snapshots as vertex and triangle arrays.
"""
from .wire import (EVENTS, METHODS, STATES, TOPICS, WIRE_VERSION, WIRE_VERSION_MIN, FormatError,
                   GapCounter, Message, decode, decode_depth, decode_mesh, decode_model, decode_pose, decode_status,
                   json_safe)

__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    # The subscriber needs pyzmq; the decoders do not, so import it on use.
    if name == "Subscriber":
        from .subscriber import Subscriber
        return Subscriber
    raise AttributeError(f"module 'kinreg' has no attribute {name!r}")


__all__ = ["decode", "decode_depth", "decode_mesh", "decode_model", "decode_pose", "decode_status", "Message", "FormatError", "GapCounter", "Subscriber",
           "json_safe", "WIRE_VERSION", "WIRE_VERSION_MIN", "TOPICS", "STATES", "METHODS", "EVENTS"]

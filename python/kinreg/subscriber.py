"""A ZeroMQ subscriber to a kinreg pose stream (needs pyzmq)."""
from typing import Callable, Iterator, Optional, Sequence
try:
    import zmq
except ImportError as e:  # pragma: no cover - depends on the installation
    raise ImportError("kinreg.Subscriber needs pyzmq: pip install pyzmq "
                      "(Debian: apt install python3-zmq)") from e

from .wire import TOPICS, FormatError, GapCounter, Message, decode


class EndpointError(ValueError):
    """An endpoint ZeroMQ cannot connect to (names it and says why)."""


# Largest frame accepted from the publisher (ZMQ_MAXMSGSIZE), as in the C
# library (KR_WIRE_MAX_MESSAGE): a larger one drops the connection instead
# of being buffered.
MAX_MESSAGE = 64 + 16384 * 8  # a whole model chunk, the largest record


class Subscriber:
    """Connects a SUB socket to `endpoint` for `topics` (default pose,
    refine, status and final; add "model" for model snapshot chunks,
    "depth" for depth thumbnails).

    messages(timeout) yields decoded dicts (see kinreg.decode_pose,
    decode_status and decode_model) with "gap": messages of that topic
    missed just before. kinreg.arrays turns them into numpy arrays.
    Malformed messages are counted in .malformed and skipped; messages on a
    topic this decoder does not know are ignored (docs/PROTOCOL.md).

    CURVE (docs/SECURITY.md): server_key is the publisher's public key,
    public_key and secret_key this subscriber's pair (Z85 str, see
    kinreg.keys.load_public and load_pair); all None for a plain stream.
    """

    def __init__(self, endpoint: str, topics: Sequence[str] = ("pose", "refine", "status", "final"),
                 server_key: Optional[str] = None, public_key: Optional[str] = None,
                 secret_key: Optional[str] = None) -> None:
        bad = [t for t in topics if t not in TOPICS]
        if bad:
            raise ValueError(f"unknown topic {bad[0]!r} (expected pose, refine, status, model, final, depth)")
        self.endpoint = endpoint
        self.malformed = 0
        self.last_error = ""
        self._gaps = GapCounter()
        self._ctx = zmq.Context()
        self._sock = self._ctx.socket(zmq.SUB)
        self._sock.setsockopt(zmq.LINGER, 0)
        self._sock.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE)
        keys = (server_key, public_key, secret_key)
        if any(keys):
            if not all(keys):
                self.close()
                raise ValueError("CURVE needs the publisher's public key and this subscriber's key pair")
            self._sock.setsockopt(zmq.CURVE_SERVERKEY, server_key.encode("ascii"))
            self._sock.setsockopt(zmq.CURVE_PUBLICKEY, public_key.encode("ascii"))
            self._sock.setsockopt(zmq.CURVE_SECRETKEY, secret_key.encode("ascii"))
        for t in topics:
            self._sock.setsockopt(zmq.SUBSCRIBE, t.encode())
        try:
            self._sock.connect(endpoint)
        except zmq.ZMQError as e:
            self.close()
            raise EndpointError(f"cannot connect to {endpoint!r}: {e} (expected e.g. "
                                f"tcp://127.0.0.1:5555 or ipc:///tmp/poses.ipc)") from None
        self._poller = zmq.Poller()
        self._poller.register(self._sock, zmq.POLLIN)

    def receive(self, timeout: Optional[float] = None) -> Optional[Message]:
        """The next well-formed message, or None after `timeout` seconds."""
        while True:
            if not self._poller.poll(None if timeout is None or timeout <= 0 else timeout * 1000):
                return None
            frames = self._sock.recv_multipart()
            if frames[0].decode("ascii", "replace") not in TOPICS:
                continue  # a topic of a later version (e.g. "posex" matches "pose")
            try:
                if len(frames) != 2:
                    raise FormatError(f"message has {len(frames)} frames, expected 2")
                msg = decode(frames[0].decode("ascii", "replace"), frames[1])
            except FormatError as e:
                self.malformed += 1
                self.last_error = str(e)
                if self.on_malformed:
                    self.on_malformed(e)
                continue
            msg["gap"] = self._gaps.gap(msg["topic"], msg["seq"])
            return msg

    on_malformed: Optional[Callable[[FormatError], None]] = None

    def messages(self, timeout: Optional[float] = None) -> Iterator[Message]:
        """Yields messages until `timeout` seconds pass without one."""
        while True:
            msg = self.receive(timeout)
            if msg is None:
                return
            yield msg

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self._ctx is not None:
            self._ctx.term()
            self._ctx = None

    def __enter__(self) -> "Subscriber":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

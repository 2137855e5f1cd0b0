"""CURVE key files as `kinreg keygen` writes them (czmq's certificate text).

NAME.key holds `public-key = "<40 Z85 characters>"`; NAME.key_secret holds
that and `secret-key = "..."` and must be readable by its owner only
(docs/SECURITY.md). The errors name the file and say what to do, as the C
library's do.
"""
import os
import stat
from typing import Dict, Tuple

KEY_LEN = 40


class KeyFileError(ValueError):
    """A key file that is missing, corrupt, or of the wrong kind."""


def _z85_ok(value: str) -> bool:
    if len(value) != KEY_LEN:
        return False
    try:
        from zmq.utils import z85
        return len(z85.decode(value.encode("ascii"))) == 32
    except Exception:  # not ASCII, or a character outside Z85
        return False


def _read_keys(path: str) -> Dict[str, str]:
    try:
        with open(path, "rb") as f:
            data = f.read((1 << 20) + 1)
    except FileNotFoundError:
        raise KeyFileError(f"cannot read key file {path}: No such file or directory "
                           "(make one with kinreg keygen NAME)") from None
    except OSError as e:
        raise KeyFileError(f"cannot read key file {path}: {e.strerror}") from None
    if b"\0" in data:
        raise KeyFileError(f"key file {path} is binary, not a key file (make one with kinreg keygen NAME)")
    keys: Dict[str, str] = {}
    for n, raw in enumerate(data.decode("utf-8", "replace").split("\n"), 1):
        line = raw.strip()
        for kind in ("public-key", "secret-key"):
            if line.startswith(kind):
                value = line[len(kind):].strip()
                value = value[1:].strip() if value.startswith("=") else ""
                if len(value) >= 2 and value[0] in "\"'" and value[-1] == value[0]:
                    value = value[1:-1]
                if not _z85_ok(value):
                    raise KeyFileError(f"key file {path} line {n}: the {kind} is not a CURVE key "
                                       "(expected 40 Z85 characters in quotes, as kinreg keygen writes)")
                keys.setdefault(kind, value)
    return keys


def load_public(path: str) -> str:
    """The public key (Z85 str) of NAME.key or NAME.key_secret."""
    keys = _read_keys(path)
    if "public-key" not in keys:
        raise KeyFileError(f"key file {path} holds no public-key line "
                           "(expected a file written by kinreg keygen)")
    return keys["public-key"]


def load_pair(path: str) -> Tuple[str, str]:
    """(public, secret) Z85 keys of NAME.key_secret, checked to belong together."""
    try:
        mode = os.stat(path).st_mode
        if mode & 0o077:
            raise KeyFileError(f"secret key file {path} is readable by others "
                               f"(mode {stat.S_IMODE(mode):04o}): chmod 600 {path}")
    except FileNotFoundError:
        pass  # _read_keys says so
    keys = _read_keys(path)
    if "secret-key" not in keys:
        raise KeyFileError(f"key file {path} holds no secret-key: give the NAME.key_secret file, not NAME.key")
    import zmq
    public = zmq.curve_public(keys["secret-key"].encode("ascii")).decode("ascii")
    if keys.get("public-key", public) != public:
        raise KeyFileError(f"key file {path}: the public-key does not belong to the secret-key "
                           "(an edited or mixed-up file: make a new pair with kinreg keygen)")
    return public, keys["secret-key"]

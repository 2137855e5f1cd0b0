#!/usr/bin/env python3
"""Subscribe to a kinreg pose stream and print TUM or JSON lines.

A thin wrapper around the installable package in python/ (`pip install
./python` from the repository root gives the same as `kinreg-sub`); run from a
checkout it uses python/ directly. Needs pyzmq: `pip install pyzmq`, or on
Debian `apt install python3-zmq`.

    python3 kinreg_sub.py tcp://127.0.0.1:5555
    python3 kinreg_sub.py --format json --count 100 tcp://127.0.0.1:5555
"""
import os
import sys

try:
    import kinreg.sub  # noqa: F401  (installed with pip install ./python)
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

from kinreg.sub import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(prog="kinreg_sub.py"))

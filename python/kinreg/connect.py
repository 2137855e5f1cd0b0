"""The command-line options and the connection that kinreg-sub and
kinreg-bridge share: an endpoint, CURVE keys, one error line on failure."""
import argparse
import sys
from typing import Optional, Sequence


def add_curve_options(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--curve-server", metavar="FILE",
                    help="the publisher's public key (its NAME.key): encrypted, authenticated stream")
    ap.add_argument("--curve-secret", metavar="FILE",
                    help="this subscriber's key pair (NAME.key_secret from kinreg keygen)")


def check_curve_options(ap: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if bool(args.curve_server) != bool(args.curve_secret):
        ap.error("CURVE needs both --curve-server (the publisher's NAME.key) and "
                 "--curve-secret (this subscriber's NAME.key_secret)")


def open_subscriber(args: argparse.Namespace, topics: Sequence[str], prog: str) -> Optional[object]:
    """A Subscriber to args.endpoint for `topics` (status always, to see the
    stream's end), or None after one line on stderr saying why."""
    try:
        from .subscriber import EndpointError, Subscriber
    except ImportError as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return None
    curve = {}
    if args.curve_server:
        from .keys import KeyFileError, load_pair, load_public
        try:
            public, secret = load_pair(args.curve_secret)
            curve = {"server_key": load_public(args.curve_server), "public_key": public,
                     "secret_key": secret}
        except KeyFileError as e:
            print(f"{prog}: {e}", file=sys.stderr)
            return None
    try:
        sub = Subscriber(args.endpoint, list(dict.fromkeys(list(topics) + ["status"])), **curve)
    except EndpointError as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return None
    sub.on_malformed = lambda e: print(f"{prog}: skipped a malformed message: {e}", file=sys.stderr)
    return sub

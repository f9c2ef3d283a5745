"""Free TCP ports on loopback, for the processes the tests start."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A currently free TCP port on 127.0.0.1 (racy by nature, good enough for tests)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port

"""Free TCP ports on loopback, for the processes the tests start."""

from __future__ import annotations

import socket
from contextlib import ExitStack


def free_port() -> int:
    """A currently free TCP port on 127.0.0.1 (racy by nature, good enough for tests)."""
    (port,) = free_ports(1)
    return port


def free_ports(count: int) -> list[int]:
    """`count` distinct free ports, held open together while chosen: two free_port() calls
    in a row may hand out the same port (etcd then fails to bind its second listener)."""
    with ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in socks]

"""The real node's relay to the API server (tests/node/relay.py): it carries bytes both ways,
and close() frees its port, so the next node of the session (another release's) can listen
there."""

from __future__ import annotations

import socket
import threading

from tests.node.relay import Relay


def test_relays_both_ways_and_frees_its_port_on_close() -> None:
    with socket.create_server(("127.0.0.1", 0)) as target:
        port = target.getsockname()[1]

        def echo() -> None:
            conn, _ = target.accept()
            with conn:
                conn.sendall(conn.recv(64).upper())

        threading.Thread(target=echo, daemon=True).start()
        with socket.create_server(("127.0.0.1", 0)) as probe:
            listen = probe.getsockname()
        relay = Relay(listen, ("127.0.0.1", port))
        with socket.create_connection(listen, timeout=5) as near:
            near.sendall(b"ping")
            assert near.recv(64) == b"PING"
        relay.close()
        with socket.create_server(listen):  # raises EADDRINUSE while the relay still listens
            pass

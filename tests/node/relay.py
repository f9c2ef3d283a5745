"""A TCP relay, for pods that reach the API server as the `kubernetes` Service: 10.0.0.1:443
on this host forwards to the API server on loopback (the e2e control plane has no
kube-proxy). Threads, one pair per connection; close() ends them."""

from __future__ import annotations

import contextlib
import socket
import threading


class Relay:
    def __init__(self, listen: tuple[str, int], target: tuple[str, int]) -> None:
        self.target = target
        self._server = socket.create_server(listen, reuse_port=False)
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, name="relay", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                near, _ = self._server.accept()
            except OSError:
                return  # closed
            try:
                far = socket.create_connection(self.target, timeout=5)
            except OSError:
                near.close()
                continue
            far.settimeout(None)
            with self._lock:
                self._open |= {near, far}
            for source, sink in ((near, far), (far, near)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        for sock in (source, sink):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        with self._lock:
            for sock in (source, sink):
                if sock in self._open:
                    self._open.discard(sock)
                    sock.close()

    def close(self) -> None:
        # close() alone leaves the port listening while _accept's thread is blocked in
        # accept(2), which holds the socket open; shutdown wakes it (EINVAL on Linux).
        with contextlib.suppress(OSError):
            self._server.shutdown(socket.SHUT_RDWR)
        self._server.close()
        with self._lock:
            for sock in self._open:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
            self._open.clear()

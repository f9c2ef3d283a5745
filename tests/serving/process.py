"""A `gpu2dra serve` process for the tests of this folder, with its own certificates."""

from __future__ import annotations

import http.client
import json
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from app.webhook.certs import make_certs
from tests.support.pods import container, gpu
from tests.support.ports import free_port

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Serve:
    port: int
    ca: Path
    log: Path

    def context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca))

    def connect(
        self, port: int | None = None, context: ssl.SSLContext | None = None
    ) -> ssl.SSLSocket:
        raw = socket.create_connection(("127.0.0.1", port or self.port), timeout=10)
        return (context or self.context()).wrap_socket(raw, server_hostname="localhost")


def review(uid: str = "u1") -> bytes:
    pod = {"metadata": {"name": "trainer"}, "spec": {"containers": [container("c", gpu(1))]}}
    return json.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": uid,
                "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "operation": "CREATE",
                "namespace": "ml",
                "object": pod,
            },
        }
    ).encode()


@contextmanager
def serving(tmp_path: Path, *flags: str, port: int | None = None) -> Iterator[Serve]:
    """`gpu2dra serve --offline` on a policy that translates, with `flags`; stopped after."""
    certs = tmp_path / "certs"
    make_certs(["localhost"], ["127.0.0.1"]).write(certs)
    policy = tmp_path / "policy.yaml"
    policy.write_text("defaultMode: enabled\n")
    served = Serve(port or free_port(), certs / "ca.crt", tmp_path / "serve.log")
    with served.log.open("wb") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "app",
                "serve",
                "--offline",
                "--policy",
                str(policy),
                "--port",
                str(served.port),
                "--cert",
                str(certs / "tls.crt"),
                "--key",
                str(certs / "tls.key"),
                *flags,
            ],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", served.port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise AssertionError(served.log.read_text()) from None
                time.sleep(0.1)
        yield served
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            raise


def request(sock: ssl.SSLSocket, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
    """One HTTP/1.1 request on `sock`, kept alive: the status and the body."""
    head = f"{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Length: {len(body)}\r\n"
    sock.sendall(head.encode() + b"Content-Type: application/json\r\n\r\n" + body)
    response = http.client.HTTPResponse(sock, method=method)
    response.begin()
    return response.status, response.read()

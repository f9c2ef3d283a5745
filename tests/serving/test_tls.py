"""A real `gpu2dra serve` process: TLS only, modern protocols, certificates renewed in place."""

from __future__ import annotations

import http.client
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from app.certs import make_certs

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Served:
    port: int
    secret: Path  # laid out like a mounted Secret: tls.crt -> ..data/tls.crt
    cas: Path
    process: subprocess.Popen[bytes]
    generation: int = 0
    log: Path = field(default=Path())

    def context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.cas))

    def renew(self) -> bytes:
        """Swap in a new CA and certificate the way the kubelet updates a Secret volume."""
        self.generation += 1
        bundle = make_certs(["localhost"], ["127.0.0.1"])
        data = self.secret / f"..{self.generation}"
        bundle.write(data)
        with self.cas.open("ab") as cas:
            cas.write(bundle.ca_cert)
        tmp = self.secret / "..data_tmp"
        tmp.symlink_to(data.name)
        os.replace(tmp, self.secret / "..data")
        return bundle.cert


def peer_certificate(served: Served) -> bytes:
    with (
        socket.create_connection(("127.0.0.1", served.port)) as raw,
        served.context().wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return ssl.DER_cert_to_PEM_cert(der).encode()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    secret = tmp_path / "secret"
    secret.mkdir()
    for name in ("tls.crt", "tls.key"):
        (secret / name).symlink_to(f"..data/{name}")
    log = tmp_path / "serve.log"
    port = free_port()
    box = Served(port, secret, tmp_path / "cas.pem", None, log=log)  # type: ignore[arg-type]
    box.renew()
    with log.open("wb") as out:
        box.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "app",
                "serve",
                "--offline",
                "--port",
                str(port),
                "--cert",
                str(secret / "tls.crt"),
                "--key",
                str(secret / "tls.key"),
                "--cert-reload-interval",
                "0.2",
            ],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + 30
    while True:
        try:
            peer_certificate(box)
            break
        except OSError:
            if time.monotonic() > deadline or box.process.poll() is not None:
                raise AssertionError(log.read_text()) from None
            time.sleep(0.1)
    yield box
    box.process.send_signal(signal.SIGTERM)
    assert box.process.wait(timeout=30) == 0, log.read_text()
    shutil.rmtree(secret, ignore_errors=True)


def test_plain_http_is_refused(served: Served) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=5)
    with pytest.raises((http.client.RemoteDisconnected, ConnectionResetError)):
        conn.request("GET", "/healthz")
        conn.getresponse()


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1, ssl.TLSVersion.TLSv1_1])
def test_old_tls_is_refused(served: Served, version: ssl.TLSVersion) -> None:
    context = served.context()
    context.minimum_version = context.maximum_version = version
    context.set_ciphers("ALL:@SECLEVEL=0")
    with socket.create_connection(("127.0.0.1", served.port)) as raw, pytest.raises(ssl.SSLError):
        context.wrap_socket(raw, server_hostname="localhost")


def test_tls_1_2_gets_a_forward_secret_aead_cipher(served: Served) -> None:
    context = served.context()
    context.maximum_version = ssl.TLSVersion.TLSv1_2
    with (
        socket.create_connection(("127.0.0.1", served.port)) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        name, version, _ = tls.cipher()  # type: ignore[misc]
    assert (
        version == "TLSv1.2" and name.startswith("ECDHE-") and ("GCM" in name or "CHACHA" in name)
    )


def test_renewed_certificate_is_served_without_failing_a_request(served: Served) -> None:
    failures: list[BaseException] = []
    done = threading.Event()
    count = 0

    def load(keep: http.client.HTTPSConnection) -> None:
        # `keep` was opened before the renewal and goes on working after it.
        nonlocal count
        while not done.is_set():
            try:
                conn = http.client.HTTPSConnection(
                    "127.0.0.1", served.port, context=served.context(), timeout=5
                )
                conn.request("GET", "/healthz")
                assert conn.getresponse().read() == b"ok\n"
                conn.close()
                keep.request("GET", "/healthz")
                assert keep.getresponse().read() == b"ok\n"
                count += 1
            except BaseException as err:  # every failure is a finding
                failures.append(err)

    threads = []
    for _ in range(2):
        keep = http.client.HTTPSConnection("127.0.0.1", served.port, context=served.context())
        keep.request("GET", "/healthz")
        keep.getresponse().read()
        threads.append(threading.Thread(target=load, args=(keep,)))
    for t in threads:
        t.start()
    try:
        time.sleep(0.5)
        new = served.renew()
        deadline = time.monotonic() + 10
        while peer_certificate(served) != new:
            assert time.monotonic() < deadline, "the renewed certificate was never served"
            time.sleep(0.1)
        time.sleep(0.5)
    finally:
        done.set()
        for t in threads:
            t.join()
    assert failures == []
    assert count > 10

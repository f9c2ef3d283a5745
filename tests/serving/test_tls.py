"""A real `gpu2dra serve` process: TLS only, modern protocols, certificates renewed in place."""

from __future__ import annotations

import hashlib
import http.client
import itertools
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from app.webhook.certs import CertBundle, make_certs
from tests.support.pods import container, gpu
from tests.support.ports import free_port

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Served:
    port: int
    secret: Path  # laid out like a mounted Secret: tls.crt -> ..data/tls.crt
    cas: Path
    process: subprocess.Popen[bytes]
    generation: int = 0
    log: Path = field(default=Path())
    serving: CertBundle | None = None

    def context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.cas))

    def trust_next(self) -> CertBundle:
        """The next CA and certificate; clients made from now on trust the CA, as in a rotation."""
        bundle = make_certs(["localhost"], ["127.0.0.1"])
        with self.cas.open("ab") as cas:
            cas.write(bundle.ca_cert)
        return bundle

    def swap(self, bundle: CertBundle) -> None:
        """Put `bundle` in place the way the kubelet updates a Secret volume."""
        self.generation += 1
        data = self.secret / f"..{self.generation}"
        bundle.write(data)
        tmp = self.secret / "..data_tmp"
        tmp.symlink_to(data.name)
        os.replace(tmp, self.secret / "..data")
        self.serving = bundle


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
    box.swap(box.trust_next())
    policy = tmp_path / "policy.yaml"
    policy.write_text("defaultMode: enabled\n")  # so that /mutate answers with a patch
    with log.open("wb") as out:
        box.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "app",
                "serve",
                "--offline",
                "--policy",
                str(policy),
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


def test_an_idle_connection_outlives_uvicorns_default_keep_alive(served: Served) -> None:
    """The API server reuses an idle webhook connection for up to 90 s and fails a POST sent
    on one the server has closed: an idle connection must stay open past uvicorn's 5 s."""
    conn = http.client.HTTPSConnection("localhost", served.port, context=served.context())
    admit(conn, "first")
    sock = conn.sock
    time.sleep(6)
    admit(conn, "after-idle")  # RemoteDisconnected had the server closed the connection
    assert conn.sock is sock


def metric(served: Served, sample: str) -> float:
    """The value of one sample line of the served process's /metrics."""
    conn = http.client.HTTPSConnection("localhost", served.port, context=served.context())
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    found = [line.rsplit(" ", 1)[1] for line in text.splitlines() if line.startswith(sample + " ")]
    assert len(found) == 1, f"{sample} not in /metrics:\n{text}"
    return float(found[0])


def test_handshakes_count_connections_not_requests(served: Served) -> None:
    """What the API server's reuse of connections saves shows: one handshake for a
    connection that carries many admissions, one more for each new connection."""
    completed = 'gpu2dra_tls_handshakes_total{stage="completed"}'
    before = metric(served, completed)  # its own connection is a handshake too
    conn = http.client.HTTPSConnection("localhost", served.port, context=served.context())
    for i in range(5):
        admit(conn, f"reused-{i}")
    for i in range(2):
        fresh = http.client.HTTPSConnection("localhost", served.port, context=served.context())
        admit(fresh, f"fresh-{i}")
        fresh.close()
    assert metric(served, completed) - before == 1 + 1 + 2  # this scrape's, conn, 2 fresh
    assert metric(served, 'gpu2dra_tls_handshakes_total{stage="accepted"}') >= before + 5


def test_the_event_loop_lag_is_sampled_while_serving(served: Served) -> None:
    count = "gpu2dra_event_loop_lag_seconds_count"
    first = metric(served, count)
    time.sleep(1.1)
    assert metric(served, count) - first >= 3  # sampled every 0.25 s


def test_plain_http_is_refused(served: Served) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=5)
    with pytest.raises((http.client.RemoteDisconnected, ConnectionResetError)):
        conn.request("GET", "/healthz")
        conn.getresponse()


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1, ssl.TLSVersion.TLSv1_1])
# The client offers the deprecated versions on purpose: Python's warning about them is expected.
@pytest.mark.filterwarnings("ignore:ssl.TLSVersion:DeprecationWarning")
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


# Weak suites an ECDSA certificate can serve (with an RSA one, RSA key exchange would be the
# case to add): each is negotiated by a server that allows everything, and refused by gpu2dra.
@pytest.mark.parametrize(
    "ciphers",
    ["ECDHE-ECDSA-AES128-SHA", "ECDHE-ECDSA-AES256-SHA384", "ECDHE-ECDSA-CAMELLIA128-SHA256"],
)
def test_tls_1_2_without_a_modern_cipher_is_refused(served: Served, ciphers: str) -> None:
    """CBC with SHA-1 or SHA-384 MACs, and Camellia: no AEAD."""
    context = served.context()
    context.maximum_version = ssl.TLSVersion.TLSv1_2
    context.set_ciphers(f"{ciphers}:@SECLEVEL=0")
    with socket.create_connection(("127.0.0.1", served.port)) as raw, pytest.raises(ssl.SSLError):
        context.wrap_socket(raw, server_hostname="localhost")


def fingerprint(der: bytes) -> str:
    return hashlib.sha256(der).hexdigest()


def pem_fingerprint(pem: bytes) -> str:
    return fingerprint(ssl.PEM_cert_to_DER_cert(pem.decode()))


def admit(conn: http.client.HTTPSConnection, uid: str) -> None:
    """POST a GPU pod's AdmissionReview to /mutate; the answer is a patch for that uid."""
    pod = {"metadata": {"name": "trainer"}, "spec": {"containers": [container("c", gpu(1))]}}
    review = {
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
    conn.request(
        "POST", "/mutate", json.dumps(review), headers={"Content-Type": "application/json"}
    )
    response = conn.getresponse()
    answer = json.loads(response.read())["response"]
    assert response.status == 200, answer
    assert (answer["uid"], answer["allowed"], answer["patchType"]) == (uid, True, "JSONPatch")


@dataclass(frozen=True)
class Handshake:
    started: float
    finished: float
    fingerprint: str


@dataclass
class Load:
    """Threads that each open a new connection per round (a new handshake), send a review
    and a probe over it, then send a review over a connection they opened at the start."""

    served: Served
    context: ssl.SSLContext
    handshakes: list[Handshake] = field(default_factory=list)
    kept_answers: list[float] = field(default_factory=list)  # when each one came back
    failures: list[BaseException] = field(default_factory=list)
    done: threading.Event = field(default_factory=threading.Event)

    def connect(self) -> http.client.HTTPSConnection:
        conn = http.client.HTTPSConnection(
            "localhost", self.served.port, context=self.context, timeout=10
        )
        started = time.monotonic()
        conn.connect()
        der = conn.sock.getpeercert(binary_form=True)
        assert der is not None
        self.handshakes.append(Handshake(started, time.monotonic(), fingerprint(der)))
        return conn

    def run(self, name: str) -> None:
        try:
            kept = self.connect()
            sock = kept.sock
            for n in itertools.count():
                if self.done.is_set():
                    return
                conn = self.connect()
                admit(conn, f"{name}-new-{n}")
                conn.request("GET", "/healthz")
                assert conn.getresponse().read() == b"ok\n"
                conn.close()
                admit(kept, f"{name}-kept-{n}")
                # http.client reconnects silently: the same socket proves the connection lived.
                assert kept.sock is sock, "the connection opened first was closed"
                self.kept_answers.append(time.monotonic())
        except BaseException as err:  # every failure is a finding
            self.failures.append(err)

    def wait_until(self, condition: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + 30
        while not condition():
            assert not self.failures, self.failures
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            time.sleep(0.05)


def test_every_handshake_after_a_renewal_gets_the_new_certificate(served: Served) -> None:
    assert served.serving is not None
    old = pem_fingerprint(served.serving.cert)
    renewed = served.trust_next()
    new = pem_fingerprint(renewed.cert)
    load = Load(served, served.context())  # trusts the old and the new CA
    threads = [threading.Thread(target=load.run, args=(f"t{i}",)) for i in range(3)]
    for t in threads:
        t.start()
    try:
        load.wait_until(lambda: len(load.kept_answers) >= 10, "requests before the renewal")
        swapped = time.monotonic()
        served.swap(renewed)
        load.wait_until(
            lambda: (
                sum(h.fingerprint == new for h in load.handshakes) >= 30
                and sum(t > swapped for t in load.kept_answers) >= 10
            ),
            "new handshakes and kept-connection requests after the renewal",
        )
    finally:
        load.done.set()
        for t in threads:
            t.join()
    assert load.failures == []
    assert {h.fingerprint for h in load.handshakes} == {old, new}
    # The server has switched once a handshake got the new certificate: a connection started
    # after that must not get the old one.
    first_new = min(h.finished for h in load.handshakes if h.fingerprint == new)
    late = [h for h in load.handshakes if h.fingerprint == old and h.started > first_new]
    assert late == []

"""The bad-input corpus against a real `gpu2dra serve --offline` over TLS: the outcomes the
file names say, bounded time and memory for bombs and oversized bodies, and a worker that is
still alive and answering at the end."""

from __future__ import annotations

import http.client
import re
import signal
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from app.core.catalog import Catalog
from app.core.policy import load_policy
from app.webhook.certs import make_certs
from tests.fuzz.answers import (
    check_answer,
    check_patch,
    check_translate_answer,
    pod_of,
    uid_of,
)
from tests.fuzz.big_pods import BIG_PODS
from tests.support.corpus import CORPUS_POLICY, corpus, outcome_of
from tests.support.ports import free_port
from tests.support.reviews import pod_review, translated

ROOT = Path(__file__).resolve().parents[2]

MiB = 1024 * 1024
MAX_BODY = 7 * MiB  # the served default


@dataclass
class Server:
    port: int
    context: ssl.SSLContext
    process: subprocess.Popen[bytes]
    log: Path

    def connect(self, timeout: float = 30) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(
            "localhost", self.port, context=self.context, timeout=timeout
        )

    def post(
        self, path: str, body: Any, headers: dict[str, str] | None = None
    ) -> tuple[int, bytes]:
        conn = self.connect()
        try:
            conn.request("POST", path, body=body, headers=headers or {})
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    def get(self, path: str, timeout: float = 30) -> tuple[int, bytes]:
        conn = self.connect(timeout)
        try:
            conn.request("GET", path)
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    def peak_rss(self) -> int:
        """VmHWM: the most memory the server process has held so far, in bytes."""
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        match = re.search(r"VmHWM:\s+(\d+) kB", status)
        assert match is not None
        return int(match.group(1)) * 1024


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("served")
    paths = make_certs(["localhost"], ["127.0.0.1"]).write(tmp / "certs")
    log = tmp / "serve.log"
    port = free_port()
    context = ssl.create_default_context(cafile=str(paths["ca.crt"]))
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "app",
                "serve",
                "--offline",
                "--policy",
                str(CORPUS_POLICY),
                "--port",
                str(port),
                "--cert",
                str(paths["tls.crt"]),
                "--key",
                str(paths["tls.key"]),
            ],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    box = Server(port, context, process, log)
    deadline = time.monotonic() + 30
    while True:
        try:
            if box.get("/healthz", timeout=1)[0] == 200:
                break
        except OSError:
            pass
        if time.monotonic() > deadline or process.poll() is not None:
            raise AssertionError(log.read_text())
        time.sleep(0.1)
    yield box
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) == 0, log.read_text()


def assert_alive_and_answering(server: Server) -> None:
    assert server.process.poll() is None, server.log.read_text()
    assert server.get("/healthz") == (200, b"ok\n")
    good = (Path(__file__).parent / "corpus/mutate/patched--plain.json").read_bytes()
    status, body = server.post("/mutate", good)
    answer = check_answer(status, body, "good")
    assert answer.verdict is not None
    assert {**answer.verdict, "patch": ""} == {
        "uid": "good",
        "allowed": True,
        "patchType": "JSONPatch",
        "patch": "",
    }
    pod = pod_of(good)
    assert pod is not None
    policy = load_policy(CORPUS_POLICY)  # what the server was started with, offline
    expected = translated(pod, policy, Catalog.of(policy.device_classes))
    assert check_patch(pod, answer.ops) == expected
    log = server.log.read_text()
    # A fault of gpu2dra's own is logged as "<endpoint> failed" with its traceback.
    faults = ("Traceback", "mutate failed", "validate failed")
    assert not any(fault in log for fault in faults), log[-3000:]


@pytest.mark.timing
def test_bombs_and_oversized_bodies_in_bounded_time_and_memory(server: Server) -> None:
    """First, while the process is fresh: its peak RSS must hardly move."""
    before = server.peak_rss()
    bombs = [p for p in corpus("translate") if "bomb" in p.name or "laughs" in p.name]
    for bomb in bombs:
        start = time.perf_counter()
        status, body = server.post("/translate", bomb.read_bytes())
        assert time.perf_counter() - start < 1.0, bomb.name
        assert status == 400 and b"YAML aliases" in body, body
    for path in ("/translate", "/mutate", "/validate"):
        # By Content-Length: refused before a byte of the body is read.
        conn = server.connect()
        start = time.perf_counter()
        conn.putrequest("POST", path)
        conn.putheader("Content-Length", str(64 * MAX_BODY))
        conn.endheaders(b"{")
        response = conn.getresponse()
        assert (response.status, response.read()) == (413, f"body over {MAX_BODY} bytes\n".encode())
        conn.close()
        # Chunked, no length: refused once the cap is passed.
        status, body = server.post(path, iter([b" " * MiB] * 8))
        assert (status, body) == (413, f"body over {MAX_BODY} bytes\n".encode())
        assert time.perf_counter() - start < 5.0
    growth = server.peak_rss() - before
    assert growth < 32 * MiB, f"peak RSS grew by {growth / MiB:.1f} MiB"
    assert_alive_and_answering(server)


@pytest.mark.timing
@pytest.mark.parametrize("endpoint", ["mutate", "validate", "translate"])
def test_corpus_over_https(server: Server, endpoint: str) -> None:
    for path in corpus(endpoint):
        body = path.read_bytes()
        start = time.perf_counter()
        status, answer = server.post(f"/{endpoint}", body)
        assert time.perf_counter() - start < 3.0, path.name
        if endpoint == "translate":
            result = check_translate_answer(status, answer)
            got = str(status) if result is None else ("warned" if result["warnings"] else "ok")
        else:
            verdict = check_answer(status, answer, uid_of(body))
            got = verdict.outcome
            if endpoint == "mutate" and got == "patched":
                pod = pod_of(body)
                assert pod is not None
                check_patch(pod, verdict.ops)
        assert got == outcome_of(path), (path.name, answer[:300])
    assert_alive_and_answering(server)


@pytest.mark.timing
@pytest.mark.parametrize("name", BIG_PODS)
def test_big_pods_over_https(server: Server, name: str) -> None:
    """Each within the 3 s admission deadline (the chart's timeoutSeconds is 5)."""
    body = pod_review(BIG_PODS[name])
    for endpoint in ("/mutate", "/validate"):
        start = time.perf_counter()
        status, answer = server.post(endpoint, body)
        assert time.perf_counter() - start < 3.0, (endpoint, name)
        check_answer(status, answer)
    assert_alive_and_answering(server)


def big_manifest(containers: int) -> bytes:
    """A plain Deployment list, YAML block style: what a user might well post."""
    pods = "".join(
        f"- kind: Deployment\n  metadata: {{name: d{i}}}\n  spec:\n    template:\n      spec:\n"
        f"        containers:\n        - name: c{i}\n          image: cuda:12\n"
        f"          resources: {{limits: {{nvidia.com/gpu: 1, cpu: '1'}}}}\n"
        for i in range(containers)
    )
    return f"kind: List\nitems:\n{pods}".encode()


@pytest.mark.timing
def test_translate_does_not_stall_the_worker(server: Server) -> None:
    # Large enough to take a while even with libyaml; the work runs off the event loop.
    manifest = big_manifest(30_000)
    assert 5_000_000 < len(manifest) < 7 * 1024 * 1024
    done: list[tuple[int, float]] = []

    def post() -> None:
        start = time.perf_counter()
        status, _ = server.post("/translate", manifest)
        done.append((status, time.perf_counter() - start))

    worker = threading.Thread(target=post)
    worker.start()
    try:
        time.sleep(0.3)  # the body is in; the parse has begun
        start = time.perf_counter()
        assert server.get("/healthz") == (200, b"ok\n")
        waited = time.perf_counter() - start
    finally:
        worker.join()
    assert done[0][0] == 200 and done[0][1] > 3 * waited, done  # long enough to tell
    assert waited < 0.3, f"/healthz waited {waited:.2f}s for a /translate of {len(manifest)} bytes"


def test_still_alive_at_the_end(server: Server) -> None:
    assert_alive_and_answering(server)
    status, body = server.get("/metrics")
    assert status == 200
    assert b'gpu2dra_requests_total{endpoint="mutate",result="bad-request"}' in body, body[:2000]

"""Shared by the exporter scenarios: `gpu2dra exporter` run as a process against the control
plane, scraped over HTTP as Prometheus would."""

from __future__ import annotations

import socket
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.support.cluster import wait_for
from tests.support.controlplane import REPO_ROOT, ControlPlane

Series = list[tuple[dict[str, str], float]]
INFO = "gpu2dra_pod_gpu_info"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Running:
    """A running exporter, reached on loopback; over HTTPS its certificate is not verified,
    as Prometheus scrapes a self-signed one (`insecureSkipVerify`)."""

    def __init__(self, port: int, scheme: str = "http") -> None:
        self.port = port
        self.scheme = scheme

    def get(self, path: str, token: str | None = None) -> tuple[int, str]:
        request = urllib.request.Request(f"{self.scheme}://127.0.0.1:{self.port}{path}")
        if token is not None:
            request.add_header("Authorization", f"Bearer {token}")
        unverified = ssl._create_unverified_context()  # a self-signed certificate
        try:
            with urllib.request.urlopen(request, timeout=5, context=unverified) as r:
                return int(r.status), r.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode()
        except OSError:
            return 0, ""

    def scrape(self, token: str | None = None) -> dict[str, Series]:
        status, body = self.get("/metrics", token)
        assert status == 200
        found: dict[str, Series] = {}
        for family in text_string_to_metric_families(body):
            for sample in family.samples:
                found.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
        return found


@contextmanager
def running_exporter(plane: ControlPlane, log_path: Path, *options: str) -> Iterator[Running]:
    """`python -m app exporter` with the admin kubeconfig and `options`, ready (every cache
    synced); stopped with SIGTERM afterwards, which it must end on cleanly."""
    port = free_port()
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [
                *(sys.executable, "-m", "app", "exporter"),
                *("--kubeconfig", str(plane.kubeconfig), "--host", "127.0.0.1"),
                *("--port", str(port), "--log-format", "text"),
                *options,
            ],
            cwd=REPO_ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        running = Running(port, "https" if "--secure-metrics" in options else "http")
        try:
            wait_for(lambda: running.get("/readyz")[0] == 200, 30, "the exporter's caches to sync")
            yield running
        finally:
            process.terminate()
            code = process.wait(10)
    assert code == 0, log_path.read_text()

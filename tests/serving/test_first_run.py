"""A first run, as docs/reference/endpoints.md#a-first-request shows it: its commands run as
written (on a free port), with examples/admissionreview.json, get the documented answers; and
`serve` without a certificate removes the temporary directory it made one in."""

from __future__ import annotations

import base64
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.ports import free_port
from tests.support.tools import missing

ROOT = Path(__file__).resolve().parents[2]
SECTION = (ROOT / "docs" / "reference" / "endpoints.md").read_text().split("## A first request")[1]


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", SECTION, re.DOTALL)


@pytest.fixture
def shell(tmp_path: Path) -> dict[str, str]:
    """What a user has in a checkout: `gpu2dra` and curl on the PATH, examples/ beside."""
    if shutil.which("curl") is None:
        missing("curl is not installed")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "gpu2dra"
    script.write_text(f'#!/bin/sh\nPYTHONPATH={ROOT} exec {sys.executable} -m app "$@"\n')
    script.chmod(0o755)
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}


def _run(line: str, cwd: Path, env: dict[str, str]) -> str:
    done = subprocess.run(
        ["bash", "-c", line], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, f"{line}\n{done.stderr}"
    return done.stdout


@contextmanager
def _serving(line: str, cwd: Path, env: dict[str, str], port: int) -> Iterator[Path]:
    """The documented `gpu2dra serve ... &` line, run until the block is done; its log."""
    assert line.endswith(" &")
    log = cwd / f"serve-{port}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            shlex.split(line[:-2]), cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT
        )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise AssertionError(log.read_text()) from None
                time.sleep(0.1)
        yield log
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0, log.read_text()


def _lines(block: str, port: int) -> list[str]:
    return [line.replace("8443", str(port)) for line in block.splitlines()]


def test_the_first_request_gets_the_documented_answer_and_says_why(
    shell: dict[str, str], tmp_path: Path
) -> None:
    port = free_port()
    certs, serve, curl = _lines(_blocks("sh")[0], port)
    _run(certs, tmp_path, shell)
    with _serving(serve, tmp_path, shell, port) as log:
        answer = json.loads(_run(curl, tmp_path, shell))
    [documented] = _blocks("json")
    assert answer == json.loads(documented)
    review = json.loads((ROOT / "examples" / "admissionreview.json").read_text())
    assert answer["response"]["uid"] == review["request"]["uid"]
    said = [json.loads(line)["msg"] for line in log.read_text().splitlines()]
    assert any(m.startswith("offline: no namespace's labels are read") for m in said)


def test_a_policy_that_enables_gets_a_patch_and_translate_translates(
    shell: dict[str, str], tmp_path: Path
) -> None:
    port = free_port()
    first, enabled, _ = _blocks("sh")[:3]
    _run(_lines(first, port)[0], tmp_path, shell)
    policy, serve, curl = _lines(enabled, port)
    _run(policy, tmp_path, shell)
    [translate] = _lines(_blocks("sh")[2], port)
    with _serving(serve, tmp_path, shell, port):
        response = json.loads(_run(curl, tmp_path, shell))["response"]
        translated = list(yaml.safe_load_all(_run(translate, tmp_path, shell)))
    assert response["allowed"] and response["patchType"] == "JSONPatch"
    ops: list[dict[str, Any]] = json.loads(base64.b64decode(response["patch"]))
    paths = {op["path"] for op in ops}
    assert paths == {
        "/spec/containers/0/resources",
        "/spec/resourceClaims",
        "/metadata/annotations",
    }
    assert [d["kind"] for d in translated] == ["ResourceClaimTemplate", "Deployment"]


def test_serve_removes_the_certificate_directory_it_made(
    shell: dict[str, str], tmp_path: Path
) -> None:
    port = free_port()
    with _serving(f"gpu2dra serve --offline --port {port} &", tmp_path, shell, port) as log:
        said = [json.loads(line)["msg"] for line in log.read_text().splitlines()]
        [where] = [m for m in said if m.startswith("self-signed certificate; CA bundle at ")]
        ca = Path(where.split(" at ")[1].split(" ")[0])
        assert ca.is_file() and ca.parent.name.startswith("gpu2dra-certs-")
    assert not ca.parent.exists()

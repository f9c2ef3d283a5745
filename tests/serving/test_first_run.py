"""A first run of `gpu2dra serve`: without a certificate it removes the temporary directory
it made one in."""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support.ports import free_port

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def shell(tmp_path: Path) -> dict[str, str]:
    """What a user has in a checkout: `gpu2dra` on the PATH, examples/ beside."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "gpu2dra"
    script.write_text(f'#!/bin/sh\nPYTHONPATH={ROOT} exec {sys.executable} -m app "$@"\n')
    script.chmod(0o755)
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}


def _run(line: str, cwd: Path, env: dict[str, str]) -> str:
    done = subprocess.run(
        ["bash", "-c", line],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
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
            shlex.split(line[:-2]),
            cwd=cwd,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
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

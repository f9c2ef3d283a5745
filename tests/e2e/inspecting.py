"""Shared by the doctor, explain and report scenarios: the real CLI, run as a user would."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.e2e.controlplane import REPO_ROOT, ControlPlane

Obj = dict[str, Any]
MODE = "gpu2dra.io/migration"


def gpu2dra(
    kubeconfig: Path, *args: str, check: int | None = None
) -> subprocess.CompletedProcess[str]:
    """`python -m app ARGS --kubeconfig ...`; `check`: the exit status it must end with."""
    done = subprocess.run(
        [sys.executable, "-m", "app", *args, "--kubeconfig", str(kubeconfig)],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        check=False,
        timeout=120,
    )
    assert "Traceback" not in done.stderr, done.stderr
    if check is not None:
        assert done.returncode == check, f"exit {done.returncode}: {done.stdout}{done.stderr}"
    return done


def doctor(plane: ControlPlane, *args: str) -> tuple[int, dict[str, Obj]]:
    """Exit status and checks by name of `gpu2dra doctor -o json`."""
    code, checks, _ = doctor_with_source(plane, *args)
    return code, checks


def doctor_with_source(plane: ControlPlane, *args: str) -> tuple[int, dict[str, Obj], str]:
    """... and where the policy it judged by came from."""
    done = gpu2dra(plane.kubeconfig, "doctor", "-o", "json", *args)
    assert done.returncode in (0, 1), done.stderr
    body = json.loads(done.stdout)
    assert body["ok"] == (done.returncode == 0)
    return done.returncode, {c["name"]: c for c in body["checks"]}, body["policy"]

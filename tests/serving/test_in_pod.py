"""`gpu2dra serve` in a pod never falls back to the policy alone: without an in-cluster client
it exits, saying why, instead of admitting pods untranslated behind a Ready probe."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.controlplane import REPO_ROOT
from tests.support.ports import free_port


def serve(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_")}
    return subprocess.run(
        [sys.executable, "-m", "app", "serve", "--port", str(free_port()), *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO_ROOT,
        env={**clean, "KUBECONFIG": str(tmp_path / "none"), "HOME": str(tmp_path), **env},
    )


def test_in_a_pod_without_its_service_account_serve_exits_saying_why(tmp_path: Path) -> None:
    done = serve(tmp_path, KUBERNETES_SERVICE_HOST="10.0.0.1", KUBERNETES_SERVICE_PORT="443")
    assert done.returncode == 1
    assert done.stderr.startswith("gpu2dra: serve: running in a pod, but no service account: ")
    assert "pods would be admitted untranslated (--offline serves the policy alone)" in done.stderr
    assert "Traceback" not in done.stdout + done.stderr

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import NoReturn

import pytest

from tests.chart.crds import Obj, crd_schemas
from tests.e2e.controlplane import BUILD_HINT, find_bin_dir


def missing(message: str) -> NoReturn:
    """Fail under CI, where every tool must be there; skip elsewhere."""
    if os.environ.get("CI") == "true":
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def helm() -> Path:
    path = find_bin_dir() / "helm"
    if not os.access(path, os.X_OK):
        missing(f"chart tests need helm: run {BUILD_HINT} (missing: {path})")
    return path


@pytest.fixture(scope="session")
def crds() -> dict[tuple[str, str], Obj]:
    go = shutil.which("go")
    if go is None:
        missing("checking cert-manager and ServiceMonitor objects needs Go (go mod download)")
    return crd_schemas(go)

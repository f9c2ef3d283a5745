from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.chart.crds import Obj, crd_schemas, go_binary
from tests.e2e.controlplane import BUILD_HINT, find_bin_dir


@pytest.fixture(scope="session")
def helm() -> Path:
    path = find_bin_dir() / "helm"
    if not os.access(path, os.X_OK):
        message = f"chart tests need helm: run {BUILD_HINT} (missing: {path})"
        if os.environ.get("CI") == "true":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return path


@pytest.fixture(scope="session")
def crds() -> dict[tuple[str, str], Obj]:
    return crd_schemas(go_binary())

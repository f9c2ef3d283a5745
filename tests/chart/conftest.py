from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.chart.crds import Obj, crd_schemas, go_binary
from tests.e2e.conftest import missing_tools
from tests.e2e.controlplane import find_bin_dir


@pytest.fixture(scope="session")
def helm() -> Path:
    bin_dir = find_bin_dir()
    verdict = missing_tools(
        bin_dir,
        [] if os.access(bin_dir / "helm", os.X_OK) else ["helm"],
        go=shutil.which("go") is not None,
        ci=os.environ.get("CI") == "true",
    )
    if verdict is not None:
        action, message = verdict
        if action == "skip":
            pytest.skip(message)
        pytest.fail(message, pytrace=False)
    return bin_dir / "helm"


@pytest.fixture(scope="session")
def crds() -> dict[tuple[str, str], Obj]:
    return crd_schemas(go_binary())

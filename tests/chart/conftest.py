from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.controlplane import find_bin_dir
from tests.support.crds import Obj, crd_schemas, go_binary
from tests.support.tools import require_tools


@pytest.fixture(scope="session")
def helm() -> Path:
    bin_dir = find_bin_dir()
    require_tools(bin_dir, [] if os.access(bin_dir / "helm", os.X_OK) else ["helm"])
    return bin_dir / "helm"


@pytest.fixture(scope="session")
def crds() -> dict[tuple[str, str], Obj]:
    return crd_schemas(go_binary())

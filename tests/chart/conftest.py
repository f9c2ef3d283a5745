from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from tests.support.controlplane import find_bin_dir
from tests.support.crds import Obj, crd_schemas, go_binary, module_dir, strict
from tests.support.tools import require_tools

# The PrometheusRule CRD, beside the ones tests/support/crds.py reads: from the same module.
PROMETHEUS_OPERATOR = "github.com/prometheus-operator/prometheus-operator@v0.85.0"
PROMETHEUS_RULE_CRD = "example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml"


@pytest.fixture(scope="session")
def helm() -> Path:
    bin_dir = find_bin_dir()
    require_tools(bin_dir, [] if os.access(bin_dir / "helm", os.X_OK) else ["helm"])
    return bin_dir / "helm"


@pytest.fixture(scope="session")
def crds() -> dict[tuple[str, str], Obj]:
    go = go_binary()
    schemas = crd_schemas(go)
    path = module_dir(go, PROMETHEUS_OPERATOR) / PROMETHEUS_RULE_CRD
    spec = yaml.safe_load(path.read_text())["spec"]
    for version in spec["versions"]:
        if version["served"]:
            key = (f"{spec['group']}/{version['name']}", spec["names"]["kind"])
            schemas[key] = strict(version["schema"]["openAPIV3Schema"])
    return schemas

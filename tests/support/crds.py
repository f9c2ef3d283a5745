"""The CRDs of the custom kinds the chart renders (cert-manager's Issuer and Certificate, the
Prometheus operator's ServiceMonitor), read from their Go modules and checked strictly.

`go mod download` keeps each pinned module in the Go module cache, so the CRDs are fetched once
per machine. An object is checked against its CRD's openAPIV3Schema as JSON schema, with unknown
fields rejected the way `fieldValidation=Strict` rejects them. The CEL rules
(`x-kubernetes-validations`) are not run.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import yaml
from jsonschema import Draft7Validator, ValidationError  # type: ignore[import-untyped]

from tests.support.tools import missing
from tests.support.validation import K8S_VERSIONS

Obj = dict[str, Any]
# module@version, the folder holding its CRDs, and the CRD files the chart needs.
SOURCES = (
    (
        "github.com/cert-manager/cert-manager@v1.21.2",
        "deploy/crds",
        ("cert-manager.io_certificates.yaml", "cert-manager.io_issuers.yaml"),
    ),
    (
        "github.com/prometheus-operator/prometheus-operator@v0.85.0",
        "example/prometheus-operator-crd",
        (
            "monitoring.coreos.com_servicemonitors.yaml",
            "monitoring.coreos.com_prometheusrules.yaml",
        ),
    ),
)
CUSTOM_GROUPS = {"cert-manager.io", "monitoring.coreos.com"}
__all__ = [
    "ValidationError",
    "crd_files",
    "crd_schemas",
    "go_binary",
    "is_custom",
    "validate_custom",
]


def is_custom(doc: Obj) -> bool:
    return str(doc["apiVersion"]).split("/")[0] in CUSTOM_GROUPS


def go_binary() -> str:
    """The go command; without it the test fails under CI and is skipped elsewhere."""
    go = shutil.which("go")
    if go is None:
        missing("checking cert-manager and ServiceMonitor objects needs Go (go mod download)")
    return go


def module_dir(go: str, module: str) -> Path:
    """The module's folder in the Go module cache, downloaded if it is not there yet."""
    done = subprocess.run(
        [go, "mod", "download", "-json", module],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    if done.returncode != 0:
        raise RuntimeError(f"go mod download {module} failed: {done.stdout}{done.stderr}")
    return Path(json.loads(done.stdout)["Dir"])


def strict(node: Any) -> Any:
    """An OpenAPI v3 structural schema as JSON schema that rejects unknown fields."""
    if isinstance(node, list):
        return [strict(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: Obj = {}
    for key, value in node.items():
        if key == "properties":
            out[key] = {name: strict(sub) for name, sub in value.items()}
        elif not key.startswith("x-kubernetes-"):
            out[key] = strict(value)
    # A nullable field may be sent as null; an object may keep unknown fields only when marked.
    if out.pop("nullable", False) and "type" in out:
        out["type"] = [out["type"], "null"]
    if "properties" in node and not node.get("x-kubernetes-preserve-unknown-fields"):
        out.setdefault("additionalProperties", False)
    return out


def crd_files(go: str) -> list[Path]:
    """The CRD files of the custom kinds, from the pinned modules."""
    return [
        module_dir(go, module) / folder / name
        for module, folder, names in SOURCES
        for name in names
    ]


def crd_schemas(go: str) -> dict[tuple[str, str], Obj]:
    """(apiVersion, kind) -> strict schema, for every served version of each CRD."""
    schemas: dict[tuple[str, str], Obj] = {}
    for path in crd_files(go):
        spec = yaml.safe_load(path.read_text())["spec"]
        for version in spec["versions"]:
            if version["served"]:
                key = (f"{spec['group']}/{version['name']}", spec["names"]["kind"])
                schemas[key] = strict(version["schema"]["openAPIV3Schema"])
    return schemas


def validate_custom(doc: Obj, schemas: dict[tuple[str, str], Obj]) -> None:
    """Raise when `doc` does not match its CRD, or no CRD serves its apiVersion and kind."""
    schema = schemas.get((doc["apiVersion"], doc["kind"]))
    if schema is None:
        raise LookupError(f"no CRD serves {doc['apiVersion']} {doc['kind']}")
    Draft7Validator(schema).validate(doc)
    # A CRD leaves metadata open; the API server checks it as it checks any ObjectMeta.
    carrier = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": doc["metadata"]}
    for version in K8S_VERSIONS:
        kubernetes_validate.validate(carrier, version, strict=True)

"""kubectl's habits against the real control plane: --context picks the kubeconfig's context
and, through it, -n's default."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from tests.e2e.inspecting import gpu2dra
from tests.support.cluster import gpu_pod
from tests.support.controlplane import ControlPlane

DEAD = "https://127.0.0.1:1"  # nothing listens there


def two_contexts(plane: ControlPlane, path: Path, namespace: str) -> Path:
    """The admin kubeconfig as context `lab` (its namespace `namespace`), and a current
    context `gone` whose API server does not answer."""
    config = yaml.safe_load(plane.kubeconfig.read_text())
    [cluster], [context] = config["clusters"], config["contexts"]
    config["clusters"].append({"name": "gone", "cluster": {**cluster["cluster"], "server": DEAD}})
    config["contexts"] = [
        {"name": "lab", "context": {**context["context"], "namespace": namespace}},
        {"name": "gone", "context": {**context["context"], "cluster": "gone"}},
    ]
    config["current-context"] = "gone"
    path.write_text(yaml.safe_dump(config))
    return path


def test_the_context_chooses_the_cluster_and_the_namespace(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    control_plane.create(namespace, gpu_pod("train", {"nvidia.com/gpu": 2}))
    kubeconfig = two_contexts(control_plane, tmp_path / "config", namespace)
    done = gpu2dra(kubeconfig, "report", "--context", "lab", "-o", "json", check=0)
    report = json.loads(done.stdout)
    assert [n["name"] for n in report["namespaces"]] == [namespace]
    assert [w["name"] for w in report["namespaces"][0]["workloads"]] == ["train"]
    # Its current context is the one whose API server is gone.
    gone = gpu2dra(kubeconfig, "report", check=1)
    assert f"cannot reach the API server at {DEAD}" in gone.stderr
    missing = gpu2dra(kubeconfig, "doctor", "--context", "staging", check=1)
    assert missing.stderr.strip().endswith("has no context named 'staging'")

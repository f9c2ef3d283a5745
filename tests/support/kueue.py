"""Kueue's ConfigMap and Deployment as its v0.17.1 release installs them, for tests of what
gpu2dra reads of them (the Deployment runs no replica: the manager itself does not run)."""

from __future__ import annotations

from typing import Any

from tests.support.controlplane import ControlPlane

Obj = dict[str, Any]
KUEUE_CONFIG = """apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
integrations:
  frameworks: [batch/job, pod, deployment]
"""
KUEUE_MAPPED = (
    KUEUE_CONFIG
    + """resources:
  deviceClassMappings:
  - {name: whole-gpus, deviceClassNames: [gpu.nvidia.com]}
  - {name: mig-slices, deviceClassNames: [mig.nvidia.com]}
"""
)
GATE_ON = "--feature-gates=DynamicResourceAllocation=true"


def kueue_objects(config: str, *args: str) -> Obj:
    labels = {"control-plane": "controller-manager"}
    manager = {"name": "manager", "image": "registry.k8s.io/kueue/kueue:v0.17.1"}
    return {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kueue-system"}},
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "kueue-manager-config", "namespace": "kueue-system"},
                "data": {"controller_manager_config.yaml": config},
            },
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "kueue-controller-manager", "namespace": "kueue-system"},
                "spec": {
                    "replicas": 0,
                    "selector": {"matchLabels": labels},
                    "template": {
                        "metadata": {"labels": labels},
                        "spec": {"containers": [{**manager, "args": list(args)}]},
                    },
                },
            },
        ],
    }


def remove_kueue(plane: ControlPlane) -> None:
    """Kueue's objects gone at once (the empty namespace stays: deleting it takes a while)."""
    plane.kubectl(
        "delete",
        "-n",
        "kueue-system",
        "deployment/kueue-controller-manager",
        "configmap/kueue-manager-config",
        "--ignore-not-found",
    )

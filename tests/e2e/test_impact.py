"""`gpu2dra impact` and doctor's monitoring checks against real objects: a webhook
configuration whose match conditions name nvidia.com/gpu, dcgm-exporter and the GPU Operator
as Deployments and DaemonSets, a ResourceQuota on nvidia.com/gpu; dcgm-exporter's DRA mapping
judged from its environment and the real RBAC objects."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from tests.e2e.inspecting import doctor, gpu2dra
from tests.support.controlplane import ControlPlane
from tests.support.webhook import Webhook

Obj = dict[str, Any]
HEALTH = "e2e-gpu-health"
READER = "e2e-dcgm-reads-slices"
DCGM_IMAGE = "nvcr.io/nvidia/k8s/dcgm-exporter:4.4.0-4.5.0-ubuntu22.04"


def health_webhook() -> Obj:
    """A validating webhook sent only GPU pods by its match conditions; its namespace
    selector matches no namespace, so it never stands in another test's way."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": HEALTH},
        "webhooks": [
            {
                "name": "pods.health.e2e.gpu2dra.io",
                "clientConfig": {"url": "https://127.0.0.1:9/validate"},
                "rules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["pods"],
                    }
                ],
                "matchConditions": [
                    {
                        "name": "gpu-pods",
                        "expression": "object.spec.containers.exists(c, "
                        "has(c.resources.limits) && 'nvidia.com/gpu' in c.resources.limits)",
                    }
                ],
                "namespaceSelector": {"matchLabels": {"e2e.gpu2dra.io/never": "true"}},
                "failurePolicy": "Ignore",
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
            }
        ],
    }


def workload(kind: str, name: str, image: str, env: list[Obj] | None = None) -> Obj:
    labels = {"app": name}
    spec: Obj = {
        "selector": {"matchLabels": labels},
        "template": {
            "metadata": {"labels": labels},
            "spec": {
                "serviceAccountName": "dcgm",
                "containers": [{"name": "main", "image": image, "env": env or []}],
            },
        },
    }
    if kind == "Deployment":
        spec["replicas"] = 0
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name}, "spec": spec}


def reader_rbac(namespace: str) -> list[Obj]:
    rbac = "rbac.authorization.k8s.io/v1"
    return [
        {
            "apiVersion": rbac,
            "kind": "ClusterRole",
            "metadata": {"name": READER},
            "rules": [
                {
                    "apiGroups": ["resource.k8s.io"],
                    "resources": ["resourceslices"],
                    "verbs": ["get", "list", "watch"],
                }
            ],
        },
        {
            "apiVersion": rbac,
            "kind": "ClusterRoleBinding",
            "metadata": {"name": READER},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": READER,
            },
            "subjects": [{"kind": "ServiceAccount", "name": "dcgm", "namespace": namespace}],
        },
    ]


@pytest.fixture
def cluster_objects(control_plane: ControlPlane) -> Iterator[None]:
    """What this test makes outside its namespace, removed afterwards."""
    yield
    for kind, name in (
        ("validatingwebhookconfiguration", HEALTH),
        ("clusterrolebinding", READER),
        ("clusterrole", READER),
    ):
        control_plane.kubectl("delete", kind, name, "--ignore-not-found")


def test_impact_and_doctor_find_what_keys_on_gpu_requests(
    webhook: Webhook,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    cluster_objects: None,
) -> None:
    webhook.set_mode(api_client, namespace, "enabled")
    control_plane.kubectl("apply", "-f", "-", stdin=health_webhook())
    env = [{"name": "KUBERNETES_ENABLE_DRA", "value": "true"}]
    control_plane.kubectl("create", "serviceaccount", "dcgm", "-n", namespace)
    for obj in (
        workload("DaemonSet", "nvidia-dcgm-exporter", DCGM_IMAGE, env),
        workload("Deployment", "gpu-operator", "nvcr.io/nvidia/gpu-operator:v25.10.0"),
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "gpus"},
            "spec": {"hard": {"requests.nvidia.com/gpu": "4"}},
        },
    ):
        control_plane.create(namespace, obj)

    health = f"ValidatingWebhookConfiguration {HEALTH}, webhook pods.health.e2e.gpu2dra.io"

    def findings() -> set[tuple[str, str, str]]:
        done = gpu2dra(control_plane.kubeconfig, "impact", "-n", namespace, "-o", "json", check=0)
        body = json.loads(done.stdout)
        assert body["unreadable"] == []
        return {(f["level"], f["kind"], f["subject"]) for f in body["findings"]}

    # its namespaceSelector leaves this namespace out: nothing changes for it here
    assert ("INFO", "webhook", health) in findings()
    control_plane.kubectl("label", "namespace", namespace, "e2e.gpu2dra.io/never=true")
    subjects = findings()
    for expected in (
        ("WARN", "webhook", health),
        (
            "WARN",
            "component",
            "NVIDIA GPU Operator driver upgrades (k8s-driver-manager, upgrade controller): "
            f"Deployment {namespace}/gpu-operator",
        ),
        (
            "WARN",
            "component",
            f"NVIDIA dcgm-exporter: DaemonSet {namespace}/nvidia-dcgm-exporter "
            "(KUBERNETES_ENABLE_DRA=true)",
        ),
        ("WARN", "quota", f"ResourceQuota {namespace}/gpus (requests.nvidia.com/gpu)"),
    ):
        assert expected in subjects, sorted(subjects)
    # gpu2dra's own webhooks name the resource too, and are left out
    assert not [s for s in subjects if "gpu2dra.io" in s[2] and "e2e" not in s[2]]
    text = gpu2dra(control_plane.kubeconfig, "impact", "-n", namespace, check=0).stdout
    assert f"do: gpu2dra quota -n {namespace} | kubectl apply -f -" in text

    # the variable is set, but its ServiceAccount may not read ResourceSlices
    _, checks = doctor(control_plane)
    where = f"DaemonSet {namespace}/nvidia-dcgm-exporter"
    exporter = checks["dcgm-exporter"]
    assert exporter["status"] == "WARN"
    assert (
        f"{where}: KUBERNETES_ENABLE_DRA true; may not list and watch resourceslices"
        in exporter["details"]
    )
    assert checks["attribution"]["status"] == "WARN"
    assert namespace in checks["attribution"]["summary"]

    control_plane.kubectl(
        "apply",
        "-f",
        "-",
        stdin={"apiVersion": "v1", "kind": "List", "items": reader_rbac(namespace)},
    )
    _, checks = doctor(control_plane)
    exporter = checks["dcgm-exporter"]
    assert f"{where}: KUBERNETES_ENABLE_DRA true; may read resourceslices" in exporter["details"]
    attribution = checks["attribution"]
    assert attribution["status"] == "PASS", attribution
    assert attribution["details"] == [
        "dcgm-exporter's labels (namespace, pod, container; no pod UID)"
    ]

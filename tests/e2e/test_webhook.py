"""gpu2dra against the real control plane: the API server calls the webhook, the
controller-manager turns templates into claims, the scheduler allocates devices."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.e2e.controlplane import ControlPlane
from tests.e2e.fixtures import (
    A100_SXM4_40GB,
    H100_80GB_HBM3,
    add_gpu_node,
    allocated_devices,
    device_class,
    gpu_pod,
    read_pod,
    templates_in,
    wait_for,
    wait_for_pod_scheduled,
)
from tests.e2e.webhook import Webhook

Obj = dict[str, Any]
MODE = "gpu2dra.io/migration"


# ---- scenarios ---------------------------------------------------------------------------


def test_pod_is_translated_allocated_and_bound(
    webhook: Webhook,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    gpu_nodes: list[str],
) -> None:
    node = add_gpu_node(api_client, gpu_nodes, gpus=4)
    webhook.set_mode(api_client, namespace, "enabled")
    stored, warnings = control_plane.create(namespace, gpu_pod("train", {"nvidia.com/gpu": 2}))

    assert warnings == ""
    container = stored["spec"]["containers"][0]
    assert "limits" not in container["resources"]
    assert container["resources"]["claims"] == [{"name": "main-gpu"}]
    (claim,) = stored["spec"]["resourceClaims"]
    (template,) = templates_in(api_client, namespace)
    assert claim["resourceClaimTemplateName"] == template["metadata"]["name"]
    exactly = template["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    assert (exactly["deviceClassName"], exactly["count"]) == ("gpu.nvidia.com", 2)

    pod = wait_for_pod_scheduled(api_client, namespace, "train")
    assert pod["spec"]["nodeName"] == node
    devices = allocated_devices(api_client, read_pod(api_client, namespace, "train"))
    assert len(devices) == 2
    assert {d["driver"] for d in devices} == {"gpu.nvidia.com"}
    assert {d["pool"] for d in devices} == {node}


def test_deployment_gets_the_device_plugins_capacity(
    webhook: Webhook,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    gpu_nodes: list[str],
) -> None:
    add_gpu_node(api_client, gpu_nodes, gpus=2)
    webhook.set_mode(api_client, namespace, "enabled")
    labels = {"app": "infer"}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "infer"},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": gpu_pod("x", {"nvidia.com/gpu": 1})["spec"],
            },
        },
    }
    control_plane.create(namespace, deployment)
    core = client.CoreV1Api(api_client)

    def pods() -> list[Obj] | None:
        items = core.list_namespaced_pod(namespace, label_selector="app=infer").items
        return (
            [api_client.sanitize_for_serialization(p) for p in items] if len(items) == 3 else None
        )

    listed = wait_for(pods, 60, "3 pods of the Deployment")
    names = {p["spec"]["resourceClaims"][0]["resourceClaimTemplateName"] for p in listed}
    assert len(names) == 1, "all replicas share one template"
    assert all("limits" not in p["spec"]["containers"][0]["resources"] for p in listed)

    def settled() -> tuple[int, list[str]] | None:
        # A pod can be Unschedulable for a moment while its ResourceClaim is being created;
        # only two bound pods is the steady state.
        current = [read_pod(api_client, namespace, p["metadata"]["name"]) for p in listed]
        bound = sum(1 for p in current if p["spec"].get("nodeName"))
        unschedulable = [
            c.get("message", "")
            for p in current
            for c in p["status"].get("conditions") or []
            if c.get("reason") == "Unschedulable"
        ]
        return (bound, unschedulable) if bound == 2 and len(unschedulable) == 1 else None

    wait_for(settled, 90, "2 pods bound and 1 unschedulable")
    time.sleep(3)  # the third pod stays Pending: two devices, as under the device plugin
    still = settled()
    assert still is not None, "the third pod must stay Pending"
    assert "claim" in still[1][0], still[1][0]


def test_gfd_product_selector_picks_the_product(
    webhook: Webhook,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    gpu_nodes: list[str],
) -> None:
    add_gpu_node(api_client, gpu_nodes, product=A100_SXM4_40GB, gpus=2)
    h100 = add_gpu_node(api_client, gpu_nodes, product=H100_80GB_HBM3, gpus=2)
    webhook.set_mode(api_client, namespace, "enabled")
    pod = gpu_pod(
        "h100",
        {"nvidia.com/gpu": 1},
        nodeSelector={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
    )
    stored, _ = control_plane.create(namespace, pod)
    assert "nodeSelector" not in stored["spec"], "DRA nodes need not carry GFD labels"
    assert wait_for_pod_scheduled(api_client, namespace, "h100")["spec"]["nodeName"] == h100


def test_mig_profile_is_allocated(
    webhook: Webhook,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    gpu_nodes: list[str],
) -> None:
    node = add_gpu_node(
        api_client,
        gpu_nodes,
        product=A100_SXM4_40GB,
        gpus=2,
        mig={0: ["3g.20gb", "2g.10gb", "1g.5gb"], 1: ["1g.10gb", "1g.10gb"]},
    )
    webhook.set_mode(api_client, namespace, "enabled")
    control_plane.create(namespace, gpu_pod("mig", {"nvidia.com/mig-1g.10gb": 1}))
    wait_for_pod_scheduled(api_client, namespace, "mig")
    (device,) = allocated_devices(api_client, read_pod(api_client, namespace, "mig"))
    assert device["pool"] == node
    assert "-mig-1g10gb-" in device["device"]


@pytest.mark.parametrize("mode", [None, "disabled"])
def test_namespaces_not_opted_in_are_untouched(
    webhook: Webhook,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    mode: str | None,
) -> None:
    webhook.set_mode(api_client, namespace, mode)
    stored, warnings = control_plane.create(namespace, gpu_pod("p", {"nvidia.com/gpu": 1}))
    assert stored["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    assert "resourceClaims" not in stored["spec"] and warnings == ""


def test_audit_namespace_warns_and_stores_unchanged(
    webhook: Webhook,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
) -> None:
    webhook.set_mode(api_client, namespace, "audit")
    stored, warnings = control_plane.create(namespace, gpu_pod("p", {"nvidia.com/gpu": 2}))
    assert stored["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "2"}
    assert "resourceClaims" not in stored["spec"]
    assert (
        "Warning: gpu2dra audit: would move GPU requests to DRA: claim main-gpu: 2 x gpu.nvidia.com"
        in warnings
    )
    assert templates_in(api_client, namespace) == []


def test_server_side_dry_run_creates_nothing(
    webhook: Webhook,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
) -> None:
    webhook.set_mode(api_client, namespace, "enabled")
    shown, _ = control_plane.create(
        namespace, gpu_pod("p", {"nvidia.com/gpu": 1}), "--dry-run=server"
    )
    assert shown["spec"]["resourceClaims"][0]["name"] == "main-gpu"
    assert templates_in(api_client, namespace) == []
    with pytest.raises(ApiException) as err:
        client.CoreV1Api(api_client).read_namespaced_pod("p", namespace)
    assert err.value.status == 404


def test_missing_device_class_is_rejected(
    webhook: Webhook,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
) -> None:
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "typo"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvida.com"}}]
                }
            }
        },
    }
    # Stored while the namespace is not opted in, then the namespace opts in.
    control_plane.create(namespace, template)
    webhook.set_mode(api_client, namespace, "enabled")
    again = control_plane.run_kubectl(
        "create",
        "-n",
        namespace,
        "-f",
        "-",
        stdin={**template, "metadata": {"name": "typo2"}},
    )
    assert again.returncode != 0
    assert "request 'gpu' names DeviceClass 'gpu.nvida.com', which does not exist" in again.stderr
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "typo"}],
            "containers": [{"name": "c", "image": "x", "resources": {"claims": [{"name": "gpu"}]}}],
        },
    }
    rejected = control_plane.run_kubectl("create", "-n", namespace, "-f", "-", stdin=pod)
    assert rejected.returncode != 0
    assert "claim 'gpu' uses ResourceClaimTemplate 'typo'" in rejected.stderr


def test_webhook_down_admits_unchanged_then_resumes(
    webhook: Webhook,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
) -> None:
    webhook.set_mode(api_client, namespace, "enabled")
    assert webhook.stop() == 0
    try:
        stored, _ = control_plane.create(namespace, gpu_pod("down", {"nvidia.com/gpu": 1}))
        assert stored["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    finally:
        webhook.start()
    stored, _ = control_plane.create(namespace, gpu_pod("up", {"nvidia.com/gpu": 1}))
    assert stored["spec"]["resourceClaims"][0]["name"] == "main-gpu"


def test_deleted_device_class_stops_translation(
    webhook: Webhook,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
) -> None:
    webhook.set_mode(api_client, namespace, "enabled")
    custom = client.CustomObjectsApi(api_client)
    custom.delete_cluster_custom_object("resource.k8s.io", "v1", "deviceclasses", "mig.nvidia.com")
    try:

        def untouched() -> tuple[Obj, str] | None:
            name = f"mig-{uuid.uuid4().hex[:5]}"
            stored, warnings = control_plane.create(
                namespace, gpu_pod(name, {"nvidia.com/mig-1g.5gb": 1})
            )
            return (stored, warnings) if "resourceClaims" not in stored["spec"] else None

        stored, warnings = wait_for(untouched, 30, "the webhook to see the deletion")
        assert stored["spec"]["containers"][0]["resources"]["limits"] == {
            "nvidia.com/mig-1g.5gb": "1"
        }
        assert "DeviceClass mig.nvidia.com does not exist" in warnings
    finally:
        custom.create_cluster_custom_object(
            "resource.k8s.io", "v1", "deviceclasses", device_class("mig.nvidia.com", "mig")
        )


def test_controllers_pods_are_translated(
    webhook: Webhook,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
) -> None:
    webhook.set_mode(api_client, namespace, "enabled")
    template = {
        "metadata": {"labels": {"app": "w"}},
        "spec": {**gpu_pod("x", {"nvidia.com/gpu": 1})["spec"], "restartPolicy": "Never"},
    }
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "job"},
        "spec": {"template": template, "backoffLimit": 0},
    }
    sts = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "sts"},
        "spec": {
            "serviceName": "sts",
            "replicas": 1,
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": {"app": "w"}},
            "template": {**template, "spec": {**template["spec"], "restartPolicy": "Always"}},
        },
    }
    cron = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "cron"},
        "spec": {
            "schedule": "* * * * *",
            "jobTemplate": {"spec": {"template": template, "backoffLimit": 0}},
        },
    }
    for obj in (job, sts, cron):
        control_plane.create(namespace, obj)
    core = client.CoreV1Api(api_client)

    def owners() -> set[str] | None:
        pods = core.list_namespaced_pod(namespace).items
        kinds = {(p.metadata.owner_references or [{}])[0].name.split("-")[0]: p for p in pods}
        return set(kinds) if {"job", "sts", "cron"} <= set(kinds) else None

    wait_for(owners, 90, "pods of the Job, the StatefulSet and the CronJob's Job")
    for pod in core.list_namespaced_pod(namespace).items:
        spec = api_client.sanitize_for_serialization(pod)["spec"]
        assert spec["resourceClaims"][0]["name"] == "main-gpu", pod.metadata.name
        assert "limits" not in spec["containers"][0]["resources"]


def test_logs_are_json_with_the_uid_and_no_pod_spec(
    webhook: Webhook, api_client: client.ApiClient, control_plane: ControlPlane, namespace: str
) -> None:
    webhook.set_mode(api_client, namespace, "enabled")
    secret = "s3cr3t-token-value"
    pod = gpu_pod("logged", {"nvidia.com/gpu": 1})
    pod["spec"]["containers"][0]["env"] = [{"name": "TOKEN", "value": secret}]
    control_plane.create(namespace, pod)
    lines = [line for line in webhook.log.read_text().splitlines() if line.startswith("{")]
    entries = [json.loads(line) for line in lines]
    translated = [
        e for e in entries if e.get("result") == "patched" and e["namespace"] == namespace
    ]
    assert translated, "a translated pod is logged"
    assert all(e["uid"] and e["kind"] == "Pod" and e["operation"] == "CREATE" for e in translated)
    text = webhook.log.read_text()
    assert secret not in text and '"containers"' not in text

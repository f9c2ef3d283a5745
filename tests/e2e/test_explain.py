"""`gpu2dra explain pod` against the real control plane: why a GPU pod is where it is."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.e2e.inspecting import explain as explained
from tests.e2e.inspecting import gpu2dra, unschedulable
from tests.support.cluster import (
    A100_SXM4_40GB,
    add_gpu_node,
    device_class,
    gpu_pod,
    label,
    wait_for,
    wait_for_pod_scheduled,
)
from tests.support.controlplane import ControlPlane
from tests.support.webhook import Webhook

Obj = dict[str, Any]


def explain(plane: ControlPlane, namespace: str, pod: str, *args: str) -> str:
    return explained(plane.kubeconfig, pod, namespace, *args)


def test_bound_pod(
    webhook: Webhook,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    gpu_nodes: list[str],
) -> None:
    node = add_gpu_node(api_client, gpu_nodes, gpus=2)
    label(api_client, namespace, "enabled")
    control_plane.create(namespace, gpu_pod("train", {"nvidia.com/gpu": 2}))
    wait_for_pod_scheduled(api_client, namespace, "train")
    text = explain(control_plane, namespace, "train")
    assert text.startswith(f"pod {namespace}/train: Pending, on node {node}\n")
    assert "  PASS  translated by gpu2dra: claim(s) main-gpu\n" in text
    assert "ResourceClaimTemplate gpu2dra-gpu-x2-" in text
    assert f"allocated: {node}/gpu-0, {node}/gpu-1" in text or (
        f"allocated: {node}/gpu-1, {node}/gpu-0" in text
    )
    assert f"  PASS  scheduled and bound to node {node}\n" in text
    assert "FAIL" not in text
    assert f"Normal Scheduled: Successfully assigned {namespace}/train to {node}" in text


@pytest.mark.usefixtures("no_devices_elsewhere")  # it counts every device
def test_selector_matching_no_device(
    webhook: Webhook,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    gpu_nodes: list[str],
) -> None:
    node = add_gpu_node(api_client, gpu_nodes, product=A100_SXM4_40GB, gpus=2)
    label(api_client, namespace, "enabled")
    pod = gpu_pod(
        "h100",
        {"nvidia.com/gpu": 1},
        nodeSelector={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
    )
    control_plane.create(namespace, pod)
    unschedulable(api_client, namespace, "h100")
    text = explain(control_plane, namespace, "h100")
    assert (
        "FAIL  request gpu asks for 1 x gpu.nvidia.com: no device matches the request's "
        "selectors; 2 device(s) in the class, 0 match the selectors" in text
    )
    expr = (
        "device.attributes['gpu.nvidia.com'].productName.replace(' ', '-') == "
        "'NVIDIA-H100-80GB-HBM3'"
    )
    assert f"{node}/gpu-0: does not match selector #1: {expr}" in text
    assert "FAIL  not scheduled (Unschedulable): " in text
    assert "Warning FailedScheduling" in text and "cannot allocate all claims" in text


@pytest.mark.usefixtures("no_devices_elsewhere")  # it counts every device
def test_capacity_exhausted_names_the_holder(
    webhook: Webhook,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    gpu_nodes: list[str],
) -> None:
    node = add_gpu_node(api_client, gpu_nodes, gpus=1)
    label(api_client, namespace, "enabled")
    control_plane.create(namespace, gpu_pod("first", {"nvidia.com/gpu": 1}))
    first = wait_for_pod_scheduled(api_client, namespace, "first")
    (status,) = first["status"]["resourceClaimStatuses"]
    control_plane.create(namespace, gpu_pod("second", {"nvidia.com/gpu": 1}))
    unschedulable(api_client, namespace, "second")
    text = explain(control_plane, namespace, "second")
    assert "request gpu asks for 1 x gpu.nvidia.com: capacity exhausted" in text
    holder = f"{namespace}/{status['resourceClaimName']}"
    assert f"{node}/gpu-0: matches, but allocated to claim {holder}" in text


@pytest.mark.parametrize(
    ("mode", "annotations", "expected"),
    [
        # The driver chart's gpu.nvidia.com serves nvidia.com/gpu in-tree on 1.37.
        (None, {}, "is in mode disabled (no label: the default mode); it is served in-tree"),
        ("disabled", {}, "is in mode disabled (label gpu2dra.io/migration=disabled)"),
        (
            "audit",
            {},
            "audit mode (label gpu2dra.io/migration=audit): admitted unchanged; "
            "gpu2dra would move GPU requests to DRA: claim main-gpu: 1 x gpu.nvidia.com",
        ),
        ("enabled", {"gpu2dra.io/skip": "true"}, "annotated gpu2dra.io/skip"),
    ],
)
def test_not_translated_says_why(
    webhook: Webhook,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    mode: str | None,
    annotations: dict[str, str],
    expected: str,
) -> None:
    label(api_client, namespace, mode)
    pod = gpu_pod("legacy", {"nvidia.com/gpu": 1})
    pod["metadata"]["annotations"] = annotations
    control_plane.create(namespace, pod)
    text = explain(control_plane, namespace, "legacy", "--policy", str(webhook.policy))
    assert "not translated (1 x nvidia.com/gpu)" in text
    assert expected in text


def test_created_while_the_webhook_was_down(
    webhook: Webhook,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
) -> None:
    label(api_client, namespace, "enabled")
    webhook.stop()
    try:
        control_plane.create(namespace, gpu_pod("missed", {"nvidia.com/gpu": 1}))
    finally:
        webhook.start()
    text = explain(control_plane, namespace, "missed", "--policy", str(webhook.policy))
    assert f"not translated (1 x nvidia.com/gpu) although namespace {namespace} is enabled" in text
    assert "pod claims can only be added when a pod is created" in text


def test_missing_device_class_leaves_the_pod(
    webhook: Webhook,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
) -> None:
    label(api_client, namespace, "enabled")
    custom = client.CustomObjectsApi(api_client)
    custom.delete_cluster_custom_object("resource.k8s.io", "v1", "deviceclasses", "mig.nvidia.com")
    try:

        def untranslated() -> Obj | None:
            name = f"mig-{len(client.CoreV1Api(api_client).list_namespaced_pod(namespace).items)}"
            made, _ = control_plane.create(namespace, gpu_pod(name, {"nvidia.com/mig-1g.5gb": 1}))
            return None if made["spec"].get("resourceClaims") else made

        pod = wait_for(untranslated, 30, "the webhook to see the deletion")
        text = explain(control_plane, namespace, pod["metadata"]["name"])
    finally:
        custom.create_cluster_custom_object(
            "resource.k8s.io", "v1", "deviceclasses", device_class("mig.nvidia.com", "mig")
        )
    assert (
        "FAIL  not translated (1 x nvidia.com/mig-1g.5gb): gpu2dra leaves this pod as it is" in text
    )
    assert "DeviceClass mig.nvidia.com does not exist" in text


def test_missing_template(
    webhook: Webhook,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "orphan"},
        "spec": {
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu2dra-gone-x1-0"}],
            "containers": [{"name": "c", "image": "x", "resources": {"claims": [{"name": "gpu"}]}}],
        },
    }
    control_plane.create(namespace, pod)
    text = explain(control_plane, namespace, "orphan")
    assert (
        f"FAIL  claim gpu: gpu2dra's ResourceClaimTemplate {namespace}/gpu2dra-gone-x1-0 is "
        "missing" in text
    )


def test_skipped_namespaces(
    webhook: Webhook,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    tmp_path: Path,
) -> None:
    """kube-system by default, and a namespace the policy lists (which would otherwise be
    enabled by its defaultMode)."""
    control_plane.create("kube-system", gpu_pod(f"gpu-{namespace}", {"nvidia.com/gpu": 1}))
    try:
        text = explain(control_plane, "kube-system", f"gpu-{namespace}")
    finally:
        client.CoreV1Api(api_client).delete_namespaced_pod(
            f"gpu-{namespace}", "kube-system", grace_period_seconds=0
        )
    assert (
        "  info  not translated (1 x nvidia.com/gpu): namespace kube-system is never changed; it "
        "is served in-tree\n" in text
    )

    policy = tmp_path / "policy.yaml"
    policy.write_text(f"defaultMode: enabled\nskipNamespaces: [kube-system, {namespace}]\n")
    control_plane.create(namespace, gpu_pod("legacy", {"nvidia.com/gpu": 1}))
    text = explain(control_plane, namespace, "legacy", "--policy", str(policy))
    assert f"not translated (1 x nvidia.com/gpu): namespace {namespace} is never changed" in text
    # The same pod judged by the default policy: the namespace's mode decides.
    assert "mode disabled" in explain(control_plane, namespace, "legacy")


def test_claim_not_created_yet(
    webhook: Webhook,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
) -> None:
    """The template exists, but the controller-manager (paused here) has not made the claim."""
    webhook.set_mode(api_client, namespace, "enabled")
    manager = control_plane.process("kube-controller-manager")
    manager.send_signal(signal.SIGSTOP)
    try:
        control_plane.create(namespace, gpu_pod("early", {"nvidia.com/gpu": 1}))
        text = explain(control_plane, namespace, "early")
    finally:
        manager.send_signal(signal.SIGCONT)
    assert "  PASS  claim main-gpu: gpu2dra's ResourceClaimTemplate gpu2dra-gpu-x1-" in text
    assert (
        "  FAIL  claim main-gpu: no ResourceClaim created yet (the resourceclaim controller in "
        "kube-controller-manager creates it from the template)\n" in text
    )


def test_claim_not_found(webhook: Webhook, control_plane: ControlPlane, namespace: str) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "named"},
        "spec": {
            "resourceClaims": [{"name": "gpu", "resourceClaimName": "shared-gpu"}],
            "containers": [{"name": "c", "image": "x", "resources": {"claims": [{"name": "gpu"}]}}],
        },
    }
    control_plane.create(namespace, pod)
    text = explain(control_plane, namespace, "named")
    assert f"  FAIL  claim gpu: ResourceClaim {namespace}/shared-gpu not found\n" in text


def test_unknown_pod_is_one_line(control_plane: ControlPlane, namespace: str) -> None:
    done = gpu2dra(control_plane.kubeconfig, "explain", "pod", "nope", "-n", namespace, check=1)
    assert done.stderr == f"gpu2dra: pod {namespace}/nope not found\n"

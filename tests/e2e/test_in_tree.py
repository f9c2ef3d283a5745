"""gpu2dra beside the in-tree extended-resource path (KEP-5004, GA in 1.37), on the real
scheduler and controller-manager: gpu.nvidia.com carries `extendedResourceName:
nvidia.com/gpu`, as the NVIDIA driver's chart makes it (the suite's classes are the chart's),
and gpu2dra runs its default policy (`inTree: defer`).

No pod is ever served by both paths; a pod gpu2dra translates gets exactly its devices; a
pod it leaves alone (a namespace not enabled, the skip annotation, a pod that gains nothing
from translation) is served by the scheduler's own extended resource claim; MIG profiles get
one class each from `gpu2dra deviceclasses`; a namespace moves from one path to the other
and back without touching running pods.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
import yaml
from kubernetes import client

from tests.e2e.inspecting import doctor, gpu2dra
from tests.support.cluster import (
    RESOURCE_GROUP,
    RESOURCE_VERSION,
    add_gpu_node,
    allocated_devices,
    gpu_pod,
    pod_resource_claims,
    read_pod,
    wait_for,
    wait_for_pod_scheduled,
)
from tests.support.controlplane import ControlPlane
from tests.support.webhook import Webhook

Obj = dict[str, Any]
EXTENDED_CLAIM = "resource.kubernetes.io/extended-resource-claim"


# This module's gpu2dra runs the default policy, `inTree: defer` (conftest's `webhook` reads
# IN_TREE; the rest of the suite runs `translate`).
IN_TREE = "defer"


@pytest.fixture
def in_tree(api_client: client.ApiClient, webhook: Webhook, namespace: str) -> None:
    """gpu.nvidia.com serves nvidia.com/gpu in-tree, as the driver chart makes it (the suite's
    class): once gpu2dra's cache has it, a plain GPU pod in an enabled namespace is left to
    the scheduler."""
    spec = client.CustomObjectsApi(api_client).get_cluster_custom_object(
        RESOURCE_GROUP, RESOURCE_VERSION, "deviceclasses", "gpu.nvidia.com"
    )["spec"]
    assert spec.get("extendedResourceName") == "nvidia.com/gpu", spec
    webhook.set_mode(api_client, namespace, "enabled")
    probe = gpu_pod("probe", {"nvidia.com/gpu": 1})
    wait_for(
        lambda: "patch" not in webhook.dry_run(namespace, probe),
        30,
        "gpu2dra to leave a plain GPU pod to the in-tree path",
    )


def extended_claims(api: client.ApiClient, namespace: str) -> list[Obj]:
    claims = client.CustomObjectsApi(api).list_namespaced_custom_object(
        RESOURCE_GROUP, RESOURCE_VERSION, namespace, "resourceclaims"
    )["items"]
    return [c for c in claims if EXTENDED_CLAIM in (c["metadata"].get("annotations") or {})]


def with_init(name: str, gpus: int) -> Obj:
    """A pod whose init container asks for a GPU: the in-tree path would give it one of its
    own beside the app container's, so gpu2dra translates it (the init shares the claim)."""
    pod = gpu_pod(name, {"nvidia.com/gpu": gpus})
    init = {"name": "warm", "image": "cuda:12", "resources": {"limits": {"nvidia.com/gpu": 1}}}
    pod["spec"]["initContainers"] = [init]
    return pod


def test_a_translated_pod_gets_exactly_its_devices_and_no_extended_claim(
    webhook: Webhook,
    in_tree: None,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    gpu_nodes: list[str],
) -> None:
    add_gpu_node(api_client, gpu_nodes, gpus=4)
    webhook.set_mode(api_client, namespace, "enabled")
    stored, _ = control_plane.create(namespace, with_init("train", 2))
    assert stored["spec"]["resourceClaims"], "translated"
    pod = wait_for_pod_scheduled(api_client, namespace, "train")
    assert "extendedResourceClaimStatus" not in pod["status"]
    assert len(allocated_devices(api_client, pod)) == 2  # the in-tree path would take 3
    assert extended_claims(api_client, namespace) == []


@pytest.mark.parametrize("how", ["disabled namespace", "skip annotation", "deferred"])
def test_a_pod_gpu2dra_leaves_alone_is_served_in_tree(
    webhook: Webhook,
    in_tree: None,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    gpu_nodes: list[str],
    how: str,
) -> None:
    add_gpu_node(api_client, gpu_nodes, gpus=4)
    webhook.set_mode(api_client, namespace, None if how == "disabled namespace" else "enabled")
    body = gpu_pod("infer", {"nvidia.com/gpu": 2})
    if how == "skip annotation":
        body["metadata"]["annotations"] = {"gpu2dra.io/skip": "true"}
    checks = control_plane.webhook_calls("claims.validate.gpu2dra.io")
    stored, _ = control_plane.create(namespace, body)
    assert "resourceClaims" not in stored["spec"], "left alone"
    pod = wait_for_pod_scheduled(api_client, namespace, "infer")
    status = pod["status"]["extendedResourceClaimStatus"]
    (claim,) = extended_claims(api_client, namespace)
    # The claim the scheduler made (its annotation says so) was not sent to gpu2dra: it holds
    # what its DeviceClass holds, and the scheduler binds the pod only once it is created.
    assert control_plane.webhook_calls("claims.validate.gpu2dra.io") == checks
    assert status["resourceClaimName"] == claim["metadata"]["name"]
    assert len(allocated_devices(api_client, pod)) == 2

    text = gpu2dra(control_plane.kubeconfig, "explain", "pod", "infer", "-n", namespace).stdout
    assert "served in-tree" in text or "leaves it to the in-tree path" in text, text
    assert f"extended resource claim {claim['metadata']['name']} (made by the scheduler" in text
    report = gpu2dra(control_plane.kubeconfig, "report", "-n", namespace, "-o", "json").stdout
    (row,) = yaml.safe_load(report)["namespaces"][0]["workloads"]
    assert row["path"] == "in-tree"


def test_mig_through_a_generated_class_and_doctor(
    webhook: Webhook,
    in_tree: None,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    gpu_nodes: list[str],
) -> None:
    add_gpu_node(api_client, gpu_nodes, gpus=2, mig={1: ["1g.5gb", "1g.5gb", "3g.20gb"]})
    _, checks = doctor(control_plane)
    assert checks["paths"]["status"] == "WARN", checks["paths"]
    assert "1g.5gb, 3g.20gb" in checks["paths"]["summary"]
    assert checks["paths"]["fix"] == "gpu2dra deviceclasses | kubectl apply -f -"

    printed = gpu2dra(control_plane.kubeconfig, "deviceclasses", check=0).stdout
    control_plane.kubectl("apply", "-f", "-", stdin=printed)
    try:
        _, checks = doctor(control_plane)
        assert "1g.5gb" not in checks["paths"]["summary"], checks["paths"]
        stored, _ = control_plane.create(namespace, gpu_pod("slice", {"nvidia.com/mig-1g.5gb": 1}))
        assert "resourceClaims" not in stored["spec"]
        pod = wait_for_pod_scheduled(api_client, namespace, "slice")
        (device,) = allocated_devices(api_client, pod)
        assert "-mig-1g5gb-" in device["device"], device
    finally:
        for cls in yaml.safe_load_all(printed):
            client.CustomObjectsApi(api_client).delete_cluster_custom_object(
                RESOURCE_GROUP, RESOURCE_VERSION, "deviceclasses", cls["metadata"]["name"]
            )


def test_a_namespace_moves_to_the_in_tree_path_and_back_without_touching_running_pods(
    webhook: Webhook,
    in_tree: None,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    gpu_nodes: list[str],
) -> None:
    """The README's plan: label the namespace disabled (new pods go in-tree; running pods
    keep the claims gpu2dra gave them), then enabled again."""
    add_gpu_node(api_client, gpu_nodes, gpus=4)
    webhook.set_mode(api_client, namespace, "enabled")
    control_plane.create(namespace, with_init("before", 1))
    before = wait_for_pod_scheduled(api_client, namespace, "before")
    held = [c["metadata"]["name"] for c in pod_resource_claims(api_client, before)]

    webhook.set_mode(api_client, namespace, "disabled")
    stored, _ = control_plane.create(namespace, with_init("during", 1))
    assert "resourceClaims" not in stored["spec"]
    during = wait_for_pod_scheduled(api_client, namespace, "during")
    assert during["status"]["extendedResourceClaimStatus"]["resourceClaimName"]

    webhook.set_mode(api_client, namespace, "enabled")
    stored, _ = control_plane.create(namespace, with_init("after", 1))
    assert stored["spec"]["resourceClaims"]
    wait_for_pod_scheduled(api_client, namespace, "after")

    time.sleep(1)  # anything that would disturb the first pod has had its chance
    again = read_pod(api_client, namespace, "before")
    assert again["metadata"]["uid"] == before["metadata"]["uid"]
    assert [c["metadata"]["name"] for c in pod_resource_claims(api_client, again)] == held
    assert len(allocated_devices(api_client, again)) == 1

"""Priority and preemption on the real scheduler: a high-priority pod preempts for device-plugin
GPUs, and not for DRA claims (the DynamicResources plugin has no preemption on 1.34-1.37), so
gpu2dra leaves a pod whose priority class can preempt on the device plugin.

Each node offers one GPU. `low` never preempts (so gpu2dra translates its pods); `high` may.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from app.core.catalog import Catalog
from app.core.policy import load_policy, parse_policy
from app.core.translate import translate
from tests.e2e.inspecting import gpu2dra, unschedulable
from tests.support.cluster import (
    RESOURCE_GROUP,
    RESOURCE_VERSION,
    add_device_plugin_node,
    add_gpu_node,
    gpu_pod,
    label,
    read_pod,
    wait_for,
    wait_for_pod_scheduled,
)
from tests.support.controlplane import ControlPlane
from tests.support.webhook import Webhook

Obj = dict[str, Any]
pytestmark = pytest.mark.every_release
GPU = {"nvidia.com/gpu": 1}


@pytest.fixture
def classes(api_client: client.ApiClient) -> Iterator[tuple[str, str]]:
    """PriorityClasses low (10, never preempts) and high (1000, preempts lower priorities)."""
    scheduling = client.SchedulingV1Api(api_client)
    suffix = uuid.uuid4().hex[:6]
    low, high = f"low-{suffix}", f"high-{suffix}"
    scheduling.create_priority_class(
        {"metadata": {"name": low}, "value": 10, "preemptionPolicy": "Never"}
    )
    scheduling.create_priority_class({"metadata": {"name": high}, "value": 1000})
    yield low, high
    for name in (low, high):
        scheduling.delete_priority_class(name)


def on(node: str, pod: Obj) -> Obj:
    """`pod` pinned to `node` (a label gpu2dra leaves alone), ending at once when preempted."""
    spec = pod["spec"]
    spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    spec["terminationGracePeriodSeconds"] = 0
    return pod


def gone_or_going(api: client.ApiClient, namespace: str, name: str) -> bool:
    try:
        pod = read_pod(api, namespace, name)
    except client.ApiException as err:
        return bool(err.status == 404)
    return bool(pod["metadata"].get("deletionTimestamp"))


def test_a_preempting_pod_is_left_where_it_still_preempts(
    control_plane: ControlPlane,
    api_client: client.ApiClient,
    webhook: Webhook,
    namespace: str,
    second_namespace: str,
    gpu_nodes: list[str],
    classes: tuple[str, str],
) -> None:
    low, high = classes
    legacy, enabled = namespace, second_namespace
    label(api_client, enabled, "enabled")
    node = add_device_plugin_node(api_client, gpu_nodes, gpus=1)
    victim = on(node, gpu_pod("victim", GPU, priorityClassName=low))
    control_plane.create(legacy, victim)
    wait_for_pod_scheduled(api_client, legacy, "victim")

    stored, _ = control_plane.create(enabled, on(node, gpu_pod("urgent", GPU)))
    assert "resourceClaims" in stored["spec"], "a pod without a priority class is translated"
    control_plane.kubectl("-n", enabled, "delete", "pod", "urgent", "--wait=false")

    pod = on(node, gpu_pod("urgent", GPU, priorityClassName=high))
    stored, warnings = control_plane.create(enabled, pod)
    assert "resourceClaims" not in stored["spec"]
    assert stored["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    assert f"priorityClassName {high} can preempt, and the scheduler does not preempt" in warnings
    if served_in_tree(api_client):  # the driver chart's gpu.nvidia.com, on 1.36+
        assert "pod left as is (policy preemptingPods: leave), but DeviceClass" in warnings
    else:
        assert "pod left on the device plugin (policy preemptingPods: leave" in warnings
    # The device plugin's GPU is freed by preemption: the victim goes, the urgent pod binds.
    wait_for(lambda: gone_or_going(api_client, legacy, "victim"), 60, "the victim's preemption")
    wait_for_pod_scheduled(api_client, enabled, "urgent")


def served_in_tree(api: client.ApiClient) -> bool:
    """Whether gpu.nvidia.com serves nvidia.com/gpu in-tree: the driver chart sets
    extendedResourceName, which an API server without DRAExtendedResource (1.34) drops."""
    spec = client.CustomObjectsApi(api).get_cluster_custom_object(
        RESOURCE_GROUP, RESOURCE_VERSION, "deviceclasses", "gpu.nvidia.com"
    )["spec"]
    return bool(spec.get("extendedResourceName"))


def test_a_left_preempting_pod_does_not_preempt_on_the_in_tree_path(
    control_plane: ControlPlane,
    api_client: client.ApiClient,
    webhook: Webhook,
    namespace: str,
    second_namespace: str,
    gpu_nodes: list[str],
    classes: tuple[str, str],
) -> None:
    """preemptingPods: leave keeps a pod that can preempt off gpu2dra's claims, but where a
    class serves nvidia.com/gpu in-tree the scheduler can still give it DRA devices, through
    its own claim, and there it does not preempt either: the warning says so, and on a DRA
    node whose GPU a lower-priority pod holds, the pod waits and the victim stays."""
    low, high = classes
    legacy, enabled = namespace, second_namespace
    label(api_client, enabled, "enabled")
    node = add_gpu_node(api_client, gpu_nodes, gpus=1)
    pod = on(node, gpu_pod("urgent", GPU, priorityClassName=high))
    if not served_in_tree(api_client):  # 1.34: no in-tree path, the plain warning
        _, warnings = control_plane.create(enabled, pod, "--dry-run=server")
        assert "pod left on the device plugin (policy preemptingPods: leave" in warnings
        return
    # Left by gpu2dra (a namespace not enabled), served in-tree: it holds the node's GPU.
    control_plane.create(legacy, on(node, gpu_pod("victim", GPU, priorityClassName=low)))
    victim = wait_for_pod_scheduled(api_client, legacy, "victim")
    assert victim["status"]["extendedResourceClaimStatus"]["resourceClaimName"]

    stored, warnings = control_plane.create(enabled, pod)
    assert "resourceClaims" not in stored["spec"]
    assert (
        "pod left as is (policy preemptingPods: leave), but DeviceClass gpu.nvidia.com serves "
        "nvidia.com/gpu in-tree, through DRA claims too: it preempts only for nodes whose "
        "device plugin offers nvidia.com/gpu"
    ) in warnings
    message = unschedulable(api_client, enabled, "urgent")
    assert "cannot allocate all claims" in message, message
    time.sleep(5)  # the scheduler retries; preemption would have deleted the victim by now
    assert not gone_or_going(api_client, legacy, "victim")
    assert not read_pod(api_client, enabled, "urgent")["spec"].get("nodeName")


def test_a_translated_pod_does_not_preempt_for_its_claims(
    control_plane: ControlPlane,
    api_client: client.ApiClient,
    webhook: Webhook,
    namespace: str,
    gpu_nodes: list[str],
    classes: tuple[str, str],
) -> None:
    """What preemptingPods: translate would give: the same pods as claims, on a DRA node."""
    low, high = classes
    label(api_client, namespace, "enabled")
    node = add_gpu_node(api_client, gpu_nodes, gpus=1)
    victim = on(node, gpu_pod("victim", GPU, priorityClassName=low))
    victim, _ = control_plane.create(namespace, victim)
    assert victim["spec"]["resourceClaims"], "a class that never preempts is translated"
    wait_for_pod_scheduled(api_client, namespace, "victim")

    # The high-priority pod as gpu2dra translates it under preemptingPods: translate.
    policy = parse_policy({"preemptingPods": "translate"})
    assert load_policy(None).preempting_pods == "leave"
    pod = on(node, gpu_pod("urgent", GPU, priorityClassName=high))
    done = translate(pod["spec"], policy, Catalog.of(["gpu.nvidia.com"]))
    assert any("can preempt, but the scheduler does not preempt" in w for w in done.warnings)
    # the victim's own template: same devices, made by the webhook for the victim
    (claim,) = done.spec["resourceClaims"]
    assert [claim["resourceClaimTemplateName"]] == [
        c["resourceClaimTemplateName"] for c in victim["spec"]["resourceClaims"]
    ]
    stored, _ = control_plane.create(namespace, {**pod, "spec": done.spec})
    assert stored["spec"]["resourceClaims"] and stored["spec"]["priority"] == 1000

    message = unschedulable(api_client, namespace, "urgent")
    assert "cannot allocate all claims" in message and "Preemption is not helpful" in message
    time.sleep(5)  # the scheduler retries; preemption would have deleted the victim by now
    assert not gone_or_going(api_client, namespace, "victim")
    assert not read_pod(api_client, namespace, "urgent")["spec"].get("nodeName")
    assert not read_pod(api_client, namespace, "urgent").get("status", {}).get("nominatedNodeName")
    explained = gpu2dra(control_plane.kubeconfig, "explain", "pod", "urgent", "-n", namespace)
    said = f"priorityClassName {high} can preempt, but the scheduler does not preempt"
    assert said in explained.stdout, explained.stdout

"""Shared GPUs on the real control plane: pods of a time-sliced Deployment (one device-plugin
replica each) and HAMi memory fractions become claims on a device several claims share, as
the scheduler allocates them (DRAConsumableCapacity, on from 1.36), only where a ResourceSlice
publishes such devices; on 1.34 (the gate off) the API server drops `allowMultipleAllocations`
and the pods stay on the device plugin, saying what to configure.

The fake GPU nodes publish the devices the NVIDIA driver's own code publishes with
--consumable-shares (golden files of tests/driver, tests/support/cluster.py gpu_devices); no
kubelet runs them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from tests.e2e.inspecting import doctor, gpu2dra
from tests.support.cluster import (
    H100_80GB_HBM3,
    add_gpu_node,
    allocated_devices,
    gpu_pod,
    pod_resource_claims,
    read_pod,
    wait_for,
    wait_for_pod_scheduled,
)
from tests.support.controlplane import ControlPlane
from tests.support.webhook import SHARING_POLICY, Webhook, running_webhook

Obj = dict[str, Any]
PRODUCT = "nvidia.com/gpu.product"
A100_SHARED = "NVIDIA-A100-SXM4-40GB-SHARED"


@pytest.fixture(scope="module")
def hook(
    control_plane: ControlPlane,
    api_client: client.ApiClient,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Webhook]:
    """gpu2dra with a policy whose nvidia.com/gpu mapping moves shared GPUs onto shares."""
    work_dir = tmp_path_factory.mktemp("gpu2dra-sharing")
    yield from running_webhook(control_plane, api_client, work_dir, policy=SHARING_POLICY)


def sliced(name: str) -> Obj:
    """One replica of a time-sliced GPU, as the GPU Operator's own test asks for it."""
    return gpu_pod(name, {"nvidia.com/gpu": 1}, nodeSelector={PRODUCT: A100_SHARED})


def fraction(name: str, mib: int) -> Obj:
    """A HAMi memory fraction of an H100."""
    pod = gpu_pod(name, {"nvidia.com/gpu": 1, "nvidia.com/gpumem": mib})
    pod["spec"]["nodeSelector"] = {PRODUCT: "NVIDIA-H100-80GB-HBM3"}
    return pod


def wait_until_shared(hook: Webhook, namespace: str, pod: Obj) -> None:
    """Until the webhook's ResourceSlice cache has the shared node: it translates the pod."""
    wait_for(
        lambda: "patch" in hook.dry_run(namespace, pod),
        30,
        lambda: f"gpu2dra to see the shared devices: {hook.dry_run(namespace, pod)}",
    )


def unschedulable(api: client.ApiClient, namespace: str, name: str) -> bool:
    pod = read_pod(api, namespace, name)
    assert not pod["spec"].get("nodeName"), f"{name} must wait: the device is full"
    return any(
        c.get("reason") == "Unschedulable" and "cannot allocate all claims" in c.get("message", "")
        for c in pod.get("status", {}).get("conditions") or []
    )


def share_of(api: client.ApiClient, pod: Obj) -> tuple[str, str, Obj]:
    """(pool, device, consumed capacity) of the pod's one allocated device."""
    (result,) = allocated_devices(api, pod)
    return result["pool"], result["device"], result.get("consumedCapacity") or {}


def test_time_sliced_pods_share_one_gpu_by_its_shares(
    hook: Webhook,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    gpu_nodes: list[str],
) -> None:
    """On the newest release only: DRAConsumableCapacity is alpha and off in 1.34 (the
    last test shows what becomes of such pods there)."""
    node = add_gpu_node(api_client, gpu_nodes, gpus=1, consumable="4")
    hook.set_mode(api_client, namespace, "enabled")
    wait_until_shared(hook, namespace, sliced("probe"))
    _, checks = doctor(control_plane, "--policy", str(hook.policy))
    assert checks["sharing"]["status"] == "PASS", checks["sharing"]
    assert (
        f"gpu.nvidia.com pool {node}: 1 of 1 device(s) shared; gpu-0 offers memory 40Gi "
        "(default 0), shares 4 (default 1)"
    ) in checks["sharing"]["details"]

    core = client.CoreV1Api(api_client)
    for i in range(4):
        created, warnings = control_plane.create(namespace, sliced(f"ts-{i}"))
        assert "its claims take part of a GPU other pods share" in warnings
        assert "nodeSelector" not in created["spec"]
        assert "limits" not in created["spec"]["containers"][0]["resources"]
    pods = [wait_for_pod_scheduled(api_client, namespace, f"ts-{i}") for i in range(4)]
    shares = [share_of(api_client, p) for p in pods]
    assert {(pool, device) for pool, device, _ in shares} == {(node, "gpu-0")}, shares
    # Each took one share; memory, consumable too, by its request policy's default: none.
    assert all(taken == {"shares": "1", "memory": "0"} for _, _, taken in shares), shares
    (claim, *_) = pod_resource_claims(api_client, pods[0])
    (request,) = claim["spec"]["devices"]["requests"]
    assert request["exactly"]["capacity"] == {"requests": {"shares": "1"}}

    control_plane.create(namespace, sliced("ts-4"))
    wait_for(lambda: unschedulable(api_client, namespace, "ts-4"), 60, "ts-4 refused")
    said = gpu2dra(control_plane.kubeconfig, "explain", "pod", "ts-4", "-n", namespace).stdout
    assert (
        "capacity exhausted: the matching devices are allocated to other claims, or their "
        "shared capacity is consumed;"
    ) in said, said
    assert (
        f"{node}/gpu-0: matches and is shared, but 4 of its 4 shares consumed by other "
        "claims, this request needs 1"
    ) in said, said

    core.delete_namespaced_pod("ts-0", namespace, grace_period_seconds=0)
    fifth = wait_for_pod_scheduled(api_client, namespace, "ts-4", timeout=120)
    assert share_of(api_client, fifth)[:2] == (node, "gpu-0")


def test_memory_fractions_share_a_gpu_while_they_fit(
    hook: Webhook,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    gpu_nodes: list[str],
) -> None:
    """On the newest release only: DRAConsumableCapacity is alpha and off in 1.34 (the
    last test shows what becomes of such pods there)."""
    node = add_gpu_node(api_client, gpu_nodes, product=H100_80GB_HBM3, consumable="memory")
    hook.set_mode(api_client, namespace, "enabled")
    wait_until_shared(hook, namespace, fraction("probe", 40000))

    for i in range(2):  # 2 x 40000 MiB of its 81559 MiB
        control_plane.create(namespace, fraction(f"mem-{i}", 40000))
    pods = [wait_for_pod_scheduled(api_client, namespace, f"mem-{i}") for i in range(2)]
    assert [share_of(api_client, p) for p in pods] == [(node, "gpu-0", {"memory": "40000Mi"})] * 2
    control_plane.create(namespace, fraction("mem-2", 40000))
    wait_for(lambda: unschedulable(api_client, namespace, "mem-2"), 60, "mem-2 refused")
    control_plane.create(namespace, fraction("mem-3", 1500))  # what is left still fits
    assert share_of(api_client, wait_for_pod_scheduled(api_client, namespace, "mem-3"))[:2] == (
        node,
        "gpu-0",
    )


@pytest.mark.every_release
def test_where_no_device_is_shared_pods_stay_on_the_device_plugin(
    hook: Webhook,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    gpu_nodes: list[str],
    release: str,
) -> None:
    """On 1.34 the node's slice asks for sharing and the API server drops it; on 1.37 the node
    does not share. Either way the pod stays, on the device plugin's replicas, and says what
    to configure."""
    add_gpu_node(
        api_client,
        gpu_nodes,
        consumable="4" if release == "v1.34" else None,
        labels={PRODUCT: A100_SHARED, "nvidia.com/gpu.replicas": "4"},
        extended={"nvidia.com/gpu": "4"},
    )
    hook.set_mode(api_client, namespace, "enabled")
    _, checks = doctor(control_plane, "--policy", str(hook.policy))
    if release == "v1.34":  # on 1.37 other tests' shared nodes may still be there
        assert checks["sharing"]["status"] == "WARN", checks["sharing"]
        assert "--consumable-shares" in checks["sharing"]["fix"]
    created, warnings = control_plane.create(namespace, sliced("stays"))
    assert "resourceClaims" not in created["spec"]
    assert created["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    assert "publishes devices with allowMultipleAllocations" in warnings, warnings
    assert "--consumable-shares=<the device plugin's replicas>" in warnings
    assert "DRAConsumableCapacity" in warnings
    bound = wait_for_pod_scheduled(api_client, namespace, "stays")
    assert bound["spec"]["nodeName"] == gpu_nodes[0]

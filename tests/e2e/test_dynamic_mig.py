"""MIG pods on NVIDIA's DynamicMIG devices (the driver's DynamicMIG gate with
DRAPartitionableDevices, on by default in 1.36 and 1.37): a fake node publishes what the driver
publishes for an H200 (tests/driver/golden/h200-x1-dynamic-mig-slices.json: every MIG placement
a device drawing on the GPU's shared counters, none with a UUID of its own), and the real
scheduler allocates the claims gpu2dra writes for `nvidia.com/mig-<profile>` pods, counters
and memory slices included."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from tests.e2e.inspecting import gpu2dra, unschedulable
from tests.support.cluster import (
    H200_141GB,
    _create_cluster_object,
    allocated_devices,
    create_node,
    dynamic_mig_slices,
    gpu_pod,
    read_pod,
    wait_for_pod_scheduled,
)
from tests.support.controlplane import ControlPlane
from tests.support.webhook import Webhook

Obj = dict[str, Any]


def add_dynamic_mig_node(api: client.ApiClient, names: list[str], name: str) -> str:
    node = create_node(api, name)
    owner = {
        "apiVersion": "v1",
        "kind": "Node",
        "name": name,
        "uid": node["metadata"]["uid"],
        "controller": True,
    }
    for body in dynamic_mig_slices(name, H200_141GB):
        body["metadata"]["ownerReferences"] = [owner]
        _create_cluster_object(api, "resourceslices", body)
    names.append(name)
    return name


def device_of(api: client.ApiClient, namespace: str, pod: str) -> Obj:
    (device,) = allocated_devices(api, read_pod(api, namespace, pod))
    return device


def placement(device: str) -> tuple[int, ...]:
    """The memory slices a DynamicMIG device takes, from its name and the H200's profiles:
    gpu-0-mig-<profile>-<GI profile ID>-<start>."""
    *_, profile_id, start = device.split("-")
    size = {"19": 1, "20": 1, "15": 2, "14": 2, "9": 4, "5": 4, "0": 8}[profile_id]
    return tuple(range(int(start), int(start) + size))


def test_mig_pods_are_allocated_on_the_drivers_counters(
    webhook: Webhook,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    gpu_nodes: list[str],
) -> None:
    node = add_dynamic_mig_node(api_client, gpu_nodes, f"dyn-mig-{namespace[-5:]}")
    webhook.set_mode(api_client, namespace, "enabled")

    stored, _ = control_plane.create(namespace, gpu_pod("small", {"nvidia.com/mig-1g.18gb": 1}))
    assert stored["spec"]["resourceClaims"], "gpu2dra translated the MIG pod"
    assert wait_for_pod_scheduled(api_client, namespace, "small")["spec"]["nodeName"] == node
    small = device_of(api_client, namespace, "small")
    assert small["pool"] == node
    assert small["device"].startswith("gpu-0-mig-1g18gb-19-")

    control_plane.create(namespace, gpu_pod("half", {"nvidia.com/mig-3g.71gb": 1}))
    wait_for_pod_scheduled(api_client, namespace, "half")
    half = device_of(api_client, namespace, "half")
    assert half["device"].startswith("gpu-0-mig-3g71gb-9-")
    # The counters keep the two apart: no memory slice is taken twice.
    assert not set(placement(small["device"])) & set(placement(half["device"]))

    # The whole GPU's placement needs every memory slice: none is left.
    control_plane.create(namespace, gpu_pod("whole", {"nvidia.com/mig-7g.141gb": 1}))
    unschedulable(api_client, namespace, "whole")

    # explain names the MIG device without a UUID of its own, and its GPU.
    text = gpu2dra(
        control_plane.kubeconfig, "explain", "pod", "small", "-n", namespace, check=0
    ).stdout
    assert f"allocated: {node}/{small['device']}" in text, text
    assert "FAIL" not in text, text


def test_explain_and_capacity_see_that_the_counters_are_spent(
    webhook: Webhook,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    gpu_nodes: list[str],
) -> None:
    add_dynamic_mig_node(api_client, gpu_nodes, f"dyn-cnt-{namespace[-5:]}")
    webhook.set_mode(api_client, namespace, "enabled")
    control_plane.create(namespace, gpu_pod("small", {"nvidia.com/mig-1g.18gb": 1}))
    wait_for_pod_scheduled(api_client, namespace, "small")
    control_plane.create(namespace, gpu_pod("whole", {"nvidia.com/mig-7g.141gb": 1}))
    unschedulable(api_client, namespace, "whole")
    # explain fails the request (exit 3: a step says FAIL): the counters are spent.
    text = gpu2dra(
        control_plane.kubeconfig, "explain", "pod", "whole", "-n", namespace, check=3
    ).stdout
    assert "the shared counters they consume are taken by other devices" in text, text
    # Not "1 free on node ... is enough": the 7g placement's memory slices are taken.
    assert "is enough" not in text, text
    capacity = gpu2dra(control_plane.kubeconfig, "capacity", check=0).stdout
    # Not "fits: 1 needed of ... MIG profile 7g.141gb, 1 free": its counters are spent.
    assert "MIG profile 7g.141gb, 1 free" not in capacity, capacity

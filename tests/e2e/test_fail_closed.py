"""Fail closed, on the real control plane: a pod gpu2dra cannot translate whole (one container
it cannot translate, a GPU scheduler's annotation, a scheduler that allocates no claims, a
YuniKorn queue label while the pod still names the default scheduler) is admitted as it is,
with a warning that names what stopped it, and is scheduled as it would be without gpu2dra
(through the device plugin, or the in-tree path where a DeviceClass serves its resource);
`explain` says why. HAMi's card selection becomes device selectors that the real scheduler
follows."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kubernetes import client

from tests.e2e.inspecting import explain, unschedulable
from tests.support.cluster import (
    add_gpu_node,
    create_node,
    gpu_pod,
    label,
    read_pod,
    wait_for_pod_scheduled,
)
from tests.support.controlplane import ControlPlane
from tests.support.webhook import Webhook

Obj = dict[str, Any]
pytestmark = pytest.mark.every_release
LEFT = "pod left as is"


def two_containers(name: str, second: Obj) -> Obj:
    """A pod whose first container gpu2dra could translate, and `second` beside it."""
    pod = gpu_pod(name, {"nvidia.com/gpu": 1})
    pod["spec"]["containers"].append({"name": "side", "image": "cuda:12", **second})
    return pod


@pytest.mark.parametrize("case", ["companion", "scheduler", "annotation", "yunikorn"])
def test_a_pod_that_cannot_move_whole_stays_on_the_device_plugin(
    control_plane: ControlPlane,
    api_client: client.ApiClient,
    webhook: Webhook,
    namespace: str,
    gpu_nodes: list[str],
    case: str,
) -> None:
    label(api_client, namespace, "enabled")
    add_gpu_node(api_client, gpu_nodes, gpus=2)
    # A device-plugin node, with HAMi's cores beside its GPUs (as HAMi's device plugin offers)
    plugin = f"plugin-{uuid.uuid4().hex[:6]}"
    create_node(api_client, plugin, extended={"nvidia.com/gpu": "2", "nvidia.com/gpucores": "200"})
    gpu_nodes.append(plugin)
    pod, said = {
        "companion": (
            two_containers("p", {"resources": {"limits": {"nvidia.com/gpucores": "30"}}}),
            "container 'side' asks for nvidia.com/gpucores: no mapping covers it",
        ),
        "scheduler": (
            gpu_pod("p", {"nvidia.com/gpu": 1}, schedulerName="hami-scheduler"),
            "spec.schedulerName 'hami-scheduler' is not a scheduler known to allocate DRA claims",
        ),
        "annotation": (
            {
                **gpu_pod("p", {"nvidia.com/gpu": 1}),
                "metadata": {"name": "p", "annotations": {"nvidia.com/vgpu-mode": "mig"}},
            },
            "annotation nvidia.com/vgpu-mode is read by a GPU scheduler",
        ),
        # YuniKorn's admission controller would set schedulerName: yunikorn after gpu2dra;
        # none runs here, so the default scheduler binds it, through the device plugin.
        "yunikorn": (
            {
                **gpu_pod("p", {"nvidia.com/gpu": 1}),
                "metadata": {"name": "p", "labels": {"yunikorn.apache.org/queue": "root.ml"}},
            },
            "label yunikorn.apache.org/queue marks the pod for YuniKorn",
        ),
    }[case]
    stored, warnings = control_plane.create(namespace, pod)
    assert said in warnings and LEFT in warnings, warnings
    assert "resourceClaims" not in stored["spec"]

    def limits(p: Obj) -> list[Obj]:
        return [
            {k: str(v) for k, v in c["resources"]["limits"].items()}
            for c in p["spec"]["containers"]
        ]

    assert limits(stored) == limits(pod)
    if case != "scheduler":  # no hami-scheduler runs here to bind it
        # Left as it was: the device plugin serves it, or, for nvidia.com/gpu from 1.36, the
        # driver chart's gpu.nvidia.com in-tree (the scheduler's claim, not gpu2dra's).
        bound = wait_for_pod_scheduled(api_client, namespace, "p")
        in_tree = bound["status"].get("extendedResourceClaimStatus")
        assert bound["spec"]["nodeName"] == plugin or in_tree, bound["status"]
    explained = explain(control_plane.kubeconfig, "p", namespace)
    assert "gpu2dra leaves this pod as it is" in explained, explained
    assert said in explained, explained


def test_hami_card_selection_becomes_device_selectors(
    control_plane: ControlPlane,
    api_client: client.ApiClient,
    webhook: Webhook,
    namespace: str,
    gpu_nodes: list[str],
) -> None:
    """nvidia.com/nouse-gputype: A100 keeps the pod off A100s, as HAMi would: on a node of two
    A100s the claim cannot be allocated; with use-gputype: A100 it can."""
    label(api_client, namespace, "enabled")
    add_gpu_node(api_client, gpu_nodes, gpus=2)  # A100-SXM4-40GB
    for name, key in (("picky", "nvidia.com/nouse-gputype"), ("fits", "nvidia.com/use-gputype")):
        pod = gpu_pod(name, {"nvidia.com/gpu": 1})
        pod["metadata"]["annotations"] = {key: "A100"}
        stored, _ = control_plane.create(namespace, pod)
        assert stored["spec"]["resourceClaims"], f"{name} is translated"
    wait_for_pod_scheduled(api_client, namespace, "fits")

    assert "cannot allocate all claims" in unschedulable(api_client, namespace, "picky")
    assert not read_pod(api_client, namespace, "picky")["spec"].get("nodeName")

"""Fail closed on capacity on the real API server: with no DRA device published and only a
Karpenter with its defaults, an enabled namespace's GPU pod stays on the device plugin with a
warning that names Karpenter; once a node publishes gpu.nvidia.com devices, the same pod is
translated (the webhook's catalog follows its slice and Deployment watches)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from tests.support.autoscalers import KARPENTER_LABELS, cluster_autoscaler_labels, deployed
from tests.support.cluster import add_gpu_node, gpu_pod, label
from tests.support.controlplane import ControlPlane
from tests.support.webhook import Webhook

Obj = dict[str, Any]
pytestmark = pytest.mark.every_release
GPU = {"nvidia.com/gpu": 1}


@pytest.fixture
def karpenter(api_client: client.ApiClient, namespace: str) -> Iterator[str]:
    """Karpenter's Deployment as its chart installs it, with its defaults."""
    image = "public.ecr.aws/karpenter/controller:1.8.1"
    with deployed(api_client, namespace, "karpenter", KARPENTER_LABELS, image):
        yield namespace


def dry_run(plane: ControlPlane, namespace: str, name: str) -> tuple[Obj, str]:
    return plane.create(namespace, gpu_pod(name, GPU), "--dry-run=server")


def test_a_pod_with_nowhere_to_run_stays_until_a_node_publishes_devices(
    control_plane: ControlPlane,
    api_client: client.ApiClient,
    webhook: Webhook,
    namespace: str,
    gpu_nodes: list[str],
    karpenter: str,
    no_devices_elsewhere: None,
) -> None:
    label(api_client, namespace, "enabled")
    deadline = time.monotonic() + 30
    while True:  # the webhook sees the Deployment through its watch
        stored, warnings = dry_run(control_plane, namespace, "train")
        if "Karpenter" in warnings or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert "resourceClaims" not in stored["spec"]
    assert (
        "no ResourceSlice publishes a device of DeviceClass gpu.nvidia.com (driver "
        "gpu.nvidia.com), and no node autoscaler can add one: Karpenter v1.8.1 "
        f"({namespace}/karpenter): --ignore-dra-requests is true (its default)"
    ) in " ".join(warnings.split())
    assert "pod left on the device plugin (policy noDraCapacity: leave" in warnings

    add_gpu_node(api_client, gpu_nodes, gpus=1)
    started = time.monotonic()
    while True:
        stored, warnings = dry_run(control_plane, namespace, "train")
        if "resourceClaims" in stored["spec"] or time.monotonic() - started > 30:
            break
        time.sleep(0.1)
    print(f"translated {time.monotonic() - started:.2f}s after the node's slice was created")
    assert stored["spec"]["resourceClaims"]
    assert "no ResourceSlice" not in warnings


def test_a_cluster_autoscaler_that_adds_dra_nodes_lets_the_pod_be_translated(
    control_plane: ControlPlane,
    api_client: client.ApiClient,
    webhook: Webhook,
    namespace: str,
    no_devices_elsewhere: None,
) -> None:
    """With no device published, a Cluster Autoscaler of the clusterapi provider from 1.37.0
    (whose node groups at zero predict devices) gets the pod translated; one of the aws
    provider does not, and the warning names it."""
    label(api_client, namespace, "enabled")
    aws = "registry.k8s.io/autoscaling/cluster-autoscaler:v1.37.0"
    labels = cluster_autoscaler_labels("aws")
    with deployed(api_client, namespace, "ca", labels, aws, ["--cloud-provider=aws"]):
        warnings = ""
        deadline = time.monotonic() + 30
        while "Cluster Autoscaler" not in warnings and time.monotonic() < deadline:
            stored, warnings = dry_run(control_plane, namespace, "train")
            time.sleep(0.2)
        assert "resourceClaims" not in stored["spec"]
        assert (
            f"no node autoscaler can add one: Cluster Autoscaler v1.37.0 ({namespace}/ca): "
            in " ".join(warnings.split())
        )
    labels = cluster_autoscaler_labels("clusterapi")
    args = ["--cloud-provider=clusterapi"]
    with deployed(api_client, namespace, "ca", labels, aws, args):
        deadline = time.monotonic() + 30
        while "resourceClaims" not in stored["spec"] and time.monotonic() < deadline:
            stored, warnings = dry_run(control_plane, namespace, "train")
            time.sleep(0.2)
        assert stored["spec"]["resourceClaims"]
        assert "no ResourceSlice" not in warnings

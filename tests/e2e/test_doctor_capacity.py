"""Doctor's `capacity` and `autoscaling` checks against the real API server: an enabled
namespace whose pod asks for two GPUs of a product one node publishes once, and a Karpenter
Deployment with its defaults."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from kubernetes import client

from tests.e2e.inspecting import doctor
from tests.support.cluster import (
    GpuProduct,
    create_gpu_node,
    create_namespace,
    create_nvidia_device_classes,
    delete_namespace,
    delete_node,
    gpu_pod,
    label,
    wait_for_default_service_account,
)
from tests.support.controlplane import ControlPlane

pytestmark = pytest.mark.every_release
GFD_PRODUCT = "nvidia.com/gpu.product"
KARPENTER_IMAGE = "public.ecr.aws/karpenter/controller:1.8.1"


@pytest.fixture
def short(api_client: client.ApiClient, control_plane: ControlPlane) -> Iterator[tuple[str, str]]:
    """(namespace, product as GFD labels it): the pod asks for 2, one device is published."""
    product = GpuProduct(
        f"NVIDIA E2E-{uuid.uuid4().hex[:6]}",
        "Ampere",
        81920,
        "8.0.0",
        108,
        inventory="A100-SXM4-80GB",
    )
    gfd = product.name.replace(" ", "-")
    ns = create_namespace(api_client, "doctor-capacity-")
    node = f"doc-cap-{ns[-5:]}"
    labels = {"app.kubernetes.io/name": "karpenter"}
    karpenter = {
        "metadata": {"name": "karpenter", "labels": labels},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "controller", "image": KARPENTER_IMAGE}]},
            },
        },
    }
    try:
        create_nvidia_device_classes(api_client)
        create_gpu_node(api_client, node, product=product, gpus=1)
        wait_for_default_service_account(api_client, ns)
        label(api_client, ns, "enabled")
        client.AppsV1Api(api_client).create_namespaced_deployment(ns, karpenter)
        pod = gpu_pod("train", {"nvidia.com/gpu": 2}, nodeSelector={GFD_PRODUCT: gfd})
        control_plane.create(ns, pod)
        yield ns, gfd
    finally:
        delete_namespace(api_client, ns)
        delete_node(api_client, node)


def test_doctor_warns_of_a_namespace_short_of_devices_and_names_the_autoscaler(
    control_plane: ControlPlane, short: tuple[str, str]
) -> None:
    ns, product = short
    _, checks = doctor(control_plane)
    shape = f"gpu.nvidia.com devices of product {product}"
    capacity = checks["capacity"]
    assert capacity["status"] == "WARN", capacity
    assert f"{ns} needs 1 more {shape}" in capacity["summary"]
    assert f"{ns}: 2 needed of {shape}, 1 free" in capacity["details"]
    autoscaling = checks["autoscaling"]
    karpenter = [d for d in autoscaling["details"] if d.startswith(f"Karpenter v1.8.1 ({ns}/")]
    assert karpenter == [
        f"Karpenter v1.8.1 ({ns}/karpenter): cannot add DRA nodes: --ignore-dra-requests is true "
        "(its default): it skips pods with claims (setting it false is not enough: the cloud "
        "provider must also predict gpu.nvidia.com devices for its instance types, which the "
        "AWS, Azure and kwok providers do not)"
    ]

"""`gpu2dra capacity` against the real control plane: an audit namespace's Deployment, half on
the device plugin and half Pending, and an enabled namespace's pod that the webhook translated
and the scheduler gave a DRA device, against two published devices of one product."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest
from kubernetes import client

from tests.e2e.inspecting import Obj, gpu2dra, pod_template
from tests.support.cluster import (
    GpuProduct,
    allocated_devices,
    create_gpu_node,
    create_namespace,
    create_node,
    delete_namespace,
    delete_node,
    gpu_pod,
    label,
    wait_for,
    wait_for_default_service_account,
    wait_for_pod_scheduled,
)
from tests.support.controlplane import ControlPlane
from tests.support.webhook import Webhook

pytestmark = pytest.mark.every_release
GFD_PRODUCT = "nvidia.com/gpu.product"


def train(product: str) -> Obj:
    """Three replicas of two GPUs of `product`, picked by its GFD label."""
    template = pod_template({"nvidia.com/gpu": 2})
    template["spec"]["nodeSelector"] = {GFD_PRODUCT: product}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "train"},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": template["metadata"]["labels"]},
            "template": template,
        },
    }


@pytest.fixture
def cluster(
    webhook: Webhook, api_client: client.ApiClient, control_plane: ControlPlane
) -> Iterator[tuple[str, str, str]]:
    """(audit namespace, enabled namespace, the product as GFD labels it): a product no other
    test publishes, on a DRA node with two GPUs and a device-plugin node with four."""
    product = GpuProduct(
        f"NVIDIA E2E-{uuid.uuid4().hex[:6]}",
        "Ampere",
        81920,
        "8.0.0",
        108,
        inventory="A100-SXM4-80GB",
    )
    gfd = product.name.replace(" ", "-")
    audit, enabled = (create_namespace(api_client, f"capacity-{m}-") for m in ("audit", "on"))
    dra_node, plugin_node = f"cap-dra-{audit[-5:]}", f"cap-plugin-{audit[-5:]}"
    try:
        create_gpu_node(api_client, dra_node, product=product, gpus=2)
        create_node(
            api_client, plugin_node, labels={GFD_PRODUCT: gfd}, extended={"nvidia.com/gpu": "4"}
        )
        for ns, mode in ((audit, "audit"), (enabled, "enabled")):
            wait_for_default_service_account(api_client, ns)
            label(api_client, ns, mode)
        control_plane.create(audit, train(gfd))
        control_plane.create(
            enabled, gpu_pod("solo", {"nvidia.com/gpu": 1}, nodeSelector={GFD_PRODUCT: gfd})
        )
        solo = wait_for_pod_scheduled(api_client, enabled, "solo", 60)
        assert solo["spec"]["nodeName"] == dra_node
        wait_for(lambda: allocated_devices(api_client, solo) or None, 30, "solo's device")

        def two_bound() -> bool:
            pods = client.CoreV1Api(api_client).list_namespaced_pod(audit).items
            return len(pods) == 3 and sum(bool(p.spec.node_name) for p in pods) == 2

        wait_for(two_bound, 60, "two of train's three pods bound to the device-plugin node")
        yield audit, enabled, gfd
    finally:
        for ns in (audit, enabled):
            delete_namespace(api_client, ns)
        delete_node(api_client, dra_node)
        delete_node(api_client, plugin_node)


def test_capacity_says_what_enabling_needs_against_free_devices(
    control_plane: ControlPlane, cluster: tuple[str, str, str]
) -> None:
    audit, enabled, product = cluster
    shape = f"gpu.nvidia.com devices of product {product}"
    body = json.loads(gpu2dra(control_plane.kubeconfig, "capacity", "-o", "json", check=0).stdout)
    plans = {p["name"]: p for p in body["namespaces"]}
    counts = ("running", "pending", "replicas", "held", "needs", "free", "short")
    (train_needs,) = plans[audit]["needs"]
    assert train_needs["shape"] == shape
    assert [train_needs[k] for k in counts] == [4, 2, 6, 0, 6, 1, 5]
    assert plans[audit]["frees"] == {"nvidia.com/gpu": 4}
    (solo_needs,) = plans[enabled]["needs"]
    assert [solo_needs[k] for k in counts] == [1, 0, 0, 1, 0, 1, 0]
    (pool,) = [p for p in body["pools"] if p["product"] == product]
    assert (pool["device_class"], pool["published"], pool["free"]) == ("gpu.nvidia.com", 2, 1)
    assert f"enabling {audit} needs 5 more {shape} (6 needed, 1 free)" in body["sentences"]
    assert f"{enabled} (enabled) needs no more {shape}: its pods hold 1" in body["sentences"]

    text = gpu2dra(control_plane.kubeconfig, "capacity", check=0).stdout
    print(text)  # the example the docs show
    assert f"  enabling {audit} needs 5 more {shape} (6 needed, 1 free)\n" in text
    assert (
        f"  {audit}: its bound pods free 4 nvidia.com/gpu on the device plugin as they move\n"
        in text
    )

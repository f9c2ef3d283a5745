"""Karpenter with a cloud provider that predicts DRA devices: `karpenter-dra`, its v1.15.0 kwok
provider whose GPU instance types carry gpu.nvidia.com ResourceSlice templates (the devices
NVIDIA's driver publishes for A100-SXM4-40GB GPUs; tests/karpenter/kwokdra/), run with
--ignore-dra-requests=false beside the control plane, a GPU NodePool at zero nodes, and a
stand-in for the driver's kubelet plugin that publishes each new GPU Node's ResourceSlice
(tests/support/karpenter.py SlicePublisher). With gpu2dra's policy saying `noDraCapacity:
translate` (what the operator of such a provider sets: gpu2dra cannot see that the provider
predicts devices), an enabled namespace's pod is translated with a warning that names
Karpenter; Karpenter launches a node for its claim; the scheduler allocates the claim from the
node's slice and binds the pod. The case of issue 41 where translation and autoscaling agree."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from kubernetes import client

from tests.e2e.inspecting import gpu2dra
from tests.support.autoscalers import KARPENTER_LABELS, deployed
from tests.support.cluster import (
    allocated_devices,
    create_nvidia_device_classes,
    gpu_pod,
    label,
    read_pod,
    wait_for,
)
from tests.support.controlplane import ControlPlane
from tests.support.karpenter import NODEPOOL, VERSION, Karpenter, running_karpenter
from tests.support.webhook import Webhook, running_webhook

pytestmark = pytest.mark.every_release
IGNORE_NOT = "--ignore-dra-requests=false"


@pytest.fixture(scope="module")
def webhook(
    control_plane: ControlPlane,
    api_client: client.ApiClient,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Webhook]:
    """gpu2dra serving with the chart's policy but `noDraCapacity: translate`, for this module
    only (conftest's `webhook` serves the default, `leave`)."""
    work_dir = tmp_path_factory.mktemp("gpu2dra-karpenter-dra")
    policy = {"noDraCapacity": "translate"}
    yield from running_webhook(control_plane, api_client, work_dir, policy=policy)


@pytest.fixture(scope="module")
def karpenter(
    control_plane: ControlPlane,
    api_client: client.ApiClient,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Karpenter]:
    """karpenter-dra running with --ignore-dra-requests=false, its GPU Nodes' slices published."""
    create_nvidia_device_classes(api_client)
    work_dir = tmp_path_factory.mktemp("karpenter-dra")
    for karpenter in running_karpenter(control_plane, api_client, work_dir, dra=True):
        karpenter.start(IGNORE_NOT)
        yield karpenter


@pytest.fixture
def recorded(api_client: client.ApiClient, namespace: str) -> Iterator[None]:
    """Karpenter's Deployment as its chart labels it, with the flag this one runs with: what
    gpu2dra reads of it (the process here runs outside the cluster)."""
    image = f"public.ecr.aws/karpenter/controller:{VERSION.removeprefix('v')}"
    with deployed(api_client, namespace, "karpenter", KARPENTER_LABELS, image, [IGNORE_NOT]):
        yield


@pytest.mark.usefixtures("no_devices_elsewhere", "recorded")
def test_a_provider_that_predicts_devices_launches_a_node_for_a_translated_pod(
    karpenter: Karpenter,
    webhook: Webhook,
    control_plane: ControlPlane,
    api_client: client.ApiClient,
    namespace: str,
) -> None:
    label(api_client, namespace, "enabled")
    probe = gpu_pod("probe", {"nvidia.com/gpu": 1})
    wait_for(  # the webhook's watch has seen Karpenter's Deployment
        lambda: (
            "Karpenter v1.15.0" in control_plane.create(namespace, probe, "--dry-run=server")[1]
        ),
        30,
        "gpu2dra to name Karpenter",
    )
    started = time.monotonic()
    stored, warnings = control_plane.create(namespace, gpu_pod("trainer", {"nvidia.com/gpu": 1}))
    said = " ".join(warnings.split())
    assert stored["spec"]["resourceClaims"], stored["spec"]
    assert "no node autoscaler can add one: Karpenter v1.15.0" in said, said
    assert "translated as the policy's noDraCapacity: translate says" in said, said

    [claim] = wait_for(lambda: karpenter.nodeclaims() or None, 60, "a NodeClaim")
    to_claim = time.monotonic() - started
    assert claim["metadata"]["labels"]["karpenter.sh/nodepool"] == NODEPOOL
    # Karpenter chose the node for its devices (the claim asks for no nvidia.com/gpu) and
    # waits for the driver's pool before it calls the node initialized.
    assert "nvidia.com/gpu" not in claim["spec"]["resources"].get("requests", {})
    annotations = claim["metadata"].get("annotations", {})
    assert annotations.get("karpenter.sh/requested-dra-drivers") == "gpu.nvidia.com", annotations

    def bound() -> str | None:
        node: str | None = read_pod(api_client, namespace, "trainer")["spec"].get("nodeName")
        return node

    node = wait_for(bound, 60 - to_claim, "the pod bound to Karpenter's node")
    to_bound = time.monotonic() - started
    launched = client.CoreV1Api(api_client).read_node(node)
    # The cheapest instance type whose templates hold a gpu.nvidia.com device.
    assert launched.metadata.labels["node.kubernetes.io/instance-type"] == "gpu-1x"
    assert karpenter.publisher is not None and node in karpenter.publisher.published
    pod = read_pod(api_client, namespace, "trainer")
    [device] = allocated_devices(api_client, pod)
    assert device["driver"] == "gpu.nvidia.com" and device["pool"] == node, device
    print(
        f"NodeClaim after {to_claim:.2f}s, pod bound to {node}, claim allocated {device}"
        f" after {to_bound:.2f}s"
    )
    assert to_bound < 60

    explained = gpu2dra(control_plane.kubeconfig, "explain", "pod", "trainer", "-n", namespace)
    failed = [line for line in explained.stdout.splitlines() if line.lstrip().startswith("FAIL")]
    assert failed == [], explained.stdout
    assert f"PASS  scheduled and bound to node {node}" in explained.stdout, explained.stdout
    print(explained.stdout)

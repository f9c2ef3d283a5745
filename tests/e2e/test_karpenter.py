"""Karpenter, the node autoscaler of most GPU clusters on AWS, as a real process beside the
control plane (its v1.15.0 kwok provider, tests/support/karpenter.py), with a GPU NodePool at
zero nodes whose instance types offer nvidia.com/gpu: a pod on the device plugin gets a node;
the same pod as gpu2dra translates it gets none, and Karpenter says why. The premise of
issue 41, on real parts: a translated pod can be left Pending for good where Karpenter adds
the nodes. With gpu2dra serving, an enabled namespace's pod that no DRA device could take stays
on the device plugin, says why, and gets Karpenter's node; where a node publishes devices, it
is translated and bound; `explain` names what Karpenter said of a translated pod."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from tests.e2e.inspecting import gpu2dra
from tests.support.autoscalers import KARPENTER_LABELS, deployed
from tests.support.cluster import (
    add_gpu_node,
    create_nvidia_device_classes,
    gpu_pod,
    label,
    read_pod,
    wait_for,
)
from tests.support.controlplane import REPO_ROOT, ControlPlane
from tests.support.karpenter import NODEPOOL, SKIPPED_DRA, VERSION, Karpenter, running_karpenter
from tests.support.webhook import Webhook

Obj = dict[str, Any]
pytestmark = pytest.mark.every_release
# What Karpenter's event on a skipped pod says (scheduling/events.go PodFailedToScheduleEvent).
DRA_EVENT = (
    "Failed to schedule pod, pod has Dynamic Resource Allocation requirements that are not yet"
    " supported by Karpenter"
)


@pytest.fixture(scope="module")
def karpenter(
    control_plane: ControlPlane,
    api_client: client.ApiClient,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Karpenter]:
    create_nvidia_device_classes(api_client)
    work_dir = tmp_path_factory.mktemp("karpenter")
    yield from running_karpenter(control_plane, api_client, work_dir)


@pytest.fixture
def defaults(karpenter: Karpenter) -> Iterator[Karpenter]:
    """Karpenter running with its defaults; afterwards stopped, its NodeClaims and Nodes gone,
    so each test starts at zero nodes."""
    karpenter.start()
    yield karpenter
    karpenter.stop()
    karpenter.remove()


def translated(namespace: str, pod: Obj) -> tuple[Obj, list[Obj]]:
    """The pod and its templates as `gpu2dra translate` writes them, offline (the templates
    first)."""
    done = subprocess.run(
        [sys.executable, "-m", "app", "translate", "-f", "-", "-n", namespace, "-o", "json"],
        input=json.dumps(pod),
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO_ROOT,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert (out["apiVersion"], out["kind"]) == ("v1", "List")
    *templates, document = out["items"]
    return document, templates


def karpenter_events(api: client.ApiClient, namespace: str, pod: str) -> list[str]:
    events = client.CoreV1Api(api).list_namespaced_event(
        namespace, field_selector=f"involvedObject.name={pod}"
    )
    return [
        f"{e.reason}: {e.message}"
        for e in events.items
        if (e.source and e.source.component == "karpenter") or e.reporting_component == "karpenter"
    ]


def test_a_device_plugin_pod_gets_a_node_from_karpenter(
    defaults: Karpenter,
    control_plane: ControlPlane,
    api_client: client.ApiClient,
    namespace: str,
) -> None:
    started = time.monotonic()
    control_plane.create(namespace, gpu_pod("trainer", {"nvidia.com/gpu": 1}))

    [claim] = wait_for(lambda: defaults.nodeclaims() or None, 60, "a NodeClaim")
    to_claim = time.monotonic() - started
    labels = claim["metadata"]["labels"]
    assert labels["karpenter.sh/nodepool"] == NODEPOOL
    assert claim["spec"]["resources"]["requests"]["nvidia.com/gpu"] == "1"

    def bound() -> str | None:
        node: str | None = read_pod(api_client, namespace, "trainer")["spec"].get("nodeName")
        return node

    node = wait_for(bound, 60 - to_claim, "the pod bound to Karpenter's node")
    to_bound = time.monotonic() - started
    # The Node is the NodeClaim's instance (the claim's nodeName may lag the binding).
    [claim] = defaults.nodeclaims()
    launched = client.CoreV1Api(api_client).read_node(node)
    assert launched.spec.provider_id == claim["status"]["providerID"]
    # The cheapest instance type with a GPU: gpu-1x, not gpu-8x.
    assert launched.metadata.labels["node.kubernetes.io/instance-type"] == "gpu-1x"
    print(f"NodeClaim after {to_claim:.2f}s, pod bound to {node} after {to_bound:.2f}s")


def test_a_translated_pod_gets_no_node_and_karpenter_says_why(
    defaults: Karpenter,
    control_plane: ControlPlane,
    api_client: client.ApiClient,
    namespace: str,
) -> None:
    pod, templates = translated(namespace, gpu_pod("trainer", {"nvidia.com/gpu": 1}))
    assert pod["spec"]["resourceClaims"] and templates
    for template in templates:
        control_plane.create(namespace, template)
    started = time.monotonic()
    control_plane.create(namespace, pod)

    def skipped() -> list[Obj] | None:
        lines = defaults.log_lines(SKIPPED_DRA)
        pod = {"name": "trainer", "namespace": namespace}
        return [line for line in lines if line.get("Pod") == pod] or None

    [line, *_] = wait_for(skipped, 30, "Karpenter to skip the translated pod")
    to_skip = time.monotonic() - started
    assert line["message"] == (
        "skipping pod with Dynamic Resource Allocation requirements, not yet supported by Karpenter"
    )
    wait_for(
        lambda: DRA_EVENT in "\n".join(karpenter_events(api_client, namespace, "trainer")),
        30 - to_skip,
        lambda: f"Karpenter's event; it said {karpenter_events(api_client, namespace, 'trainer')}",
    )
    # No NodeClaim while the pod waits, for 30 s from its create.
    while (waited := time.monotonic() - started) < 30:
        assert defaults.nodeclaims() == [], f"a NodeClaim after {waited:.1f}s"
        time.sleep(1)
    assert defaults.nodeclaims() == []
    stored = read_pod(api_client, namespace, "trainer")
    assert "nodeName" not in stored["spec"]
    scheduled = [c for c in stored["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert scheduled[0]["reason"] == "Unschedulable"
    events = karpenter_events(api_client, namespace, "trainer")
    print(f"Karpenter skipped the pod after {to_skip:.2f}s: {line['message']}; events {events}")
    said = gpu2dra(control_plane.kubeconfig, "explain", "pod", "trainer", "-n", namespace).stdout
    assert f"FAIL  Karpenter adds no node for it: {DRA_EVENT}" in said, said


@pytest.fixture
def recorded(api_client: client.ApiClient, namespace: str) -> Iterator[None]:
    """The Deployment that runs Karpenter in a cluster, as its chart labels it: what gpu2dra
    reads of it (the process here runs outside the cluster)."""
    image = f"public.ecr.aws/karpenter/controller:{VERSION.removeprefix('v')}"
    with deployed(api_client, namespace, "karpenter", KARPENTER_LABELS, image):
        yield


def bound(api: client.ApiClient, namespace: str, name: str, timeout: float) -> str:
    def node() -> str | None:
        found: str | None = read_pod(api, namespace, name)["spec"].get("nodeName")
        return found

    return wait_for(node, timeout, f"pod {name} bound")


@pytest.mark.usefixtures("no_devices_elsewhere", "recorded")
def test_an_enabled_namespace_without_dra_nodes_keeps_its_pod_on_karpenters_nodes(
    defaults: Karpenter,
    webhook: Webhook,
    control_plane: ControlPlane,
    api_client: client.ApiClient,
    namespace: str,
) -> None:
    label(api_client, namespace, "enabled")
    probe = gpu_pod("probe", {"nvidia.com/gpu": 1})
    dry_run = ("--dry-run=server",)
    wait_for(  # the webhook's watch has seen Karpenter's Deployment
        lambda: "Karpenter v1.15.0" in control_plane.create(namespace, probe, *dry_run)[1],
        30,
        "gpu2dra to name Karpenter",
    )
    started = time.monotonic()
    stored, warnings = control_plane.create(namespace, gpu_pod("trainer", {"nvidia.com/gpu": 1}))
    assert "resourceClaims" not in stored["spec"]
    assert "no node autoscaler can add one: Karpenter v1.15.0" in " ".join(warnings.split())
    assert "pod left on the device plugin (policy noDraCapacity: leave" in warnings
    node = bound(api_client, namespace, "trainer", 60)
    [claim] = defaults.nodeclaims()
    assert claim["spec"]["resources"]["requests"]["nvidia.com/gpu"] == "1"
    print(
        f"left on the device plugin; bound to Karpenter's {node} after "
        f"{time.monotonic() - started:.2f}s"
    )


@pytest.mark.usefixtures("no_devices_elsewhere", "recorded")
def test_an_enabled_namespace_with_free_dra_devices_is_translated_and_bound(
    defaults: Karpenter,
    webhook: Webhook,
    control_plane: ControlPlane,
    api_client: client.ApiClient,
    namespace: str,
    gpu_nodes: list[str],
) -> None:
    node = add_gpu_node(api_client, gpu_nodes, gpus=1)
    label(api_client, namespace, "enabled")
    probe = gpu_pod("probe", {"nvidia.com/gpu": 1})
    wait_for(  # the webhook's watch has seen the node's slice
        lambda: (
            "resourceClaims"
            in control_plane.create(namespace, probe, "--dry-run=server")[0]["spec"]
        ),
        30,
        "gpu2dra to translate",
    )
    stored, _ = control_plane.create(namespace, gpu_pod("trainer", {"nvidia.com/gpu": 1}))
    assert stored["spec"]["resourceClaims"]
    assert bound(api_client, namespace, "trainer", 60) == node
    assert defaults.nodeclaims() == []

"""Karpenter, the node autoscaler of most GPU clusters on AWS, as a real process beside the
control plane (its v1.15.0 kwok provider, tests/support/karpenter.py), with a GPU NodePool at
zero nodes whose instance types offer nvidia.com/gpu: a pod on the device plugin gets a node;
the same pod as gpu2dra translates it gets none, and Karpenter says why. The premise of
issue 41, on real parts: a translated pod can be left Pending for good where Karpenter adds
the nodes."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from tests.support.cluster import create_nvidia_device_classes, gpu_pod, read_pod, wait_for
from tests.support.controlplane import REPO_ROOT, ControlPlane
from tests.support.karpenter import NODEPOOL, SKIPPED_DRA, Karpenter, running_karpenter

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
    """The pod and its templates as `gpu2dra translate` writes them, offline."""
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
    [document] = out["documents"]
    templates: list[Obj] = out["templates"]
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

"""Pods Kueue queues, at admission on the real control plane: gpu2dra reads Kueue's ConfigMap
and Deployment from its watch caches and leaves a queued pod on the device plugin, where its
ClusterQueue counts it, when this Kueue would not count its claims. (Kueue's objects are its
v0.17.1 release's; its manager does not run here.)"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from tests.e2e.inspecting import explain
from tests.support.cluster import gpu_pod, wait_for
from tests.support.controlplane import ControlPlane
from tests.support.kueue import GATE_ON, KUEUE_MAPPED, kueue_objects, remove_kueue
from tests.support.webhook import Webhook

Obj = dict[str, Any]
QUEUE = {"kueue.x-k8s.io/queue-name": "team-a"}
pytestmark = pytest.mark.every_release


def queued(name: str, resources: dict[str, int]) -> Obj:
    pod = gpu_pod(name, resources)
    pod["metadata"]["labels"] = QUEUE
    return pod


def probe(hook: Webhook, namespace: str) -> Obj:
    """The webhook's answer for a queued one-GPU pod (dry run: nothing created)."""
    return hook.dry_run(namespace, queued("probe", {"nvidia.com/gpu": 1}))


@pytest.fixture
def kueue(control_plane: ControlPlane) -> Iterator[None]:
    yield
    remove_kueue(control_plane)


def test_a_queued_pod_stays_on_the_device_plugin_until_kueue_counts_its_claims(
    webhook: Webhook,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    kueue: None,
) -> None:
    webhook.set_mode(api_client, namespace, "enabled")
    control_plane.kubectl("apply", "-f", "-", stdin=kueue_objects(KUEUE_MAPPED))
    wait_for(lambda: "patch" not in probe(webhook, namespace), 30, "gpu2dra to see Kueue")
    before = webhook.metric("gpu2dra_outcomes_total", code="kueue-gate-off")

    stored, warnings = control_plane.create(namespace, queued("off", {"nvidia.com/gpu": 1}))
    assert "queued by Kueue v0.17 with its DRA gate DynamicResourceAllocation off" in warnings
    assert "resourceClaims" not in stored["spec"]
    assert stored["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    assert webhook.metric("gpu2dra_outcomes_total", code="kueue-gate-off") - before == 1
    explained = explain(control_plane.kubeconfig, "off", namespace, "--policy", str(webhook.policy))
    assert "not translated (1 x nvidia.com/gpu): queued by Kueue v0.17 with its DRA gate" in (
        explained
    )
    # A pod no queue holds is translated as ever.
    plain, _ = control_plane.create(namespace, gpu_pod("plain", {"nvidia.com/gpu": 1}))
    assert plain["spec"]["resourceClaims"]

    control_plane.kubectl("apply", "-f", "-", stdin=kueue_objects(KUEUE_MAPPED, GATE_ON))
    wait_for(lambda: "patch" in probe(webhook, namespace), 30, "gpu2dra to see the gate on")
    counted, warnings = control_plane.create(namespace, queued("on", {"nvidia.com/gpu": 1}))
    assert counted["spec"]["resourceClaims"] and "Kueue" not in warnings
    # Kueue v0.17 refuses the CEL selector of a MIG profile: held for good, so left.
    mig, warnings = control_plane.create(namespace, queued("mig", {"nvidia.com/mig-1g.5gb": 1}))
    assert "refuses DRA claims with CEL selectors" in warnings
    assert "resourceClaims" not in mig["spec"]

    remove_kueue(control_plane)  # Kueue gone: nothing left to count for
    wait_for(lambda: "patch" in probe(webhook, namespace), 60, "gpu2dra to see Kueue gone")
    again, _ = control_plane.create(namespace, queued("gone", {"nvidia.com/mig-1g.5gb": 1}))
    assert again["spec"]["resourceClaims"]

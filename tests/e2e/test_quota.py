"""A namespace never escapes its GPU quota through gpu2dra, on the real control plane: the API
server's ResourceQuota admission counts pods' `requests.nvidia.com/gpu` and claims'
`<class>.deviceclass.resource.k8s.io/devices`; the controller-manager's resourcequota and
resourceclaim controllers keep the counts and create claims; the scheduler allocates.

The namespace allows 2 GPUs (`requests.nvidia.com/gpu: "2"`); every pod asks for one.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
import yaml
from kubernetes import client

from tests.e2e.inspecting import doctor, gpu2dra
from tests.support.cluster import (
    RESOURCE_GROUP,
    RESOURCE_VERSION,
    add_gpu_node,
    gpu_pod,
    wait_for,
)
from tests.support.controlplane import ControlPlane
from tests.support.webhook import Webhook

Obj = dict[str, Any]
LEGACY = "requests.nvidia.com/gpu"
DEVICES = "gpu.nvidia.com.deviceclass.resource.k8s.io/devices"
LEFT = "gpu2dra left the pod on the device plugin, under its quota"
pytestmark = pytest.mark.every_release


def legacy_quota(plane: ControlPlane, namespace: str) -> None:
    plane.kubectl("-n", namespace, "create", "quota", "gpus", f"--hard={LEGACY}=2")


def probe(hook: Webhook, namespace: str) -> Obj:
    """The webhook's answer for a one-GPU pod in `namespace` (dry run: nothing created)."""
    return hook.dry_run(namespace, gpu_pod("probe", {"nvidia.com/gpu": 1}))


def wait_until_seen(hook: Webhook, namespace: str, *, translates: bool) -> None:
    """Wait until the webhook's quota cache has caught up with the namespace's quotas."""

    def seen() -> bool:
        return ("patch" in probe(hook, namespace)) == translates

    wait_for(seen, 30, f"gpu2dra to see the quotas of {namespace}")


def quota_status(api: client.ApiClient, namespace: str, name: str) -> Obj:
    quota = client.CoreV1Api(api).read_namespaced_resource_quota(name, namespace)
    return {"hard": dict(quota.status.hard or {}), "used": dict(quota.status.used or {})}


def allocated_in(api: client.ApiClient, namespace: str) -> int:
    """Devices allocated to the namespace's ResourceClaims right now."""
    claims = client.CustomObjectsApi(api).list_namespaced_custom_object(
        RESOURCE_GROUP, RESOURCE_VERSION, namespace, "resourceclaims"
    )["items"]
    return sum(
        len(
            (((c.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results")
            or []
        )
        for c in claims
    )


def node_of(api: client.ApiClient, namespace: str, pod: str) -> str | None:
    return client.CoreV1Api(api).read_namespaced_pod(pod, namespace).spec.node_name  # type: ignore[no-any-return]


def refused_event(api: client.ApiClient, namespace: str, pod: str) -> str | None:
    events = client.CoreV1Api(api).list_namespaced_event(
        namespace, field_selector=f"involvedObject.kind=Pod,involvedObject.name={pod}"
    )
    for e in events.items:
        if e.reason == "FailedResourceClaimCreation" and "exceeded quota" in (e.message or ""):
            return str(e.message)
    return None


def test_without_a_dra_quota_pods_stay_on_the_device_plugin_under_their_quota(
    webhook: Webhook,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
) -> None:
    webhook.set_mode(api_client, namespace, "enabled")
    legacy_quota(control_plane, namespace)
    wait_until_seen(webhook, namespace, translates=False)
    before = webhook.metric("gpu2dra_requests_total", endpoint="mutate", result="quota")

    code, checks = doctor(control_plane)
    assert code == 1 and checks["quota"]["status"] == "FAIL"
    assert checks["quota"]["fix"] == f"gpu2dra quota -n {namespace} | kubectl apply -f -"
    assert checks["quota"]["details"] == [
        f"{namespace}: ResourceQuota gpus limits {LEGACY} and no quota limits {DEVICES}"
    ]

    for name in ("p1", "p2"):
        stored, warnings = control_plane.create(namespace, gpu_pod(name, {"nvidia.com/gpu": 1}))
        assert LEFT in warnings and f"gpu2dra quota -n {namespace} | kubectl apply" in warnings
        assert "resourceClaims" not in stored["spec"]
        assert stored["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    third = control_plane.run_kubectl(
        "create", "-n", namespace, "-f", "-", stdin=gpu_pod("p3", {"nvidia.com/gpu": 1})
    )
    # Refused by the API server exactly as without gpu2dra.
    assert third.returncode == 1
    assert (
        'pods "p3" is forbidden: exceeded quota: gpus, requested: requests.nvidia.com/gpu=1, '
        "used: requests.nvidia.com/gpu=2, limited: requests.nvidia.com/gpu=2"
    ) in third.stderr
    after = webhook.metric("gpu2dra_requests_total", endpoint="mutate", result="quota")
    assert after - before == 3


def test_with_the_printed_dra_quota_pods_are_translated_and_held_to_it(
    webhook: Webhook,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    gpu_nodes: list[str],
) -> None:
    add_gpu_node(api_client, gpu_nodes, gpus=4)
    webhook.set_mode(api_client, namespace, "enabled")
    legacy_quota(control_plane, namespace)
    assert doctor(control_plane)[1]["quota"]["status"] == "FAIL"

    printed = gpu2dra(control_plane.kubeconfig, "quota", "-n", namespace, check=0).stdout
    print(f"\n$ gpu2dra quota -n {namespace}\n{printed}")
    (dra,) = [d for d in yaml.safe_load_all(printed) if d]
    assert dra["metadata"]["name"] == "gpu2dra-dra-gpus"
    assert dra["spec"]["hard"] == {DEVICES: "2"}
    control_plane.kubectl("apply", "-f", "-", stdin=printed)
    text = gpu2dra(control_plane.kubeconfig, "doctor").stdout
    print(f"$ gpu2dra doctor\n{text}")
    assert doctor(control_plane)[1]["quota"]["status"] == "PASS"
    wait_until_seen(webhook, namespace, translates=True)

    for name in ("p1", "p2", "p3"):
        stored, warnings = control_plane.create(namespace, gpu_pod(name, {"nvidia.com/gpu": 1}))
        assert LEFT not in warnings
        assert stored["spec"]["resourceClaims"], name
        assert "limits" not in stored["spec"]["containers"][0]["resources"]

    # Sample the namespace's allocated devices until both admitted pods are bound and the
    # third pod's claim has been refused, then a while longer: never more than 2.
    most, refused, deadline = 0, None, time.monotonic() + 90
    while True:
        most = max(most, allocated_in(api_client, namespace))
        refused = refused or refused_event(api_client, namespace, "p3")
        if refused and all(node_of(api_client, namespace, p) for p in ("p1", "p2")):
            break
        assert time.monotonic() < deadline, "p1, p2 bound and p3's claim refused"
        time.sleep(0.2)
    settle = time.monotonic() + 5
    while time.monotonic() < settle:
        most = max(most, allocated_in(api_client, namespace))
        time.sleep(0.2)
    assert most == 2
    print(f"p3's event: {refused}")
    assert (
        refused is not None
        and (
            "exceeded quota: gpu2dra-dra-gpus, requested: "
            f"{DEVICES}=1, used: {DEVICES}=2, limited: {DEVICES}=2"
        )
        in refused
    )
    p3 = client.CoreV1Api(api_client).read_namespaced_pod("p3", namespace)
    assert not p3.spec.node_name and not p3.status.resource_claim_statuses
    assert allocated_in(api_client, namespace) == 2

    # Claims count on the DRA side only: the legacy quota sees none (KEP-5004 is off in 1.35).
    dra_side = quota_status(api_client, namespace, "gpu2dra-dra-gpus")
    legacy = quota_status(api_client, namespace, "gpus")
    print(f"quota status: gpu2dra-dra-gpus {dra_side}; gpus {legacy}")
    assert dra_side["used"] == {DEVICES: "2"}
    assert legacy["used"] == {LEGACY: "0"}

    explained = gpu2dra(control_plane.kubeconfig, "explain", "pod", "p3", "-n", namespace).stdout
    print(f"$ gpu2dra explain pod p3 -n {namespace}\n{explained}")
    assert (
        "no ResourceClaim: the namespace's ResourceQuota refuses it (exceeded quota: " in explained
    )
    assert "not scheduled: the scheduler waits until its claims exist" in explained

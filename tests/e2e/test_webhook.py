"""gpu2dra against the real control plane: the API server calls the webhook, the
controller-manager turns templates into claims, the scheduler allocates devices. On every
release tests/k8s builds: the oldest gpu2dra supports (1.34) as well as the newest."""

from __future__ import annotations

import itertools
import json
import time
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from app.core.patch import RECORD_ANNOTATION
from tests.support.cluster import (
    A100_SXM4_40GB,
    H100_80GB_HBM3,
    GpuProduct,
    add_device_plugin_node,
    add_gpu_node,
    allocated_devices,
    device_class,
    gpu_pod,
    read_pod,
    templates_in,
    wait_for,
    wait_for_pod_scheduled,
)
from tests.support.controlplane import ControlPlane
from tests.support.webhook import Webhook

Obj = dict[str, Any]
MODE = "gpu2dra.io/migration"
pytestmark = pytest.mark.every_release


# ---- scenarios ---------------------------------------------------------------------------


def test_pod_is_translated_allocated_and_bound(
    webhook: Webhook,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    gpu_nodes: list[str],
) -> None:
    node = add_gpu_node(api_client, gpu_nodes, gpus=4)
    webhook.set_mode(api_client, namespace, "enabled")
    stored, warnings = control_plane.create(namespace, gpu_pod("train", {"nvidia.com/gpu": 2}))

    assert warnings == ""
    container = stored["spec"]["containers"][0]
    assert "limits" not in container["resources"]
    assert container["resources"]["claims"] == [{"name": "main-gpu"}]
    (claim,) = stored["spec"]["resourceClaims"]
    (template,) = templates_in(api_client, namespace)
    assert claim["resourceClaimTemplateName"] == template["metadata"]["name"]
    exactly = template["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    assert (exactly["deviceClassName"], exactly["count"]) == ("gpu.nvidia.com", 2)

    pod = wait_for_pod_scheduled(api_client, namespace, "train")
    assert pod["spec"]["nodeName"] == node
    devices = allocated_devices(api_client, read_pod(api_client, namespace, "train"))
    assert len(devices) == 2
    assert {d["driver"] for d in devices} == {"gpu.nvidia.com"}
    assert {d["pool"] for d in devices} == {node}


def infer_deployment() -> Obj:
    """Three replicas of a pod asking for one GPU."""
    labels = {"app": "infer"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "infer"},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": gpu_pod("x", {"nvidia.com/gpu": 1})["spec"],
            },
        },
    }


def wait_for_two_bound_one_refused(api: client.ApiClient, namespace: str, why: str) -> list[Obj]:
    """The Deployment's steady state on two GPUs: two pods bound, the third refused by the
    scheduler for `why`. A pod can be Unschedulable for a moment while its ResourceClaim is
    being created, so only the reason for the lack of devices counts. Returns the pods."""
    core = client.CoreV1Api(api)
    last: list[Obj] = []

    def settled() -> list[Obj] | None:
        nonlocal last
        items = core.list_namespaced_pod(namespace, label_selector="app=infer").items
        last = [api.sanitize_for_serialization(p) for p in items]
        bound = [p for p in last if p["spec"].get("nodeName")]
        refused = [
            p
            for p in last
            for c in p["status"].get("conditions") or []
            if c.get("reason") == "Unschedulable" and why in c.get("message", "")
        ]
        return last if len(last) == 3 and len(bound) == 2 and len(refused) == 1 else None

    def describe() -> str:
        states = [(p["spec"].get("nodeName"), p["status"].get("conditions")) for p in last]
        return f"2 pods bound and 1 refused ({why}) in {namespace}: {states}"

    return wait_for(settled, 90, describe)


def test_deployment_gets_the_device_plugins_capacity(
    webhook: Webhook,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    second_namespace: str,
    gpu_nodes: list[str],
) -> None:
    # Two GPUs each way: DRA devices on one node, the device plugin's allocatable on another.
    dra_node = add_gpu_node(api_client, gpu_nodes, gpus=2)
    plugin_node = add_device_plugin_node(api_client, gpu_nodes, gpus=2)
    webhook.set_mode(api_client, namespace, "enabled")
    webhook.set_mode(api_client, second_namespace, "disabled")
    control_plane.create(namespace, infer_deployment())
    control_plane.create(second_namespace, infer_deployment())

    dra = wait_for_two_bound_one_refused(api_client, namespace, "cannot allocate all claims")
    plugin = wait_for_two_bound_one_refused(
        api_client, second_namespace, "Insufficient nvidia.com/gpu"
    )

    names = {p["spec"]["resourceClaims"][0]["resourceClaimTemplateName"] for p in dra}
    assert len(names) == 1, "all replicas share one template"
    assert all("limits" not in p["spec"]["containers"][0]["resources"] for p in dra)
    assert all("resourceClaims" not in p["spec"] for p in plugin)
    dra_nodes = sorted(p["spec"].get("nodeName") or "" for p in dra)
    plugin_nodes = sorted(p["spec"].get("nodeName") or "" for p in plugin)
    assert (dra_nodes, plugin_nodes) == (["", dra_node, dra_node], ["", plugin_node, plugin_node])


PREFERRED = "e2e.gpu2dra.io/preferred"


@pytest.mark.parametrize(
    ("wanted", "other"),
    [(H100_80GB_HBM3, A100_SXM4_40GB), (A100_SXM4_40GB, H100_80GB_HBM3)],
    ids=["h100", "a100"],
)
def test_gfd_product_selector_picks_the_product(
    webhook: Webhook,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    gpu_nodes: list[str],
    wanted: GpuProduct,
    other: GpuProduct,
) -> None:
    right = add_gpu_node(api_client, gpu_nodes, product=wanted, gpus=2)
    # The scheduler prefers the other node, so only the device selector can lead to `right`.
    wrong = add_gpu_node(api_client, gpu_nodes, product=other, gpus=2, labels={PREFERRED: "1"})
    webhook.set_mode(api_client, namespace, "enabled")
    term = {"matchExpressions": [{"key": PREFERRED, "operator": "Exists"}]}
    affinity = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "preference": term}]
        }
    }
    control_plane.create(namespace, gpu_pod("any", {"nvidia.com/gpu": 1}, affinity=affinity))
    any_node = wait_for_pod_scheduled(api_client, namespace, "any")["spec"]["nodeName"]
    assert any_node == wrong, "without a product selector the preferred node wins"

    product = wanted.name.replace(" ", "-")
    pod = gpu_pod(
        "picky",
        {"nvidia.com/gpu": 1},
        affinity=affinity,
        nodeSelector={"nvidia.com/gpu.product": product},
    )
    stored, _ = control_plane.create(namespace, pod)
    assert "nodeSelector" not in stored["spec"], "DRA nodes need not carry GFD labels"
    (claim,) = stored["spec"]["resourceClaims"]
    (template,) = [
        t
        for t in templates_in(api_client, namespace)
        if t["metadata"]["name"] == claim["resourceClaimTemplateName"]
    ]
    assert template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["selectors"] == [
        {
            "cel": {
                "expression": "device.attributes['gpu.nvidia.com'].productName"
                f".replace(' ', '-') == '{product}'"
            }
        }
    ]
    assert wait_for_pod_scheduled(api_client, namespace, "picky")["spec"]["nodeName"] == right
    devices = allocated_devices(api_client, read_pod(api_client, namespace, "picky"))
    assert [d["pool"] for d in devices] == [right]


def test_mig_profile_is_allocated(
    webhook: Webhook,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    gpu_nodes: list[str],
) -> None:
    node = add_gpu_node(
        api_client,
        gpu_nodes,
        product=A100_SXM4_40GB,
        gpus=2,
        mig={0: ["3g.20gb", "2g.10gb", "1g.5gb"], 1: ["1g.10gb", "1g.10gb"]},
    )
    webhook.set_mode(api_client, namespace, "enabled")
    control_plane.create(namespace, gpu_pod("mig", {"nvidia.com/mig-1g.10gb": 1}))
    wait_for_pod_scheduled(api_client, namespace, "mig")
    (device,) = allocated_devices(api_client, read_pod(api_client, namespace, "mig"))
    assert device["pool"] == node
    assert "-mig-1g10gb-" in device["device"]


@pytest.mark.parametrize("mode", [None, "disabled"])
def test_namespaces_not_opted_in_are_untouched(
    webhook: Webhook,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    second_namespace: str,
    mode: str | None,
) -> None:
    webhook.set_mode(api_client, namespace, mode)
    webhook.set_mode(api_client, second_namespace, "enabled")
    before = mutate_requests(webhook)
    stored, warnings = control_plane.create(namespace, gpu_pod("p", {"nvidia.com/gpu": 1}))
    translated, _ = control_plane.create(second_namespace, gpu_pod("p", {"nvidia.com/gpu": 1}))

    assert stored["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    assert "resourceClaims" not in stored["spec"] and warnings == ""
    assert translated["spec"]["resourceClaims"][0]["name"] == "main-gpu"
    assert mutate_requests(webhook) - before == 1, "the namespaceSelector sends only the second"


def mutate_requests(webhook: Webhook) -> float:
    return webhook.metric("gpu2dra_requests_total", endpoint="mutate")


def test_pods_without_gpus_never_reach_the_webhook(
    webhook: Webhook,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
) -> None:
    webhook.set_mode(api_client, namespace, "enabled")
    before = mutate_requests(webhook)
    plain = gpu_pod("plain", {"cpu": "1"})
    fpga = gpu_pod("fpga", {"example.com/fpga": 1})
    stored = [control_plane.create(namespace, pod)[0] for pod in (plain, fpga)]
    gpu, _ = control_plane.create(namespace, gpu_pod("gpu", {"nvidia.com/gpu": 1}))

    assert all("resourceClaims" not in pod["spec"] for pod in stored)
    assert gpu["spec"]["resourceClaims"][0]["name"] == "main-gpu"
    assert mutate_requests(webhook) - before == 1, "matchConditions send only the GPU pod"


def test_audit_namespace_warns_and_stores_unchanged(
    webhook: Webhook,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
) -> None:
    webhook.set_mode(api_client, namespace, "audit")
    log = control_plane.log_dir / "kube-apiserver.log"
    refused = "Failed to set admission audit annotation"
    before = log.read_text().count(refused)
    stored, warnings = control_plane.create(namespace, gpu_pod("p", {"nvidia.com/gpu": 2}))
    # The audit event gets pods.mutate.gpu2dra.io/would-translate: the key is the API server's.
    assert log.read_text().count(refused) == before, "the API server refused the audit annotation"
    assert stored["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "2"}
    assert "resourceClaims" not in stored["spec"]
    assert (
        "Warning: gpu2dra audit: would move GPU requests to DRA: claim main-gpu: 2 x gpu.nvidia.com"
        in warnings
    )
    assert templates_in(api_client, namespace) == []


def test_server_side_dry_run_creates_nothing(
    webhook: Webhook,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
) -> None:
    webhook.set_mode(api_client, namespace, "enabled")
    shown, _ = control_plane.create(
        namespace, gpu_pod("p", {"nvidia.com/gpu": 1}), "--dry-run=server"
    )
    assert shown["spec"]["resourceClaims"][0]["name"] == "main-gpu"
    assert templates_in(api_client, namespace) == []
    with pytest.raises(ApiException) as err:
        client.CoreV1Api(api_client).read_namespaced_pod("p", namespace)
    assert err.value.status == 404


def test_missing_device_class_is_rejected(
    webhook: Webhook,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
) -> None:
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "typo"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvida.com"}}]
                }
            }
        },
    }
    # Stored while the namespace is not opted in, then the namespace opts in.
    control_plane.create(namespace, template)
    webhook.set_mode(api_client, namespace, "enabled")
    again = control_plane.run_kubectl(
        "create",
        "-n",
        namespace,
        "-f",
        "-",
        stdin={**template, "metadata": {"name": "typo2"}},
    )
    assert again.returncode != 0
    assert "request 'gpu' names DeviceClass 'gpu.nvida.com', which does not exist" in again.stderr
    pod: Obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "typo"}],
            "containers": [{"name": "c", "image": "x", "resources": {"claims": [{"name": "gpu"}]}}],
        },
    }
    rejected = control_plane.run_kubectl("create", "-n", namespace, "-f", "-", stdin=pod)
    assert rejected.returncode != 0
    assert "claim 'gpu' uses ResourceClaimTemplate 'typo'" in rejected.stderr
    # gpu2dra's record on the pod spares only gpu2dra's own claims the check
    pod["metadata"]["annotations"] = {RECORD_ANNOTATION: "{}"}
    rejected = control_plane.run_kubectl("create", "-n", namespace, "-f", "-", stdin=pod)
    assert "claim 'gpu' uses ResourceClaimTemplate 'typo'" in rejected.stderr


def test_a_translated_pod_costs_one_webhook_call(
    webhook: Webhook,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    gpu_nodes: list[str],
) -> None:
    # /mutate on create; its claim (made from gpu2dra's template), the claim's updates and the
    # pod's own claims never reach /validate (matchConditions, CREATE only). The first pod of
    # a shape in a namespace also has /validate check the template gpu2dra creates.
    add_gpu_node(api_client, gpu_nodes, gpus=2)
    webhook.set_mode(api_client, namespace, "enabled")
    calls = [webhook.metric("gpu2dra_requests_total")]
    for name in ("first", "second"):
        control_plane.create(namespace, gpu_pod(name, {"nvidia.com/gpu": 1}))
        pod = wait_for_pod_scheduled(api_client, namespace, name)
        assert len(allocated_devices(api_client, pod)) == 1
        calls.append(webhook.metric("gpu2dra_requests_total"))
    assert [b - a for a, b in itertools.pairwise(calls)] == [2, 1]


def test_webhook_down_admits_unchanged_then_resumes(
    webhook: Webhook,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
) -> None:
    webhook.set_mode(api_client, namespace, "enabled")
    assert webhook.stop() == 0
    try:
        stored, _ = control_plane.create(namespace, gpu_pod("down", {"nvidia.com/gpu": 1}))
        assert stored["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    finally:
        webhook.start()
    stored, _ = control_plane.create(namespace, gpu_pod("up", {"nvidia.com/gpu": 1}))
    assert stored["spec"]["resourceClaims"][0]["name"] == "main-gpu"


def test_deleted_device_class_stops_translation_until_restored(
    webhook: Webhook,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
) -> None:
    webhook.set_mode(api_client, namespace, "enabled")
    custom = client.CustomObjectsApi(api_client)
    mig = gpu_pod("before", {"nvidia.com/mig-1g.5gb": 1})
    classes = webhook.metric("gpu2dra_cache_objects", cache="deviceclasses")
    custom.delete_cluster_custom_object("resource.k8s.io", "v1", "deviceclasses", "mig.nvidia.com")
    deleted = time.monotonic()
    try:
        wait_for(
            lambda: webhook.metric("gpu2dra_cache_objects", cache="deviceclasses") == classes - 1,
            10,
            "the webhook's DeviceClass cache to drop mig.nvidia.com",
        )
        stored, warnings = control_plane.create(namespace, {**mig, "metadata": {"name": "gone"}})
        seconds = time.monotonic() - deleted
    finally:
        custom.create_cluster_custom_object(
            "resource.k8s.io", "v1", "deviceclasses", device_class("mig.nvidia.com", "mig")
        )
    assert stored["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/mig-1g.5gb": "1"}
    assert "resourceClaims" not in stored["spec"]
    assert "DeviceClass mig.nvidia.com does not exist" in warnings
    assert seconds < 15, f"the pod after the deletion was answered {seconds:.1f}s later"

    wait_for(
        lambda: webhook.metric("gpu2dra_cache_objects", cache="deviceclasses") == classes,
        10,
        "the webhook's DeviceClass cache to see mig.nvidia.com again",
    )
    restored, warnings = control_plane.create(namespace, {**mig, "metadata": {"name": "back"}})
    assert restored["spec"]["resourceClaims"][0]["name"] == "main-mig-1g-5gb"
    assert "limits" not in restored["spec"]["containers"][0]["resources"]
    assert warnings == ""


def test_controllers_pods_are_translated(
    webhook: Webhook,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
) -> None:
    webhook.set_mode(api_client, namespace, "enabled")
    template = {
        "metadata": {"labels": {"app": "w"}},
        "spec": {**gpu_pod("x", {"nvidia.com/gpu": 1})["spec"], "restartPolicy": "Never"},
    }
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "job"},
        "spec": {"template": template, "backoffLimit": 0},
    }
    sts = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "sts"},
        "spec": {
            "serviceName": "sts",
            "replicas": 1,
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": {"app": "w"}},
            "template": {**template, "spec": {**template["spec"], "restartPolicy": "Always"}},
        },
    }
    cron = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "cron"},
        "spec": {
            "schedule": "* * * * *",
            "jobTemplate": {"spec": {"template": template, "backoffLimit": 0}},
        },
    }
    for obj in (job, sts, cron):
        control_plane.create(namespace, obj)
    core = client.CoreV1Api(api_client)

    def owners() -> set[str] | None:
        # The CronJob's Job is named cron-<minute>; its pods, like the others', have one owner.
        pods = core.list_namespaced_pod(namespace).items
        found = {
            f"{ref.kind}/{ref.name.split('-')[0]}"
            for pod in pods
            for ref in pod.metadata.owner_references or []
        }
        return found if {"Job/job", "StatefulSet/sts", "Job/cron"} <= found else None

    # `* * * * *` waits for the next minute boundary: up to 60 s, more on a busy machine.
    wait_for(owners, 150, "pods of the Job, the StatefulSet and the CronJob's Job")
    for pod in core.list_namespaced_pod(namespace).items:
        spec = api_client.sanitize_for_serialization(pod)["spec"]
        assert spec["resourceClaims"][0]["name"] == "main-gpu", pod.metadata.name
        assert "limits" not in spec["containers"][0]["resources"]


def test_logs_are_json_with_the_uid_and_no_pod_spec(
    webhook: Webhook, api_client: client.ApiClient, control_plane: ControlPlane, namespace: str
) -> None:
    webhook.set_mode(api_client, namespace, "enabled")
    secret = "s3cr3t-token-value"
    pod = gpu_pod("logged", {"nvidia.com/gpu": 1})
    # A translation with a warning is logged at info; a routine one (the next pod) at debug.
    pod["spec"]["containers"][0]["env"] = [
        {"name": "TOKEN", "value": secret},
        {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
    ]
    control_plane.create(namespace, pod)
    control_plane.create(namespace, gpu_pod("quiet", {"nvidia.com/gpu": 1}))
    lines = [line for line in webhook.log.read_text().splitlines() if line.startswith("{")]
    entries = [json.loads(line) for line in lines]
    translated = [
        e for e in entries if e.get("result") == "patched" and e["namespace"] == namespace
    ]
    assert len(translated) == 1, "the translated pod with a warning is logged, only it"
    assert all(e["uid"] and e["kind"] == "Pod" and e["operation"] == "CREATE" for e in translated)
    text = webhook.log.read_text()
    assert secret not in text and '"containers"' not in text

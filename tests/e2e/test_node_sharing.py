"""Shared GPUs on a real node: the fake NVIDIA plugin publishes one A100 with 4 shares as the
driver's --consumable-shares=4 does, and the pods of a time-sliced Deployment, translated by
gpu2dra onto one share each, all run on it and see the same GPU; a fifth waits for a share
and runs once one is freed. The kubelet runs on the newest control plane only (version skew,
as in test_node.py)."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest
from kubernetes import client

from tests.node.node import (
    BUSYBOX_IMAGE,
    RealNode,
)
from tests.support.cluster import (
    allocated_devices,
    gpu_devices,
    read_pod,
    wait_for,
)
from tests.support.controlplane import REAL_NODE_NAME, ControlPlane
from tests.support.realnode import running_node
from tests.support.webhook import SHARING_POLICY, Webhook, running_webhook

Obj = dict[str, Any]
DEVICES = gpu_devices(REAL_NODE_NAME, gpus=1)
UUID = DEVICES[0]["attributes"]["uuid"]["string"]
PRODUCT = "nvidia.com/gpu.product"


@pytest.fixture(scope="module")
def hook(
    control_plane: ControlPlane,
    api_client: client.ApiClient,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Webhook]:
    """gpu2dra with a policy whose nvidia.com/gpu mapping moves shared GPUs onto shares."""
    work_dir = tmp_path_factory.mktemp("gpu2dra-node-sharing")
    yield from running_webhook(control_plane, api_client, work_dir, policy=SHARING_POLICY)


@pytest.fixture(scope="module")
def shared_node(
    request: pytest.FixtureRequest,
    control_plane: ControlPlane,
    api_client: client.ApiClient,
    hook: Webhook,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[RealNode]:
    """containerd + kubelet + the fake plugin sharing its one GPU 4 ways."""
    work_dir = tmp_path_factory.mktemp("node")
    yield from running_node(
        request, control_plane, api_client, work_dir, DEVICES, consumable_shares="4"
    )


def template() -> Obj:
    """A pod of one replica of a time-sliced GPU that prints its environment and sleeps."""
    script = "echo ENV-BEGIN; env | sort; echo ENV-END; trap 'exit 0' TERM; sleep 3600 & wait"
    return {
        "metadata": {"labels": {"app": "infer"}},
        "spec": {
            "nodeSelector": {PRODUCT: "NVIDIA-A100-SXM4-40GB-SHARED"},
            "terminationGracePeriodSeconds": 5,
            "automountServiceAccountToken": False,
            "containers": [
                {
                    "name": "main",
                    "image": BUSYBOX_IMAGE,
                    "imagePullPolicy": "Never",
                    "command": ["sh", "-c", script],
                    "resources": {"limits": {"nvidia.com/gpu": 1}},
                }
            ],
        },
    }


def running(api: client.ApiClient, namespace: str, app: str = "infer") -> list[Obj]:
    items = client.CoreV1Api(api).list_namespaced_pod(namespace, label_selector=f"app={app}").items
    pods = [api.sanitize_for_serialization(p) for p in items]
    return [p for p in pods if p["status"].get("phase") == "Running"]


def seen_uuid(plane: ControlPlane, namespace: str, name: str) -> str | None:
    done = plane.run_kubectl("logs", "-n", namespace, name, "-c", "main")
    env = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    return env.get("GPU2DRA_DEVICE_GPU_0")


def refused(api: client.ApiClient, namespace: str, name: str) -> bool:
    pod = read_pod(api, namespace, name)
    assert pod["status"].get("phase") == "Pending", f"{name} must wait for a share"
    return any(
        c.get("reason") == "Unschedulable" and "cannot allocate all claims" in c.get("message", "")
        for c in pod["status"].get("conditions") or []
    )


def test_a_time_sliced_deployment_shares_one_gpu_by_its_shares(
    shared_node: RealNode,
    hook: Webhook,
    control_plane: ControlPlane,
    api_client: client.ApiClient,
    namespace: str,
) -> None:
    hook.set_mode(api_client, namespace, "enabled")
    (published,) = client.CustomObjectsApi(api_client).list_cluster_custom_object(
        "resource.k8s.io",
        "v1",
        "resourceslices",
        field_selector=f"spec.nodeName={shared_node.name}",
    )["items"]
    (device,) = published["spec"]["devices"]
    assert device["allowMultipleAllocations"] is True
    assert device["capacity"]["shares"]["value"] == "4"
    assert device["capacity"]["shares"]["requestPolicy"]["default"] == "1"
    # Until the webhook's ResourceSlice cache has the node's shared GPU.
    probe = {"metadata": {"name": "probe"}, "spec": template()["spec"]}
    wait_for(lambda: "patch" in hook.dry_run(namespace, probe), 30, "gpu2dra sees the shares")

    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "infer"},
        "spec": {
            "replicas": 4,
            "selector": {"matchLabels": {"app": "infer"}},
            "template": template(),
        },
    }
    control_plane.create(namespace, deployment)
    pods = wait_for(
        lambda: found if len(found := running(api_client, namespace)) == 4 else None,
        240,
        lambda: f"4 pods of infer Running: {len(running(api_client, namespace))} are",
    )
    for p in pods:
        (result,) = allocated_devices(api_client, p)
        assert (result["pool"], result["device"]) == (shared_node.name, "gpu-0")
        assert result["consumedCapacity"]["shares"] == "1"
        name = p["metadata"]["name"]
        uuid = wait_for(partial(seen_uuid, control_plane, namespace, name), 30, f"{name} log")
        assert uuid == UUID, "every pod's container sees the same GPU"

    fifth = {"apiVersion": "v1", "kind": "Pod", **template()}
    fifth["metadata"] = {"name": "fifth", "labels": {"app": "fifth"}}
    control_plane.create(namespace, fifth)
    wait_for(lambda: refused(api_client, namespace, "fifth"), 60, "the fifth pod refused a share")

    control_plane.kubectl("scale", "-n", namespace, "deployment/infer", "--replicas=3")
    wait_for(
        lambda: read_pod(api_client, namespace, "fifth")["status"].get("phase") == "Running",
        120,
        "the fifth pod Running once a share is free",
    )
    assert wait_for(lambda: seen_uuid(control_plane, namespace, "fifth"), 30, "fifth log") == UUID


def claims_on(api: client.ApiClient, node: str) -> list[str]:
    """The ResourceClaims allocated a device of the node's pool."""
    listed = client.CustomObjectsApi(api).list_cluster_custom_object(
        "resource.k8s.io", "v1", "resourceclaims"
    )["items"]
    return [
        c["metadata"]["name"]
        for c in listed
        for r in ((c.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results")
        or []
        if r.get("pool") == node
    ]


def fraction(name: str, mib: int) -> Obj:
    """A pod asking HAMi for `mib` MiB of one GPU."""
    pod: Obj = {"apiVersion": "v1", "kind": "Pod", **template()}
    pod["metadata"] = {"name": name, "labels": {"app": "mem"}}
    pod["spec"] = {**pod["spec"], "nodeSelector": {}}
    (main,) = pod["spec"]["containers"]
    main["resources"] = {"limits": {"nvidia.com/gpu": 1, "nvidia.com/gpumem": mib}}
    return pod


def test_memory_fractions_share_the_gpu_while_they_fit(
    shared_node: RealNode,
    hook: Webhook,
    control_plane: ControlPlane,
    api_client: client.ApiClient,
    namespace: str,
) -> None:
    """Its 40960 MiB hold two pods of 20000 MiB (each also takes one share, the default),
    not a third."""
    wait_for(
        lambda: not claims_on(api_client, shared_node.name) and not shared_node.cdi_specs(),
        120,
        lambda: f"every share free: {claims_on(api_client, shared_node.name)}",
    )
    hook.set_mode(api_client, namespace, "enabled")
    for i in range(2):
        control_plane.create(namespace, fraction(f"mem-{i}", 20000))
    pods = wait_for(
        lambda: found if len(found := running(api_client, namespace, "mem")) == 2 else None,
        120,
        lambda: f"2 memory pods Running: {len(running(api_client, namespace, 'mem'))} are",
    )
    for p in pods:
        (result,) = allocated_devices(api_client, p)
        assert result["device"] == "gpu-0"
        assert result["consumedCapacity"] == {"memory": "20000Mi", "shares": "1"}
        name = p["metadata"]["name"]
        assert wait_for(partial(seen_uuid, control_plane, namespace, name), 30, name) == UUID
    control_plane.create(namespace, fraction("mem-2", 20000))
    wait_for(lambda: refused(api_client, namespace, "mem-2"), 60, "the third fraction refused")

"""`gpu2dra nodes convert` on the real node: the NVIDIA stacks as host processes, each run by a
stand-in for its DaemonSet while the node's labels select it (tests/node/node.py DaemonSets):
the fake device plugin (tests/node/plugin/gpu-device-plugin) on the kubelet's device-plugin
API, and the fake DRA plugin. The node starts on the device plugin, labelled as the GPU
Operator labels a GPU node.

A device-plugin pod sees its GPU (NVIDIA_VISIBLE_DEVICES and GPU2DRA_DEVICE_<DEVICE>, from
Allocate). A budget that allows no disruption stops the drain, the node left cordoned on the
device plugin; once it allows one, the same command resumes: the pod is evicted and its
Deployment's replacement goes to a second node (kubelet-less, nvidia.com/gpu in allocatable),
the labels switch, the device plugin stops and the DRA plugin starts, and the command waits
until the kubelet offers no nvidia.com/gpu and the node's slice is published. A translated pod
then runs there and sees its device through CDI (no NVIDIA_VISIBLE_DEVICES). `--revert` brings
the device plugin back (its GPUs allocatable again, the slice wiped by the kubelet) and a
device-plugin pod runs again. A DaemonSet's GPU pod on the node refuses a conversion."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from tests.e2e.inspecting import gpu2dra
from tests.node.node import BUSYBOX_IMAGE, DEVICE_PLUGIN, DRA_PLUGIN, SELECTORS, RealNode
from tests.support.cluster import (
    A100_SXM4_40GB,
    allocated_devices,
    create_node,
    delete_node,
    gpu_devices,
    read_pod,
    wait_for,
)
from tests.support.controlplane import REAL_NODE_NAME, ControlPlane
from tests.support.realnode import running_node
from tests.support.webhook import Webhook

pytestmark = pytest.mark.every_release
Obj = dict[str, Any]
DEVICES = gpu_devices(REAL_NODE_NAME, A100_SXM4_40GB, gpus=2)
UUIDS = {d["name"]: d["attributes"]["uuid"]["string"] for d in DEVICES}
PLUGIN_LABEL, _ = SELECTORS[DEVICE_PLUGIN]
DRA_LABEL, _ = SELECTORS[DRA_PLUGIN]
CONVERT = ("nodes", "convert", REAL_NODE_NAME, "--apply", "--preset", "gpu-operator")


@pytest.fixture(scope="module")
def real_node(
    request: pytest.FixtureRequest,
    control_plane: ControlPlane,
    api_client: client.ApiClient,
    webhook: Webhook,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[RealNode]:
    """The real node with two GPUs, on the device plugin, its plugins following its labels."""
    work_dir = tmp_path_factory.mktemp("node")
    yield from running_node(request, control_plane, api_client, work_dir, DEVICES, daemonsets=True)


@pytest.fixture
def spare(api_client: client.ApiClient) -> Iterator[str]:
    """A kubelet-less device-plugin node with one nvidia.com/gpu, cordoned until the test
    lets pods go there."""
    name = f"spare-{uuid.uuid4().hex[:5]}"
    create_node(api_client, name, extended={"nvidia.com/gpu": "1"})
    client.CoreV1Api(api_client).patch_node(name, {"spec": {"unschedulable": True}})
    yield name
    delete_node(api_client, name)


# ---- objects -------------------------------------------------------------------------------


def pod_spec(gpus: int) -> Obj:
    """A busybox container with `gpus` nvidia.com/gpu that prints its environment between
    markers and sleeps until SIGTERM."""
    script = "trap 'exit 0' TERM; echo ENV-BEGIN; env | sort; echo ENV-END; sleep 3600 & wait"
    return {
        "containers": [
            {
                "name": "main",
                "image": BUSYBOX_IMAGE,
                "imagePullPolicy": "Never",
                "command": ["sh", "-c", script],
                "resources": {"limits": {"nvidia.com/gpu": gpus}},
            }
        ],
        "terminationGracePeriodSeconds": 5,
        "automountServiceAccountToken": False,
    }


def bare_pod(name: str) -> Obj:
    spec = {**pod_spec(1), "restartPolicy": "Never"}
    spec["nodeSelector"] = {"kubernetes.io/hostname": REAL_NODE_NAME}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def workload(kind: str, name: str) -> Obj:
    labels = {"app": name}
    spec: Obj = {
        "selector": {"matchLabels": labels},
        "template": {"metadata": {"labels": labels}, "spec": pod_spec(1)},
    }
    if kind == "Deployment":
        spec["replicas"] = 1
    else:
        spec["template"]["spec"]["nodeSelector"] = {"kubernetes.io/hostname": REAL_NODE_NAME}
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name}, "spec": spec}


def budget(name: str, min_available: int) -> Obj:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name},
        "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": name}}},
    }


# ---- what the node and its pods show -------------------------------------------------------


def running_pod(api: client.ApiClient, namespace: str, prefix: str) -> Obj:
    """The namespace's pod named `prefix`... once Running on the real node."""

    def found() -> Obj | None:
        pods = client.CoreV1Api(api).list_namespaced_pod(namespace).items
        for pod in pods:
            if pod.metadata.name.startswith(prefix) and not pod.metadata.deletion_timestamp:
                body = read_pod(api, namespace, pod.metadata.name)
                if body.get("status", {}).get("phase") == "Failed":
                    raise AssertionError(f"{pod.metadata.name} failed: {body['status']}")
                if body.get("status", {}).get("phase") == "Running":
                    return body
        return None

    pod = wait_for(found, 90, f"a pod {prefix}* of {namespace} Running")
    assert pod["spec"]["nodeName"] == REAL_NODE_NAME
    return pod


def environment(plane: ControlPlane, namespace: str, name: str) -> dict[str, str]:
    """The environment the pod's container printed (`kubectl logs`)."""

    def logged() -> list[str] | None:
        done = plane.run_kubectl("logs", "-n", namespace, name, "-c", "main")
        lines = done.stdout.splitlines()
        if done.returncode != 0 or "ENV-END" not in lines:
            return None
        return lines[lines.index("ENV-BEGIN") + 1 : lines.index("ENV-END")]

    log = wait_for(logged, 30, f"the environment of {namespace}/{name} in its log")
    return dict(line.split("=", 1) for line in log if "=" in line)


def gpus_seen(env: dict[str, str]) -> dict[str, str]:
    """Device name -> UUID from GPU2DRA_DEVICE_<DEVICE>, each checked against the inventory."""
    seen = {
        key.removeprefix("GPU2DRA_DEVICE_").lower().replace("_", "-"): value
        for key, value in env.items()
        if key.startswith("GPU2DRA_DEVICE_")
    }
    for device, gpu in seen.items():
        assert UUIDS.get(device) == gpu, f"{device}: {gpu} is not the inventory's UUID"
    return seen


def node_of(api: client.ApiClient) -> Obj:
    node = client.CoreV1Api(api).read_node(REAL_NODE_NAME)
    return api.sanitize_for_serialization(node)  # type: ignore[no-any-return]


def offered(api: client.ApiClient) -> int:
    """nvidia.com/gpu in the node's allocatable (0 when absent)."""
    return int(node_of(api)["status"].get("allocatable", {}).get("nvidia.com/gpu", "0"))


def published(api: client.ApiClient) -> list[str]:
    """The device names of the node's gpu.nvidia.com ResourceSlices."""
    slices = client.CustomObjectsApi(api).list_cluster_custom_object(
        "resource.k8s.io",
        "v1",
        "resourceslices",
        field_selector=f"spec.nodeName={REAL_NODE_NAME},spec.driver=gpu.nvidia.com",
    )["items"]
    return sorted(d["name"] for s in slices for d in s["spec"].get("devices", []))


def plugins(node: RealNode) -> list[str]:
    assert node.daemonsets is not None
    assert node.daemonsets.failed == []
    return node.daemonsets.plugins()


# ---- scenarios -----------------------------------------------------------------------------


def test_a_daemonsets_gpu_pod_on_the_node_refuses_a_conversion(
    real_node: RealNode,
    control_plane: ControlPlane,
    api_client: client.ApiClient,
    namespace: str,
) -> None:
    """Switching stacks under a GPU pod that will not leave would hand its GPU out twice."""
    assert plugins(real_node) == [DEVICE_PLUGIN]
    control_plane.create(namespace, workload("DaemonSet", "agent"))
    agent = running_pod(api_client, namespace, "agent-")
    assert len(gpus_seen(environment(control_plane, namespace, agent["metadata"]["name"]))) == 1

    refused = gpu2dra(control_plane.kubeconfig, *CONVERT, check=2)
    assert "(a DaemonSet's pod) holds the node's GPUs and would not leave" in refused.stderr
    node = node_of(api_client)
    assert not node["spec"].get("unschedulable")
    assert "gpu2dra.io/conversion" not in (node["metadata"].get("annotations") or {})
    assert plugins(real_node) == [DEVICE_PLUGIN]
    client.AppsV1Api(api_client).delete_namespaced_daemon_set("agent", namespace)
    wait_for(
        lambda: not client.CoreV1Api(api_client).list_namespaced_pod(namespace).items,
        60,
        "the DaemonSet's pod gone",
    )


def test_the_node_converts_resumes_and_reverts(
    real_node: RealNode,
    webhook: Webhook,
    control_plane: ControlPlane,
    api_client: client.ApiClient,
    namespace: str,
    second_namespace: str,
    spare: str,
) -> None:
    legacy, enabled = namespace, second_namespace
    webhook.set_mode(api_client, enabled, "enabled")
    kubeconfig = control_plane.kubeconfig
    core = client.CoreV1Api(api_client)

    # On the device plugin: the kubelet offers both GPUs, no slice; a pod gets one by Allocate.
    assert plugins(real_node) == [DEVICE_PLUGIN]
    assert (offered(api_client), published(api_client)) == (2, [])
    assert node_of(api_client)["metadata"]["labels"][PLUGIN_LABEL] == "true"
    control_plane.create(legacy, workload("Deployment", "trainer"))
    control_plane.create(legacy, budget("trainer", 1))
    trainer = running_pod(api_client, legacy, "trainer-")["metadata"]["name"]
    env = environment(control_plane, legacy, trainer)
    (gpu,) = gpus_seen(env).values()
    assert env["NVIDIA_VISIBLE_DEVICES"] == gpu
    core.patch_node(spare, {"spec": {"unschedulable": None}})

    # The budget allows no disruption: the drain stops, the node stays cordoned on the plugin.
    stopped = gpu2dra(kubeconfig, *CONVERT, "--timeout", "6", check=2)
    assert "its PodDisruptionBudget allows no disruption now" in stopped.stderr
    node = node_of(api_client)
    assert node["spec"]["unschedulable"] is True
    assert json.loads(node["metadata"]["annotations"]["gpu2dra.io/conversion"])["done"] == "cordon"
    assert plugins(real_node) == [DEVICE_PLUGIN]
    assert offered(api_client) == 2
    assert read_pod(api_client, legacy, trainer)["status"]["phase"] == "Running"

    # Once it allows one, the same command resumes: the trainer leaves for the spare node, the
    # device plugin stops, the DRA plugin starts, and the command waits for both to show.
    client.PolicyV1Api(api_client).patch_namespaced_pod_disruption_budget(
        "trainer", legacy, {"spec": {"minAvailable": 0}}
    )
    resumed = gpu2dra(kubeconfig, *CONVERT, "--timeout", "50", check=0)
    assert f"{REAL_NODE_NAME}: resuming after cordon" in resumed.stdout
    assert f"{REAL_NODE_NAME}: drain: {legacy}/{trainer} evicted" in resumed.stdout
    assert "done: its GPUs are offered through the DRA driver" in resumed.stdout
    assert plugins(real_node) == [DRA_PLUGIN]
    node = node_of(api_client)
    assert offered(api_client) == 0  # the kubelet marks a departed plugin's GPUs unhealthy
    assert published(api_client) == sorted(UUIDS)
    assert not node["spec"].get("unschedulable")
    assert (node["metadata"]["labels"][PLUGIN_LABEL], node["metadata"]["labels"][DRA_LABEL]) == (
        "false",
        "true",
    )

    def replaced() -> bool:
        pods = core.list_namespaced_pod(legacy).items
        return [p.spec.node_name for p in pods] == [spare]

    wait_for(replaced, 60, "the trainer's replacement on the spare node")

    # A translated pod runs on the node and sees its device through the DRA plugin's CDI spec.
    stored, _ = control_plane.create(enabled, bare_pod("solo"))
    assert stored["spec"]["resourceClaims"], "gpu2dra did not translate"
    running_pod(api_client, enabled, "solo")
    env = environment(control_plane, enabled, "solo")
    (allocated,) = allocated_devices(api_client, read_pod(api_client, enabled, "solo"))
    assert gpus_seen(env) == {allocated["device"]: UUIDS[allocated["device"]]}
    assert "NVIDIA_VISIBLE_DEVICES" not in env

    # Back to the device plugin once the translated pod is gone: its GPUs are allocatable
    # again and the kubelet wipes the DRA driver's slice (30 s after it unregistered).
    core.delete_namespaced_pod("solo", enabled)
    wait_for(
        lambda: not core.list_namespaced_pod(enabled).items and not real_node.cdi_specs(),
        60,
        "solo gone and its claim unprepared",
    )
    reverted = gpu2dra(kubeconfig, *CONVERT, "--revert", "--timeout", "90", check=0)
    assert "done: its GPUs are offered through the device plugin" in reverted.stdout
    assert plugins(real_node) == [DEVICE_PLUGIN]
    assert (offered(api_client), published(api_client)) == (2, [])
    node = node_of(api_client)
    assert node["metadata"]["labels"][PLUGIN_LABEL] == "true"
    assert DRA_LABEL not in node["metadata"]["labels"]

    control_plane.create(legacy, bare_pod("again"))
    running_pod(api_client, legacy, "again")
    env = environment(control_plane, legacy, "again")
    (gpu,) = gpus_seen(env).values()
    assert env["NVIDIA_VISIBLE_DEVICES"] == gpu
    assert real_node.daemonsets is not None
    assert real_node.daemonsets.events == [
        f"{DEVICE_PLUGIN} started",
        f"{DEVICE_PLUGIN} stopped",
        f"{DRA_PLUGIN} started",
        f"{DEVICE_PLUGIN} started",
        f"{DRA_PLUGIN} stopped",
    ]

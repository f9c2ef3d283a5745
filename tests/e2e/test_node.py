"""gpu2dra's translation on a real node: pods admitted through the webhook are allocated by the
scheduler, prepared by a DRA kubelet plugin, started by the kubelet and containerd, and each
container's environment shows the devices that reached it (tests/node).

The fake plugin (tests/node/plugin) publishes NODE_DEVICES as the node's gpu.nvidia.com
ResourceSlice and writes one CDI spec per prepared claim, which gives each container of the
claim GPU2DRA_DEVICE_<DEVICE>=<uuid> per device (<DEVICE>: the name upper-cased, '-' as '_'),
GPU2DRA_CLAIM_<CLAIM>=<devices> and, with a GpuConfig, GPU2DRA_SHARING_<DEVICE>=<strategy>.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.node.node import (
    BUSYBOX_IMAGE,
    RealNode,
)
from tests.support.cluster import (
    A100_SXM4_40GB,
    allocated_devices,
    gpu_devices,
    pod_resource_claims,
    read_pod,
    wait_for,
)
from tests.support.controlplane import REAL_NODE_NAME, ControlPlane
from tests.support.realnode import running_node
from tests.support.webhook import Webhook

Obj = dict[str, Any]
# Three whole A100s and one in MIG mode (3g.20gb + two 1g.5gb), as the NVIDIA driver shows them.
NODE_DEVICES = gpu_devices(
    REAL_NODE_NAME, A100_SXM4_40GB, gpus=4, mig={3: ["3g.20gb", "1g.5gb", "1g.5gb"]}
)
FULL_GPUS = sorted(d["name"] for d in NODE_DEVICES if d["attributes"]["type"]["string"] == "gpu")
UUIDS = {d["name"]: d["attributes"]["uuid"]["string"] for d in NODE_DEVICES}
DEVICE_VAR = "GPU2DRA_DEVICE_"
CLAIM_VAR = "GPU2DRA_CLAIM_"
SHARING_VAR = "GPU2DRA_SHARING_"


# ---- fixtures ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real_node(
    request: pytest.FixtureRequest,
    control_plane: ControlPlane,
    api_client: client.ApiClient,
    webhook: Webhook,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[RealNode]:
    """containerd + kubelet + the fake NVIDIA DRA plugin, joined as REAL_NODE_NAME."""
    work_dir = tmp_path_factory.mktemp("node")
    yield from running_node(request, control_plane, api_client, work_dir, NODE_DEVICES)


@pytest.fixture
def node_ns(
    real_node: RealNode, webhook: Webhook, api_client: client.ApiClient, namespace: str
) -> Iterator[str]:
    """A namespace that gpu2dra translates; afterwards its pods are deleted and the plugin
    must have unprepared all claims, so the next test starts with every device free."""
    webhook.set_mode(api_client, namespace, "enabled")
    yield namespace
    core = client.CoreV1Api(api_client)
    core.delete_collection_namespaced_pod(namespace)
    wait_for(
        lambda: not core.list_namespaced_pod(namespace).items and not real_node.cdi_specs(),
        90,
        lambda: f"pods of {namespace} gone and their claims unprepared: {real_node.cdi_specs()}",
    )


# ---- pods ----------------------------------------------------------------------------------


def container(
    name: str, gpus: Obj | None = None, *, exits: bool = False, sidecar: bool = False
) -> Obj:
    """A busybox container that prints its environment between markers, then sleeps (or,
    with exits, ends: a regular init container)."""
    script = "echo ENV-BEGIN; env | sort; echo ENV-END"
    if not exits:
        script = f"trap 'exit 0' TERM; {script}; sleep 3600 & wait"
    spec: Obj = {
        "name": name,
        "image": BUSYBOX_IMAGE,
        "imagePullPolicy": "Never",
        "command": ["sh", "-c", script],
    }
    if gpus:
        spec["resources"] = {"limits": gpus}
    if sidecar:
        spec["restartPolicy"] = "Always"
    return spec


def pod(name: str, containers: list[Obj], init: list[Obj] | None = None) -> Obj:
    spec: Obj = {
        "containers": containers,
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 5,
        "automountServiceAccountToken": False,
    }
    if init:
        spec["initContainers"] = init
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def wait_running(api: client.ApiClient, namespace: str, name: str, timeout: float = 90) -> Obj:
    """Wait until the pod is Running with every app container running; returns the pod."""
    last: Obj = {}

    def running() -> Obj | None:
        nonlocal last
        last = read_pod(api, namespace, name)
        status = last.get("status", {})
        statuses = status.get("containerStatuses") or []
        if status.get("phase") == "Failed":
            raise AssertionError(f"pod {namespace}/{name} failed: {status}")
        up = all("running" in (s.get("state") or {}) for s in statuses)
        return last if status.get("phase") == "Running" and statuses and up else None

    def describe() -> str:
        status = last.get("status", {})
        return f"pod {namespace}/{name} Running: {status.get('phase')} {status.get('conditions')}"

    return wait_for(running, timeout, describe)


def environment(
    plane: ControlPlane, namespace: str, name: str, container_name: str
) -> dict[str, str]:
    """The environment a container printed (`kubectl logs`)."""
    log = wait_for(
        lambda: _logged_env(plane, namespace, name, container_name),
        30,
        f"the environment of {namespace}/{name}/{container_name} in its log",
    )
    return dict(line.split("=", 1) for line in log if "=" in line)


def _logged_env(
    plane: ControlPlane, namespace: str, name: str, container_name: str
) -> list[str] | None:
    done = plane.run_kubectl("logs", "-n", namespace, name, "-c", container_name)
    lines = done.stdout.splitlines()
    if done.returncode != 0 or "ENV-END" not in lines:
        return None
    return lines[lines.index("ENV-BEGIN") + 1 : lines.index("ENV-END")]


def devices_seen(env: dict[str, str]) -> set[str]:
    """The device names a container got, from GPU2DRA_DEVICE_<DEVICE> (checked against the
    uuid the plugin published for each)."""
    seen = {}
    for key, value in env.items():
        if key.startswith(DEVICE_VAR):
            seen[key[len(DEVICE_VAR) :].lower().replace("_", "-")] = value
    for device, uuid in seen.items():
        assert UUIDS.get(device) == uuid, f"{device}: {uuid} is not the published uuid"
    return set(seen)


def claim_lists(env: dict[str, str]) -> set[str]:
    """The devices named by all GPU2DRA_CLAIM_<CLAIM> variables."""
    return {
        device
        for key, value in env.items()
        if key.startswith(CLAIM_VAR)
        for device in value.split(",")
    }


def allocated_names(api: client.ApiClient, namespace: str, name: str) -> list[str]:
    return sorted(d["device"] for d in allocated_devices(api, read_pod(api, namespace, name)))


# ---- scenarios -----------------------------------------------------------------------------


def test_node_is_ready_with_the_plugins_devices(
    real_node: RealNode, api_client: client.ApiClient
) -> None:
    node = client.CoreV1Api(api_client).read_node(real_node.name)
    assert node.status.node_info.kubelet_version.startswith("v1.")
    addresses = {(a.type, a.address) for a in node.status.addresses}
    assert ("InternalIP", real_node.ip) in addresses
    slices = client.CustomObjectsApi(api_client).list_cluster_custom_object(
        "resource.k8s.io", "v1", "resourceslices", field_selector=f"spec.nodeName={real_node.name}"
    )["items"]
    (published,) = slices
    assert published["spec"]["driver"] == "gpu.nvidia.com"
    assert published["spec"]["pool"]["name"] == real_node.name
    by_name = {d["name"]: d for d in published["spec"]["devices"]}
    assert sorted(by_name) == sorted(d["name"] for d in NODE_DEVICES)
    assert "gpu-3" not in by_name, "a GPU in MIG mode publishes only its MIG devices"
    migs = [by_name[n]["attributes"] for n in by_name if n.startswith("gpu-3-mig-1g5gb-19-")]
    assert len(migs) == 2
    assert {m["profile"]["string"] for m in migs} == {"1g.5gb"}
    assert len({m["parentUUID"]["string"] for m in migs}) == 1
    assert by_name["gpu-0"]["attributes"]["productName"] == {"string": "NVIDIA A100-SXM4-40GB"}
    expected = next(d for d in NODE_DEVICES if d["name"] == "gpu-0")["capacity"]["memory"]
    assert by_name["gpu-0"]["capacity"]["memory"] == expected  # NVML's total, as published


def test_two_gpus_in_one_container(
    real_node: RealNode, control_plane: ControlPlane, api_client: client.ApiClient, node_ns: str
) -> None:
    stored, _ = control_plane.create(
        node_ns, pod("two", [container("main", {"nvidia.com/gpu": 2})])
    )
    assert stored["spec"]["containers"][0]["resources"]["claims"], "gpu2dra did not translate"

    running = wait_running(api_client, node_ns, "two")
    assert running["spec"]["nodeName"] == real_node.name
    env = environment(control_plane, node_ns, "two", "main")
    seen = devices_seen(env)
    assert len(seen) == 2
    assert seen == set(allocated_names(api_client, node_ns, "two"))
    assert seen <= set(FULL_GPUS)
    assert claim_lists(env) == seen
    # kubectl exec reaches the kubelet too, and the running process has the same variables.
    done = control_plane.run_kubectl("exec", "-n", node_ns, "two", "-c", "main", "--", "env")
    assert done.returncode == 0, done.stderr
    exec_env = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    assert devices_seen(exec_env) == seen
    # One CDI spec for the one claim, named after its UID.
    (claim,) = pod_resource_claims(api_client, read_pod(api_client, node_ns, "two"))
    specs = real_node.cdi_specs()
    assert list(specs) == [f"gpu2dra-test-{claim['metadata']['uid']}.json"]


def test_init_container_shares_the_app_containers_claim(
    control_plane: ControlPlane, api_client: client.ApiClient, node_ns: str
) -> None:
    body = pod(
        "warm",
        [container("trainer", {"nvidia.com/gpu": 2})],
        init=[container("warmup", {"nvidia.com/gpu": 1}, exits=True)],
    )
    stored, _ = control_plane.create(node_ns, body)
    assert len(stored["spec"]["resourceClaims"]) == 1

    wait_running(api_client, node_ns, "warm")
    init_seen = devices_seen(environment(control_plane, node_ns, "warm", "warmup"))
    app_seen = devices_seen(environment(control_plane, node_ns, "warm", "trainer"))
    assert init_seen == app_seen
    assert len(app_seen) == 2
    # Under the device plugin this pod needed max(1, 2) = 2 GPUs; it still does.
    assert allocated_names(api_client, node_ns, "warm") == sorted(app_seen)


def test_sidecar_gets_a_claim_of_its_own(
    control_plane: ControlPlane, api_client: client.ApiClient, node_ns: str
) -> None:
    body = pod(
        "side",
        [container("app", {"nvidia.com/gpu": 1})],
        init=[container("proxy", {"nvidia.com/gpu": 1}, sidecar=True)],
    )
    control_plane.create(node_ns, body)

    running = wait_running(api_client, node_ns, "side")
    (sidecar,) = running["status"]["initContainerStatuses"]
    assert "running" in sidecar["state"]
    proxy = devices_seen(environment(control_plane, node_ns, "side", "proxy"))
    app = devices_seen(environment(control_plane, node_ns, "side", "app"))
    assert len(proxy) == len(app) == 1
    assert proxy.isdisjoint(app)
    assert allocated_names(api_client, node_ns, "side") == sorted(proxy | app)


def test_two_gpu_containers_each_see_their_own(
    control_plane: ControlPlane, api_client: client.ApiClient, node_ns: str
) -> None:
    body = pod(
        "pair",
        [container("one", {"nvidia.com/gpu": 1}), container("two", {"nvidia.com/gpu": 2})],
    )
    control_plane.create(node_ns, body)

    wait_running(api_client, node_ns, "pair")
    one = devices_seen(environment(control_plane, node_ns, "pair", "one"))
    two = devices_seen(environment(control_plane, node_ns, "pair", "two"))
    assert (len(one), len(two)) == (1, 2)
    assert one.isdisjoint(two)
    assert one | two <= set(FULL_GPUS)


def test_mig_device_reaches_the_container(
    control_plane: ControlPlane, api_client: client.ApiClient, node_ns: str
) -> None:
    control_plane.create(node_ns, pod("mig", [container("main", {"nvidia.com/mig-1g.5gb": 1})]))

    wait_running(api_client, node_ns, "mig")
    (device,) = devices_seen(environment(control_plane, node_ns, "mig", "main"))
    published = {d["name"]: d for d in NODE_DEVICES}[device]
    assert published["attributes"]["type"] == {"string": "mig"}
    assert published["attributes"]["profile"] == {"string": "1g.5gb"}
    assert UUIDS[device].startswith("MIG-")


def test_deleted_pod_releases_its_devices(
    real_node: RealNode, control_plane: ControlPlane, api_client: client.ApiClient, node_ns: str
) -> None:
    everything = {"nvidia.com/gpu": len(FULL_GPUS)}
    control_plane.create(node_ns, pod("first", [container("main", everything)]))
    wait_running(api_client, node_ns, "first")
    (claim,) = pod_resource_claims(api_client, read_pod(api_client, node_ns, "first"))
    spec_file = f"gpu2dra-test-{claim['metadata']['uid']}.json"
    assert spec_file in real_node.cdi_specs()
    assert devices_seen(environment(control_plane, node_ns, "first", "main")) == set(FULL_GPUS)

    control_plane.create(node_ns, pod("second", [container("main", everything)]))
    wait_for(
        lambda: _unschedulable(api_client, node_ns, "second"),
        30,
        "the scheduler to find no free GPUs for the second pod",
    )

    core = client.CoreV1Api(api_client)
    core.delete_namespaced_pod("first", node_ns)
    wait_for(lambda: _gone(core, node_ns, "first"), 60, "the first pod to be deleted")
    wait_for(
        lambda: spec_file not in real_node.cdi_specs(),
        60,
        f"the plugin to unprepare claim {claim['metadata']['name']} (remove {spec_file})",
    )
    wait_running(api_client, node_ns, "second")
    assert devices_seen(environment(control_plane, node_ns, "second", "main")) == set(FULL_GPUS)


def test_sharing_config_reaches_the_container(
    control_plane: ControlPlane, api_client: client.ApiClient, node_ns: str
) -> None:
    """The plugin honours the NVIDIA driver's opaque GpuConfig (a claim written by hand:
    gpu2dra emits no sharing config)."""
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "shared"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}],
                    "config": [
                        {
                            "requests": ["gpu"],
                            "opaque": {
                                "driver": "gpu.nvidia.com",
                                "parameters": {
                                    "apiVersion": "resource.nvidia.com/v1beta1",
                                    "kind": "GpuConfig",
                                    "sharing": {"strategy": "TimeSlicing"},
                                },
                            },
                        }
                    ],
                }
            }
        },
    }
    control_plane.create(node_ns, template)
    body = pod("ts", [container("main")])
    body["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "shared"}]
    body["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpu"}]}
    control_plane.create(node_ns, body)

    wait_running(api_client, node_ns, "ts")
    env = environment(control_plane, node_ns, "ts", "main")
    (device,) = devices_seen(env)
    sharing = {k: v for k, v in env.items() if k.startswith(SHARING_VAR)}
    assert sharing == {SHARING_VAR + device.upper().replace("-", "_"): "TimeSlicing"}


def _unschedulable(api: client.ApiClient, namespace: str, name: str) -> bool:
    current = read_pod(api, namespace, name)
    assert not current["spec"].get("nodeName"), "every GPU is taken: the second pod must wait"
    return any(
        c.get("reason") == "Unschedulable" and "cannot allocate all claims" in c.get("message", "")
        for c in current.get("status", {}).get("conditions") or []
    )


def _gone(core: client.CoreV1Api, namespace: str, name: str) -> bool:
    try:
        core.read_namespaced_pod(name, namespace)
    except ApiException as error:
        if error.status == 404:
            return True
        raise
    return False


def test_a_pod_left_to_the_in_tree_path_runs_and_sees_its_device(
    real_node: RealNode,
    webhook: Webhook,
    control_plane: ControlPlane,
    api_client: client.ApiClient,
    node_ns: str,
) -> None:
    """Where gpu.nvidia.com serves nvidia.com/gpu in-tree (1.37), a pod gpu2dra leaves alone
    keeps its extended resource; the scheduler's claim reaches the container through the
    kubelet (status.extendedResourceClaimStatus) and the plugin."""
    custom = client.CustomObjectsApi(api_client)

    def served(name: str | None) -> None:
        custom.patch_cluster_custom_object(
            "resource.k8s.io",
            "v1",
            "deviceclasses",
            "gpu.nvidia.com",
            {"spec": {"extendedResourceName": name}},
        )

    served("nvidia.com/gpu")
    try:
        webhook.set_mode(api_client, node_ns, "disabled")
        stored, _ = control_plane.create(
            node_ns, pod("native", [container("main", {"nvidia.com/gpu": 1})])
        )
        assert "resourceClaims" not in stored["spec"], "gpu2dra left it alone"
        running = wait_running(api_client, node_ns, "native")
        name = running["status"]["extendedResourceClaimStatus"]["resourceClaimName"]
        seen = devices_seen(environment(control_plane, node_ns, "native", "main"))
        assert len(seen) == 1 and seen <= set(FULL_GPUS)
        assert seen == set(allocated_names(api_client, node_ns, "native"))
        claim = custom.get_namespaced_custom_object(
            "resource.k8s.io", "v1", node_ns, "resourceclaims", name
        )
        assert "resource.kubernetes.io/extended-resource-claim" in claim["metadata"]["annotations"]
    finally:
        served(None)

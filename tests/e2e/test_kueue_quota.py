"""A workload Kueue queues never escapes its ClusterQueue through gpu2dra, proven against a
running Kueue v0.17.1 manager (tests/support/kueue.py) beside gpu2dra and the real control
plane, in each of the three configurations a cluster can be in: Kueue's DRA gate off; on
without a deviceClassMappings entry for gpu2dra's classes; on with them mapped to the quota
names the ClusterQueue already counts.

Every scenario's ClusterQueue holds 2 GPUs (and 2 MIG 1g.5gb slices) and every pod asks for
one. Each asserts Kueue's view (workloads admitted, the ClusterQueue's usage) and what the pods
got: devices allocated to their claims when gpu2dra translated them, or a device-plugin node
when it left them where Kueue counts them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

import pytest
from kubernetes import client

from tests.e2e.inspecting import gpu2dra
from tests.support.cluster import (
    add_device_plugin_node,
    add_gpu_node,
    allocated_devices,
    create_node,
    gpu_pod,
    read_pod,
    wait_for,
)
from tests.support.controlplane import ControlPlane
from tests.support.kueue import (
    GATE_OFF,
    MAPPED,
    MAPPED_KUEUE_FIRST,
    UNMAPPED,
    KueueManager,
    Setup,
    running_kueue,
)
from tests.support.webhook import Webhook

Obj = dict[str, Any]
pytestmark = pytest.mark.every_release
KUEUE = ("kueue.x-k8s.io", "v1beta2")
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
GATE = "kueue.x-k8s.io/admission"  # the scheduling gate Kueue's pod integration adds
GPU, MIG = "nvidia.com/gpu", "nvidia.com/mig-1g.5gb"
PRODUCT = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"}
SETUPS = (GATE_OFF, UNMAPPED, MAPPED, MAPPED_KUEUE_FIRST)
# Why gpu2dra leaves a queued pod on the device plugin under each Setup, as its warning says:
# the last only for claims with CEL selectors, which Kueue v0.17 refuses.
LEFT_BECAUSE = {
    GATE_OFF: "DRA gate DynamicResourceAllocation off",
    UNMAPPED: "deviceClassMappings names no",
    MAPPED: "refuses DRA claims with CEL selectors",
    MAPPED_KUEUE_FIRST: "refuses DRA claims with CEL selectors",
}


@pytest.fixture(scope="module")
def kueue_manager(
    control_plane: ControlPlane,
    api_client: client.ApiClient,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[KueueManager]:
    yield from running_kueue(control_plane, api_client, tmp_path_factory.mktemp("kueue"))


@pytest.fixture(scope="module", params=SETUPS, ids=[s.name for s in SETUPS])
def setup(request: pytest.FixtureRequest, kueue_manager: KueueManager, webhook: Webhook) -> Setup:
    """Kueue (re)started in this configuration, once gpu2dra's caches see it."""
    chosen: Setup = request.param
    if kueue_manager.setup != chosen:
        kueue_manager.start(chosen)
    return chosen


@pytest.fixture
def queue(
    api_client: client.ApiClient, namespace: str, webhook: Webhook, setup: Setup
) -> Iterator[str]:
    """A ClusterQueue of 2 GPUs and 2 MIG slices for `namespace` alone, its LocalQueue, and
    the namespace enabled for gpu2dra; the name of the LocalQueue."""
    custom = client.CustomObjectsApi(api_client)
    webhook.set_mode(api_client, namespace, "enabled")
    flavor: Obj = {"apiVersion": "/".join(KUEUE), "kind": "ResourceFlavor"}
    flavor |= {"metadata": {"name": "default-flavor"}, "spec": {}}
    _create_or_keep(custom, "resourceflavors", flavor)
    cluster_queue = {
        "apiVersion": "/".join(KUEUE),
        "kind": "ClusterQueue",
        "metadata": {"name": namespace},
        "spec": {
            "namespaceSelector": {
                "matchLabels": {"kubernetes.io/metadata.name": namespace},
            },
            "resourceGroups": [
                {
                    "coveredResources": [GPU, MIG],
                    "flavors": [
                        {
                            "name": "default-flavor",
                            "resources": [
                                {"name": GPU, "nominalQuota": 2},
                                {"name": MIG, "nominalQuota": 2},
                            ],
                        }
                    ],
                }
            ],
        },
    }
    custom.create_cluster_custom_object(*KUEUE, "clusterqueues", cluster_queue)
    local: Obj = {"apiVersion": "/".join(KUEUE), "kind": "LocalQueue"}
    local |= {"metadata": {"name": "team-a"}, "spec": {"clusterQueue": namespace}}
    custom.create_namespaced_custom_object(*KUEUE, namespace, "localqueues", local)
    wait_for(lambda: _active(custom, namespace), 30, f"ClusterQueue {namespace} to be active")
    yield "team-a"
    client.CoreV1Api(api_client).delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
    custom.delete_cluster_custom_object(*KUEUE, "clusterqueues", namespace)


def _create_or_keep(custom: client.CustomObjectsApi, plural: str, body: Obj) -> None:
    try:
        custom.create_cluster_custom_object(*KUEUE, plural, body)
    except client.exceptions.ApiException as err:
        if err.status != 409:
            raise


def _active(custom: client.CustomObjectsApi, name: str) -> bool:
    queue = cast(Obj, custom.get_cluster_custom_object(*KUEUE, "clusterqueues", name))
    conditions = queue.get("status", {}).get("conditions", [])
    return any(c["type"] == "Active" and c["status"] == "True" for c in conditions)


# -- what Kueue and the pods show -------------------------------------------------------------


def usage(api: client.ApiClient, cluster_queue: str) -> dict[str, int]:
    """The ClusterQueue's quota in use (admitted workloads), by resource."""
    queue = cast(
        Obj,
        client.CustomObjectsApi(api).get_cluster_custom_object(
            *KUEUE, "clusterqueues", cluster_queue
        ),
    )
    used: dict[str, int] = {}
    for flavor in queue.get("status", {}).get("flavorsUsage", []):
        for resource in flavor["resources"]:
            used[resource["name"]] = used.get(resource["name"], 0) + int(resource["total"])
    return used


def used(api: client.ApiClient, cluster_queue: str, expected: dict[str, int]) -> None:
    """Wait until the ClusterQueue's status shows `expected` in use (Kueue writes it a moment
    after it admits)."""
    last: dict[str, int] = {}

    def matches() -> bool:
        nonlocal last
        last = usage(api, cluster_queue)
        return last == expected

    wait_for(matches, 30, lambda: f"ClusterQueue {cluster_queue} to use {expected}, not {last}")


def workloads(api: client.ApiClient, namespace: str) -> list[Obj]:
    listed = client.CustomObjectsApi(api).list_namespaced_custom_object(
        *KUEUE, namespace, "workloads"
    )
    return cast(list[Obj], listed["items"])


def admitted(workload: Obj) -> bool:
    conditions = workload.get("status", {}).get("conditions", [])
    return any(c["type"] == "Admitted" and c["status"] == "True" for c in conditions)


def admissions(api: client.ApiClient, namespace: str) -> list[bool]:
    """Whether each Workload of the namespace is admitted, sorted."""
    return sorted(admitted(w) for w in workloads(api, namespace))


def pods(api: client.ApiClient, namespace: str) -> list[Obj]:
    listed = client.CoreV1Api(api).list_namespaced_pod(namespace)
    return [cast(Obj, api.sanitize_for_serialization(p)) for p in listed.items]


def gated(pod: Obj) -> bool:
    return any(g["name"] == GATE for g in pod["spec"].get("schedulingGates") or [])


def settled(api: client.ApiClient, namespace: str, want: int, total: int) -> list[Obj] | None:
    """The namespace's pods once `total` exist, `want` of them bound and the rest still held
    by Kueue's gate; None until then."""
    found = pods(api, namespace)
    bound = [p for p in found if p["spec"].get("nodeName")]
    held = [p for p in found if gated(p)]
    return (
        found if len(found) == total and len(bound) == want and len(held) == total - want else None
    )


def queued_pod(name: str, queue: str, resources: Obj, **spec: Any) -> Obj:
    pod = gpu_pod(name, resources, **spec)
    pod["metadata"]["labels"] = {QUEUE_LABEL: queue}
    return pod


def translated(pod: Obj) -> bool:
    return bool(pod["spec"].get("resourceClaims"))


def devices_of(api: client.ApiClient, found: list[Obj]) -> list[str]:
    """The DRA devices allocated to the claims of the pods (pool/device)."""
    return sorted(
        f"{r['pool']}/{r['device']}"
        for pod in found
        for r in allocated_devices(
            api, read_pod(api, pod["metadata"]["namespace"], pod["metadata"]["name"])
        )
    )


def pod_name(pod: Obj) -> str:
    return str(pod["metadata"]["name"])


def left_as_they_were(api: client.ApiClient, found: list[Obj], plugin: str) -> None:
    """Bound pods gpu2dra left ask for nvidia.com/gpu as before, and Kueue counts it: the
    device plugin's node serves them, or, from 1.36, the driver chart's gpu.nvidia.com in-tree
    (the claim the scheduler made, in status.extendedResourceClaimStatus)."""
    for pod in found:
        if not pod["spec"].get("nodeName"):
            continue
        assert not translated(pod)
        now = read_pod(api, pod["metadata"]["namespace"], pod["metadata"]["name"])
        in_tree = now["status"].get("extendedResourceClaimStatus")
        assert now["spec"]["nodeName"] == plugin or in_tree, now["status"]


def nodes_of(found: list[Obj]) -> list[str]:
    return sorted(p["spec"]["nodeName"] for p in found if p["spec"].get("nodeName"))


def job(name: str, queue: str, parallelism: int, **annotations: str) -> Obj:
    template = gpu_pod(name, {GPU: 1}, restartPolicy="Never")
    template.pop("apiVersion"), template.pop("kind")
    template["metadata"] = {}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {QUEUE_LABEL: queue}, "annotations": annotations},
        "spec": {"parallelism": parallelism, "completions": parallelism, "template": template},
    }


# -- scenarios --------------------------------------------------------------------------------


def test_jobs_are_counted_from_their_template_and_their_pods_translated(
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    queue: str,
    gpu_nodes: list[str],
) -> None:
    """Kueue builds a Job's Workload from its pod template, which admission never changes: in
    every configuration it admits what fits (a Job of 2), holds what does not (a Job of 1
    more), and the admitted Job's pods are translated and get their devices from claims."""
    node = add_gpu_node(api_client, gpu_nodes, gpus=4)
    control_plane.create(namespace, job("fits", queue, 2))
    found = wait_for(lambda: settled(api_client, namespace, 2, 2), 60, "the Job's 2 pods bound")
    control_plane.create(namespace, job("over", queue, 1))
    held = wait_for(lambda: _pending(api_client, namespace, "over"), 30, "Job over to be held")
    assert "insufficient unused quota for nvidia.com/gpu" in held
    assert all(translated(p) for p in found) and set(nodes_of(found)) == {node}
    assert len(devices_of(api_client, found)) == 2
    used(api_client, namespace, {GPU: 2, MIG: 0})
    wait_for(
        lambda: [admitted(w) for w in _by_owner(api_client, namespace)] == [True, False],
        30,
        "the Workload of Job fits admitted, of Job over not",
    )


def test_a_job_admitted_in_part_runs_only_its_admitted_pods(
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    queue: str,
    gpu_nodes: list[str],
) -> None:
    """Partial admission: a Job of 3 that may run with 1 is admitted with the 2 that fit; the
    Job controller makes 2 pods, gpu2dra translates them, 2 devices are allocated."""
    add_gpu_node(api_client, gpu_nodes, gpus=4)
    control_plane.create(
        namespace, job("part", queue, 3, **{"kueue.x-k8s.io/job-min-parallelism": "1"})
    )
    found = wait_for(lambda: settled(api_client, namespace, 2, 2), 60, "2 of the Job's pods")
    assert all(translated(p) for p in found)
    assert len(devices_of(api_client, found)) == 2
    used(api_client, namespace, {GPU: 2, MIG: 0})
    (workload,) = workloads(api_client, namespace)
    assert admitted(workload)
    assert workload["status"]["admission"]["podSetAssignments"][0]["count"] == 2


def _pending(api: client.ApiClient, namespace: str, owner: str) -> str | None:
    """The message of the QuotaReserved condition of `owner`'s Workload while it waits."""
    for workload in workloads(api, namespace):
        if workload["metadata"]["ownerReferences"][0]["name"] != owner:
            continue
        for condition in workload.get("status", {}).get("conditions", []):
            if condition["type"] == "QuotaReserved" and condition["status"] == "False":
                return str(condition.get("message", ""))
    return None


def _by_owner(api: client.ApiClient, namespace: str) -> list[Obj]:
    """The namespace's Workloads, the one of Job "fits" first."""
    return sorted(
        workloads(api, namespace),
        key=lambda w: w["metadata"]["ownerReferences"][0]["name"] != "fits",
    )


def expect_translated(setup: Setup) -> bool:
    """Whether gpu2dra translates a queued one-GPU pod under `setup`: only where this Kueue
    counts its claims."""
    return setup.gate and setup.mapped


def test_plain_pods_never_escape_the_cluster_queue(
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    queue: str,
    setup: Setup,
    gpu_nodes: list[str],
) -> None:
    """Kueue's pod integration builds each Workload from the stored pod, the translated one.
    Three queued pods of one GPU: two admitted and running on their devices, one held, in
    every configuration. Where this Kueue would not count claims (gate off, class unmapped),
    gpu2dra leaves the pods as they were, asking for nvidia.com/gpu, which Kueue counts: the
    device plugin or, on 1.37, the in-tree path serves them."""
    dra = add_gpu_node(api_client, gpu_nodes, gpus=4)
    plugin = add_device_plugin_node(api_client, gpu_nodes, gpus=4)
    warnings = [
        control_plane.create(namespace, queued_pod(f"p{i}", queue, {GPU: 1}))[1] for i in range(3)
    ]
    found = wait_for(lambda: settled(api_client, namespace, 2, 3), 60, "2 of 3 pods bound")
    used(api_client, namespace, {GPU: 2, MIG: 0})
    wait_for(
        lambda: (
            sorted(admitted(w) for w in workloads(api_client, namespace)) == [False, True, True]
        ),
        30,
        "3 Workloads, 2 of them admitted",
    )
    if expect_translated(setup):
        assert all(translated(p) for p in found) and set(nodes_of(found)) == {dra}
        assert len(devices_of(api_client, found)) == 2
        assert not any("Kueue" in w for w in warnings)
    else:
        left_as_they_were(api_client, found, plugin)
        reason = (
            "DRA gate DynamicResourceAllocation off"
            if setup is GATE_OFF
            else "deviceClassMappings names no"
        )
        assert all(reason in w for w in warnings), warnings
    # The pod Kueue holds: explain reads its Workload.
    (held,) = [p["metadata"]["name"] for p in found if gated(p)]
    explained = gpu2dra(control_plane.kubeconfig, "explain", "pod", held, "-n", namespace, check=3)
    assert "not scheduled: Kueue holds it (scheduling gate kueue.x-k8s.io/admission): " in (
        explained.stdout
    )
    assert "insufficient unused quota for nvidia.com/gpu" in explained.stdout, explained.stdout


def test_a_deployment_through_the_pod_integration_keeps_its_quota(
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    queue: str,
    setup: Setup,
    gpu_nodes: list[str],
) -> None:
    """A Deployment of 3 one-GPU replicas queued by the deployment integration: each pod is a
    Workload of its own; 2 run, 1 waits, in every configuration."""
    dra = add_gpu_node(api_client, gpu_nodes, gpus=4)
    plugin = add_device_plugin_node(api_client, gpu_nodes, gpus=4)
    labels = {"app": "serve"}
    template = gpu_pod("serve", {GPU: 1})
    template["metadata"] = {"labels": labels}
    template.pop("apiVersion"), template.pop("kind")
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "serve", "labels": {QUEUE_LABEL: queue}},
        "spec": {"replicas": 3, "selector": {"matchLabels": labels}, "template": template},
    }
    control_plane.create(namespace, deployment)
    found = wait_for(lambda: settled(api_client, namespace, 2, 3), 60, "2 of 3 replicas bound")
    used(api_client, namespace, {GPU: 2, MIG: 0})
    if expect_translated(setup):
        assert set(nodes_of(found)) == {dra} and all(translated(p) for p in found)
        assert len(devices_of(api_client, found)) == 2
    else:
        left_as_they_were(api_client, found, plugin)


@pytest.mark.parametrize(
    ("resources", "spec", "counted"),
    [
        ({MIG: 1}, {}, MIG),
        ({GPU: 1}, {"nodeSelector": PRODUCT}, GPU),
    ],
    ids=["mig", "gfd-selector"],
)
def test_pods_with_selectors_stay_where_kueue_v0_17_counts_them(
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    queue: str,
    setup: Setup,
    gpu_nodes: list[str],
    resources: Obj,
    spec: Obj,
    counted: str,
) -> None:
    """A MIG pod and a pod whose GFD node selector becomes a CEL selector: Kueue v0.17 refuses
    claims with selectors (held for good), so in every configuration gpu2dra leaves them on
    the device plugin, where the ClusterQueue counts them: 2 of 3 run."""
    add_gpu_node(api_client, gpu_nodes, gpus=2, mig={1: ["1g.5gb"] * 7})
    name = f"plugin-{namespace[-6:]}"
    gpu_nodes.append(name)
    create_node(api_client, name, labels=PRODUCT, extended={GPU: "4", MIG: "4"})
    warnings = [
        control_plane.create(namespace, queued_pod(f"s{i}", queue, resources, **spec))[1]
        for i in range(3)
    ]
    found = wait_for(lambda: settled(api_client, namespace, 2, 3), 60, "2 of 3 pods bound")
    used(api_client, namespace, {GPU: 0, MIG: 0} | {counted: 2})
    assert not any(translated(p) for p in found) and set(nodes_of(found)) == {name}
    assert all(LEFT_BECAUSE[setup] in w for w in warnings), warnings

"""`gpu2dra nodes plan` and `gpu2dra nodes convert` against the real control plane: nodes
without a kubelet, and a stand-in for the two DaemonSets and the kubelet (`Stacks`) that
follows each node's labels as the device plugin's and the DRA driver's node selectors would
(nvidia.com/gpu in allocatable, or a ResourceSlice of its GPUs) and, as a kubelet, marks its
pods Ready and removes the ones being deleted.

A device-plugin pod whose PodDisruptionBudget allows no disruption stops the drain (the node
stays cordoned, the state on it); once the budget allows it the same command resumes, the pod
is evicted and its Deployment's replacement is scheduled on the other node; the node then
publishes its devices and offers no nvidia.com/gpu, and a translated pod is allocated a device
on it. A DaemonSet's GPU pod refuses a conversion; `--revert` brings the device plugin back."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.e2e.inspecting import Obj, doctor, gpu2dra, pod_template
from tests.support.cluster import (
    allocated_devices,
    create_namespace,
    create_node,
    delete_namespace,
    delete_node,
    gpu_devices,
    gpu_pod,
    gpu_resource_slice,
    label,
    wait_for,
    wait_for_default_service_account,
    wait_for_pod_scheduled,
)
from tests.support.controlplane import ControlPlane
from tests.support.webhook import Webhook

pytestmark = pytest.mark.every_release
PLUGIN = "nvidia.com/gpu.deploy.device-plugin"
DRA = "nvidia.com/dra-driver.deploy"
GPUS = 2


class Stacks:
    """The device plugin's and the DRA driver's DaemonSets, and the kubelet, for `nodes`."""

    def __init__(self, api: client.ApiClient, nodes: list[str]) -> None:
        self.api, self.nodes = api, nodes
        self.core = client.CoreV1Api(api)
        self.resource = client.ResourceV1Api(api)
        self.stop = threading.Event()
        self.failed: list[str] = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.wait(0.3):
            for name in self.nodes:
                try:
                    self._follow(name)
                except ApiException:
                    continue  # the next round sees it again
                except Exception as err:  # a stand-in that stops would hang the test
                    self.failed.append(repr(err))

    def _follow(self, name: str) -> None:
        node = self.core.read_node(name)
        labels = node.metadata.labels or {}
        on_dra = labels.get(DRA) == "true"
        plugin = not on_dra and labels.get(PLUGIN) != "false"
        offered = "nvidia.com/gpu" in (node.status.allocatable or {})
        if plugin != offered:
            value = str(GPUS) if plugin else None  # null removes the key
            self.core.patch_node_status(
                name,
                {
                    "status": {
                        "allocatable": {"nvidia.com/gpu": value},
                        "capacity": {"nvidia.com/gpu": value},
                    }
                },
            )
        slices = self.resource.list_resource_slice(field_selector=f"spec.nodeName={name}").items
        if on_dra and not slices:
            client.CustomObjectsApi(self.api).create_cluster_custom_object(
                "resource.k8s.io",
                "v1",
                "resourceslices",
                gpu_resource_slice(name, gpu_devices(name, gpus=GPUS)),
            )
        if not on_dra:
            for s in slices:
                self.resource.delete_resource_slice(s.metadata.name)
        for pod in self.core.list_pod_for_all_namespaces(
            field_selector=f"spec.nodeName={name}"
        ).items:
            if pod.metadata.deletion_timestamp:
                self.core.delete_namespaced_pod(
                    pod.metadata.name, pod.metadata.namespace, grace_period_seconds=0
                )
            elif pod.status.phase != "Running":
                self.core.patch_namespaced_pod_status(
                    pod.metadata.name,
                    pod.metadata.namespace,
                    {
                        "status": {
                            "phase": "Running",
                            "conditions": [{"type": "Ready", "status": "True"}],
                        }
                    },
                )

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)


def trainer(replicas: int = 1) -> Obj:
    template = pod_template({"nvidia.com/gpu": 1})
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "trainer"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": template["metadata"]["labels"]},
            "template": template,
        },
    }


def budget(min_available: int, selector: dict[str, str]) -> Obj:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "trainer"},
        "spec": {"minAvailable": min_available, "selector": {"matchLabels": selector}},
    }


@pytest.fixture
def pool(
    webhook: Webhook, api_client: client.ApiClient, control_plane: ControlPlane
) -> Iterator[tuple[str, str, str, str]]:
    """(node a, node b, a namespace gpu2dra leaves on the device plugin, an enabled one):
    two device-plugin nodes of GPUS GPUs each, the stand-in following them, and the
    trainer Deployment's pod on a with a budget that allows no disruption."""
    tag = uuid.uuid4().hex[:5]
    a, b = f"convert-a-{tag}", f"convert-b-{tag}"
    legacy, enabled = (create_namespace(api_client, f"nodes-{m}-") for m in ("legacy", "on"))
    stacks = None
    try:
        for name in (a, b):
            create_node(api_client, name, labels={PLUGIN: "true"}, extended={"nvidia.com/gpu": "2"})
        client.CoreV1Api(api_client).patch_node(b, {"spec": {"unschedulable": True}})
        stacks = Stacks(api_client, [a, b])
        for ns in (legacy, enabled):
            wait_for_default_service_account(api_client, ns)
        label(api_client, enabled, "enabled")
        deployment = trainer()
        control_plane.create(legacy, deployment)
        control_plane.create(legacy, budget(1, deployment["spec"]["selector"]["matchLabels"]))

        def on_a() -> bool:
            pods = client.CoreV1Api(api_client).list_namespaced_pod(legacy).items
            return (
                len(pods) == 1
                and pods[0].spec.node_name == a
                and pods[0].status.phase == ("Running")
            )

        wait_for(on_a, 60, "the trainer's pod Running on node a")
        client.CoreV1Api(api_client).patch_node(b, {"spec": {"unschedulable": None}})
        yield a, b, legacy, enabled
    finally:
        if stacks is not None:
            stacks.close()
            assert stacks.failed == []
        for ns in (legacy, enabled):
            delete_namespace(api_client, ns)
        for name in (a, b):
            delete_node(api_client, name)


def node_of(api: client.ApiClient, name: str) -> Obj:
    return api.sanitize_for_serialization(client.CoreV1Api(api).read_node(name))  # type: ignore[no-any-return]


def events_of(api: client.ApiClient, name: str) -> list[str]:
    listed = client.CoreV1Api(api).list_namespaced_event(
        "default", field_selector=f"involvedObject.name={name}"
    )
    return [e.reason for e in listed.items]


def test_plan_picks_the_node_whose_pods_move_with_it(
    control_plane: ControlPlane, api_client: client.ApiClient, pool: tuple[str, str, str, str]
) -> None:
    """A pod of two GPUs on the device plugin, on b, in a namespace enabled since it was
    created: more than DRA has free (what other tests publish, at most one); b is picked, its
    pod moving with it, and a keeps a GPU for the trainer that stays."""
    a, b, _, enabled = pool
    label(api_client, enabled, None)
    control_plane.create(
        enabled,
        gpu_pod("waits", {"nvidia.com/gpu": GPUS}, nodeSelector={"kubernetes.io/hostname": b}),
    )
    assert wait_for_pod_scheduled(api_client, enabled, "waits", 60)["spec"]["nodeName"] == b
    label(api_client, enabled, "enabled")
    body = json.loads(
        gpu2dra(control_plane.kubeconfig, "nodes", "plan", "-o", "json", check=0).stdout
    )
    (picked,) = [n for n in body["convert"] if n["name"] in (a, b)]
    assert (picked["name"], picked["moving"], picked["staying"]) == (b, 1, {})
    assert picked["offers"] == {"nvidia.com/gpu": GPUS}
    assert body["pluginAfter"]["nvidia.com/gpu"]["stayingNeed"] == 0
    text = gpu2dra(control_plane.kubeconfig, "nodes", "plan", check=0).stdout
    assert f"\n{b}  " in "\n" + text and "NODE" in text
    assert f"convert {b} for gpu.nvidia.com devices" in " ".join(body["sentences"])


def test_a_node_converts_resumes_after_a_budget_and_reverts(
    control_plane: ControlPlane, api_client: client.ApiClient, pool: tuple[str, str, str, str]
) -> None:
    a, b, legacy, enabled = pool
    kubeconfig = control_plane.kubeconfig
    convert = ("nodes", "convert", a, "--apply", "--preset", "gpu-operator")

    # A dry run changes nothing.
    dry = gpu2dra(kubeconfig, "nodes", "convert", a, check=0)
    assert f"{a}: drain: would evict 1 pod(s): {legacy}/" in dry.stdout
    assert not node_of(api_client, a)["spec"].get("unschedulable")

    # The budget allows no disruption: the drain stops, the node stays cordoned.
    stopped = gpu2dra(kubeconfig, *convert, "--timeout", "6", check=2)
    assert "its PodDisruptionBudget allows no disruption now" in stopped.stderr
    node = node_of(api_client, a)
    assert node["spec"]["unschedulable"] is True
    assert json.loads(node["metadata"]["annotations"]["gpu2dra.io/conversion"])["done"] == "cordon"
    assert node["metadata"]["labels"][PLUGIN] == "true"  # never switched
    assert "Gpu2draDrainStuck" in events_of(api_client, a)
    _, checks = doctor(control_plane)
    assert checks["conversions"]["status"] == "WARN"
    assert f"mid-conversion, cordoned: {a}" in checks["conversions"]["summary"]
    report = gpu2dra(kubeconfig, "report", "-A", check=0).stdout
    assert f"  node {a}: converting to the DRA driver (after cordon, since " in report

    # Once it allows one, the same command resumes where it stopped.
    client.PolicyV1Api(api_client).patch_namespaced_pod_disruption_budget(
        "trainer", legacy, {"spec": {"minAvailable": 0}}
    )
    resumed = gpu2dra(kubeconfig, *convert, "--timeout", "60", check=0)
    assert f"{a}: resuming after cordon" in resumed.stdout
    assert f"{a}: done: its GPUs are offered through the DRA driver" in resumed.stdout
    node = node_of(api_client, a)
    assert "nvidia.com/gpu" not in node["status"]["allocatable"]
    assert not node["spec"].get("unschedulable")
    assert "gpu2dra.io/conversion" not in node["metadata"].get("annotations", {})
    assert node["metadata"]["labels"][PLUGIN] == "false" and node["metadata"]["labels"][DRA] == (
        "true"
    )
    # Events are stamped to the second: the steps' order is the unit tests' to check.
    assert {
        "Gpu2draCordoned",
        "Gpu2draDrainStuck",
        "Gpu2draDrained",
        "Gpu2draStackSwitched",
        "Gpu2draStackReady",
        "Gpu2draConverted",
    } == set(events_of(api_client, a))

    # The trainer's replacement runs on b, on the device plugin.
    def replaced() -> bool:
        pods = client.CoreV1Api(api_client).list_namespaced_pod(legacy).items
        return [p.spec.node_name for p in pods] == [b]

    wait_for(replaced, 60, "the trainer's replacement on node b")

    # A translated pod gets a device of a.
    control_plane.create(enabled, gpu_pod("solo", {"nvidia.com/gpu": 1}))
    solo = wait_for_pod_scheduled(api_client, enabled, "solo", 60)
    assert solo["spec"]["nodeName"] == a
    wait_for(lambda: allocated_devices(api_client, solo) or None, 30, "solo's device")

    # Back to the device plugin: refused while its pod holds the only DRA devices (it would
    # have nowhere to go), done once it has finished.
    refused = gpu2dra(kubeconfig, *convert, "--revert", check=2)
    assert f"1 pod(s) on {a} hold DRA devices and no other schedulable node publishes any" in (
        refused.stderr
    )
    client.CoreV1Api(api_client).delete_namespaced_pod("solo", enabled, grace_period_seconds=0)
    wait_for(
        lambda: not client.CoreV1Api(api_client).list_namespaced_pod(enabled).items,
        30,
        "solo gone",
    )
    reverted = gpu2dra(kubeconfig, *convert, "--revert", "--timeout", "60", check=0)
    assert f"{a}: done: its GPUs are offered through the device plugin" in reverted.stdout
    node = node_of(api_client, a)
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "2"
    assert (
        not client.ResourceV1Api(api_client)
        .list_resource_slice(field_selector=f"spec.nodeName={a}")
        .items
    )


def test_a_daemonsets_gpu_pod_refuses_a_conversion(
    control_plane: ControlPlane, api_client: client.ApiClient, pool: tuple[str, str, str, str]
) -> None:
    _, b, legacy, _ = pool
    template = pod_template({"nvidia.com/gpu": 1})
    template["spec"]["nodeSelector"] = {"kubernetes.io/hostname": b}
    control_plane.create(
        legacy,
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": "agent"},
            "spec": {
                "selector": {"matchLabels": template["metadata"]["labels"]},
                "template": template,
            },
        },
    )

    def agent_on_b() -> bool:
        pods = (
            client.CoreV1Api(api_client)
            .list_namespaced_pod(legacy, field_selector=f"spec.nodeName={b}")
            .items
        )
        return any(p.metadata.name.startswith("agent-") for p in pods)

    wait_for(agent_on_b, 60, "the DaemonSet's pod on b")
    refused = gpu2dra(control_plane.kubeconfig, "nodes", "convert", b, "--apply", check=2)
    assert "(a DaemonSet's pod) holds the node's GPUs and would not leave" in refused.stderr
    node = node_of(api_client, b)
    assert not node["spec"].get("unschedulable")
    assert "gpu2dra.io/conversion" not in (node["metadata"].get("annotations") or {})

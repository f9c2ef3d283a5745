"""gpu2dra_pod_gpu_info on a real node: pods translated by gpu2dra (a whole GPU, a MIG device)
and one the in-tree path serves, Running under the kubelet with devices the fake DRA plugin
prepared; the exporter names, for each container, exactly the UUIDs the container itself was
given (GPU2DRA_DEVICE_<DEVICE> in its environment) and the node's ResourceSlice publishes.

The node is tests/node's RealNode, started here for this module (one real node at a time on a
machine: run it under `flock /tmp/gpu2dra-node.lock`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.e2e.exporting import INFO, Running, running_exporter
from tests.node.node import (
    BUSYBOX_IMAGE,
    RealNode,
)
from tests.support.cluster import A100_SXM4_40GB, gpu_devices, read_pod, wait_for
from tests.support.controlplane import REAL_NODE_NAME, ControlPlane
from tests.support.realnode import running_node
from tests.support.webhook import Webhook

Obj = dict[str, Any]
NODE_DEVICES = gpu_devices(REAL_NODE_NAME, A100_SXM4_40GB, gpus=3, mig={2: ["3g.20gb"]})
UUIDS = {d["name"]: d["attributes"]["uuid"]["string"] for d in NODE_DEVICES}
PARENTS = {
    d["name"]: d["attributes"]["parentUUID"]["string"]
    for d in NODE_DEVICES
    if "parentUUID" in d["attributes"]
}
DEVICE_VAR = "GPU2DRA_DEVICE_"


@pytest.fixture(scope="module")
def real_node(
    request: pytest.FixtureRequest,
    control_plane: ControlPlane,
    api_client: client.ApiClient,
    webhook: Webhook,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[RealNode]:
    work_dir = tmp_path_factory.mktemp("node")
    yield from running_node(request, control_plane, api_client, work_dir, NODE_DEVICES)


@pytest.fixture
def exporter(control_plane: ControlPlane, tmp_path: Path) -> Iterator[Running]:
    with running_exporter(control_plane, tmp_path / "exporter.log") as running:
        yield running


def container(name: str, resource: str) -> Obj:
    """Busybox printing its environment to its log, then waiting."""
    script = "trap 'exit 0' TERM; echo ENV-BEGIN; env | sort; echo ENV-END; sleep 3600 & wait"
    return {
        "name": name,
        "image": BUSYBOX_IMAGE,
        "imagePullPolicy": "Never",
        "command": ["sh", "-c", script],
        "resources": {"limits": {resource: 1}},
    }


def pod(name: str, resource: str) -> Obj:
    spec = {
        "containers": [container("main", resource)],
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 5,
        "automountServiceAccountToken": False,
    }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def running_pod(api: client.ApiClient, namespace: str, name: str) -> Obj:
    def running() -> Obj | None:
        found = read_pod(api, namespace, name)
        status = found.get("status", {})
        if status.get("phase") == "Failed":
            raise AssertionError(f"pod {namespace}/{name} failed: {status}")
        return found if status.get("phase") == "Running" else None

    return wait_for(running, 90, f"pod {namespace}/{name} Running")


def devices_seen(plane: ControlPlane, namespace: str, name: str) -> dict[str, str]:
    """device -> uuid, as the container was given them (GPU2DRA_DEVICE_<DEVICE>)."""

    def logged() -> list[str] | None:
        done = plane.run_kubectl("logs", "-n", namespace, name, "-c", "main")
        lines = done.stdout.splitlines()
        return lines if done.returncode == 0 and "ENV-END" in lines else None

    lines = wait_for(logged, 30, f"the environment of {namespace}/{name}")
    return {
        key[len(DEVICE_VAR) :].lower().replace("_", "-"): value
        for key, _, value in (line.partition("=") for line in lines)
        if key.startswith(DEVICE_VAR)
    }


def test_the_info_metric_names_what_each_running_container_was_given(
    real_node: RealNode,
    webhook: Webhook,
    control_plane: ControlPlane,
    api_client: client.ApiClient,
    namespace: str,
    exporter: Running,
) -> None:
    custom = client.CustomObjectsApi(api_client)

    def in_tree(name: str | None) -> None:
        custom.patch_cluster_custom_object(
            "resource.k8s.io",
            "v1",
            "deviceclasses",
            "gpu.nvidia.com",
            {"spec": {"extendedResourceName": name}},
        )

    core = client.CoreV1Api(api_client)
    try:
        webhook.set_mode(api_client, namespace, "enabled")
        for name, resource in (("whole", "nvidia.com/gpu"), ("slice", "nvidia.com/mig-3g.20gb")):
            stored, _ = control_plane.create(namespace, pod(name, resource))
            assert stored["spec"]["resourceClaims"], "translated by gpu2dra"
        # Served in-tree from here on: a pod gpu2dra leaves gets the scheduler's claim.
        in_tree("nvidia.com/gpu")
        webhook.set_mode(api_client, namespace, "disabled")
        stored, _ = control_plane.create(namespace, pod("native", "nvidia.com/gpu"))
        assert "resourceClaims" not in stored["spec"], "left to the in-tree path"
        expected = set()
        for name, path in (("whole", "gpu2dra"), ("slice", "gpu2dra"), ("native", "in-tree")):
            uid = running_pod(api_client, namespace, name)["metadata"]["uid"]
            ((device, uuid),) = devices_seen(control_plane, namespace, name).items()
            assert UUIDS[device] == uuid, "the plugin gave the published uuid"
            physical, mig = (PARENTS[device], uuid) if device in PARENTS else (uuid, "")
            expected.add((name, uid, "main", path, device, physical, mig))

        last: set[tuple[str, ...]] = set()

        def rows() -> set[tuple[str, ...]] | None:
            nonlocal last
            found: set[tuple[str, ...]] = {
                (
                    s["pod"],
                    s["pod_uid"],
                    s["container"],
                    s["path"],
                    s["device"],
                    s["UUID"],
                    s["mig_uuid"],
                )
                for s, _ in exporter.scrape().get(INFO, [])
                if s["namespace"] == namespace
            }
            last = found
            return found if found == expected else None

        wait_for(rows, 30, lambda: f"{INFO} to name {sorted(expected)}, not {sorted(last)}")
        assert {s["node"] for s, _ in exporter.scrape()[INFO] if s["namespace"] == namespace} == {
            real_node.name
        }
    finally:
        core.delete_collection_namespaced_pod(namespace)
        in_tree(None)
        wait_for(
            lambda: not core.list_namespaced_pod(namespace).items and not real_node.cdi_specs(),
            90,
            lambda: f"pods of {namespace} gone and their claims unprepared",
        )

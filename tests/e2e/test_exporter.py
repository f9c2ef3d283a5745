"""`gpu2dra exporter` against the real control plane: pods translated by the webhook, bound
by the real scheduler with their claims allocated, and gpu2dra_pod_gpu_info naming exactly
the UUIDs the node's ResourceSlice publishes for the allocated devices; the series follow a
deleted pod; a scrape makes no API call; and the dashboard's join, over this scrape and
synthetic dcgm-exporter series, names each GPU by its pod."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.e2e.exporting import INFO, Running, running_exporter
from tests.support.cluster import (
    add_gpu_node,
    allocated_devices,
    pod_resource_claims,
    read_pod,
    wait_for,
    wait_for_pod_scheduled,
)
from tests.support.controlplane import ControlPlane
from tests.support.promql import evaluate
from tests.support.webhook import CHART, Webhook

Obj = dict[str, Any]


@pytest.fixture
def exporter(control_plane: ControlPlane, tmp_path: Path) -> Iterator[Running]:
    with running_exporter(control_plane, tmp_path / "exporter.log") as running:
        yield running


def slice_uuids(api: client.ApiClient, node: str) -> dict[str, tuple[str, str]]:
    """device -> (uuid, parentUUID) as the node's ResourceSlice publishes them."""
    slices = client.ResourceV1Api(api).list_resource_slice(field_selector=f"spec.nodeName={node}")
    found = {}
    for s in slices.items:
        for device in api.sanitize_for_serialization(s)["spec"]["devices"]:
            attributes = device["attributes"]
            parent = attributes.get("parentUUID", {}).get("string", "")
            found[device["name"]] = (attributes["uuid"]["string"], parent)
    return found


def warmup_pod(name: str, resource: str) -> Obj:
    """An init container and the app asking for one device each: translated, they share the
    app's claim, as under the device plugin."""
    limits = {"limits": {resource: 1}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "initContainers": [{"name": "warmup", "image": "cuda:12", "resources": limits}],
            "containers": [{"name": "main", "image": "cuda:12", "resources": limits}],
        },
    }


def test_the_info_metric_names_the_uuids_the_slice_publishes(
    webhook: Webhook,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    gpu_nodes: list[str],
    exporter: Running,
) -> None:
    node = add_gpu_node(api_client, gpu_nodes, gpus=2, mig={1: ["3g.20gb"]})
    webhook.set_mode(api_client, namespace, "enabled")
    control_plane.create(namespace, warmup_pod("train", "nvidia.com/gpu"))
    control_plane.create(namespace, warmup_pod("slice", "nvidia.com/mig-3g.20gb"))
    published = slice_uuids(api_client, node)
    expected = set()
    for name in ("train", "slice"):
        wait_for_pod_scheduled(api_client, namespace, name)
        pod = read_pod(api_client, namespace, name)
        (claim,) = pod_resource_claims(api_client, pod)
        (device,) = allocated_devices(api_client, pod)
        uuid, parent = published[device["device"]]
        physical, mig = (parent, uuid) if parent else (uuid, "")
        for container in ("warmup", "main"):
            expected.add(
                (
                    *(name, pod["metadata"]["uid"], container, claim["metadata"]["name"]),
                    *(device["device"], physical, mig),
                )
            )

    def rows() -> set[tuple[str, ...]] | None:
        found: set[tuple[str, ...]]
        found = {
            (
                s["pod"],
                s["pod_uid"],
                s["container"],
                s["claim"],
                s["device"],
                s["UUID"],
                s["mig_uuid"],
            )
            for s, _ in exporter.scrape().get(INFO, [])
            if s["namespace"] == namespace
        }
        return found if found == expected else None

    wait_for(rows, 30, f"{INFO} to name {sorted(expected)}")
    series = [s for s, _ in exporter.scrape()[INFO] if s["namespace"] == namespace]
    assert {s["node"] for s in series} == {node}
    assert {s["path"] for s in series} == {"gpu2dra"}
    by_pod = {s["pod"]: s for s in series}
    assert by_pod["train"]["device_class"] == "gpu.nvidia.com"
    assert (by_pod["slice"]["device_class"], by_pod["slice"]["GPU_I_PROFILE"]) == (
        "mig.nvidia.com",
        "3g.20gb",
    )
    assert by_pod["slice"]["UUID"].startswith("GPU-") and by_pod["slice"]["mig_uuid"].startswith(
        "MIG-"
    )

    # a scrape reads the caches: no list, no watch
    calls = sum(v for _, v in exporter.scrape()["gpu2dra_api_calls_total"])
    for _ in range(3):
        exporter.scrape()
    assert sum(v for _, v in exporter.scrape()["gpu2dra_api_calls_total"]) == calls

    # the dashboard's join over this scrape and dcgm-exporter's series of the node's GPUs
    board = json.loads((CHART / "dashboards" / "gpu2dra.json").read_text())
    (expr,) = [
        t["expr"]
        for p in board["panels"]
        for t in p.get("targets", [])
        if p["title"] == "GPU utilisation per pod"
    ]
    info = [(s, v) for s, v in exporter.scrape()[INFO] if s["namespace"] == namespace]
    whole = by_pod["train"]["UUID"]
    dcgm = [
        ({"UUID": whole, "gpu": "0", "namespace": "gpu-operator", "pod": "dcgm-x"}, 93.0),
        ({"UUID": "GPU-elsewhere", "gpu": "0", "namespace": "gpu-operator", "pod": "dcgm-y"}, 5.0),
    ]
    joined = evaluate(
        expr.replace("$namespace", namespace),
        {INFO: info, "DCGM_FI_DEV_GPU_UTIL": dcgm},
    )
    assert [(s["namespace"], s["pod"], s["UUID"], v) for s, v in joined] == [
        (namespace, "train", whole, 93.0)
    ]

    # the pod goes, and its series with it
    client.CoreV1Api(api_client).delete_namespaced_pod("train", namespace, grace_period_seconds=0)
    wait_for(
        lambda: not [s for s, _ in exporter.scrape().get(INFO, []) if s["pod"] == "train"],
        30,
        "the deleted pod's series to go",
    )

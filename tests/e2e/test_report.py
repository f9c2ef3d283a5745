"""`gpu2dra report` against the real control plane: workloads still asking for legacy GPUs,
found at the controller at the top, by namespace, with a rollout order."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.e2e.inspecting import (
    Obj,
    create_crd,
    gpu2dra,
    kubeconfig_for,
    pod_template,
    train_job,
    train_job_crd,
)
from tests.support.cluster import (
    create_namespace,
    create_node,
    delete_namespace,
    delete_node,
    gpu_pod,
    label,
    wait_for,
    wait_for_default_service_account,
)
from tests.support.controlplane import ControlPlane
from tests.support.webhook import Webhook

GROUP = "e2e.gpu2dra.io"


def job(name: str, gpus: int, owner: Obj | None = None) -> Obj:
    """A Job; with `owner`, as the CronJob controller makes it (the CronJob's controller
    reference), so no test waits for a schedule."""
    tpl = pod_template({"nvidia.com/gpu": gpus})
    metadata: Obj = {"name": name}
    if owner is not None:
        meta = owner["metadata"]
        metadata["ownerReferences"] = [
            {
                "apiVersion": "batch/v1",
                "kind": "CronJob",
                "name": meta["name"],
                "uid": meta["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata,
        "spec": {"template": {**tpl, "spec": {**tpl["spec"], "restartPolicy": "Never"}}},
    }


def cron_job(name: str, gpus: int) -> Obj:
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": name},
        "spec": {"schedule": "0 3 * * *", "jobTemplate": {"spec": job(name, gpus)["spec"]}},
    }


def workload(kind: str, name: str, gpus: int, **spec: Any) -> Obj:
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {"app": "w"}},
            "template": pod_template({"nvidia.com/gpu": gpus}),
            **spec,
        },
    }


def owner_kinds(api: client.ApiClient, namespace: str) -> list[str]:
    """The controller kind of each pod in the namespace."""
    pods = client.CoreV1Api(api).list_namespaced_pod(namespace).items
    return [r.kind for p in pods for r in p.metadata.owner_references or [] if r.controller]


@pytest.fixture(scope="module")
def workloads(
    webhook: Webhook, api_client: client.ApiClient, control_plane: ControlPlane
) -> Iterator[dict[str, str]]:
    """Three namespaces: `clean` (no label) and `audit` hold legacy GPU workloads, `enabled`
    is migrated already. `clean`'s controllers have made their pods (a node exists for the
    DaemonSet), so every pod is there to be folded into its top controller."""
    spaces = {
        k: create_namespace(api_client, f"report-{k}-") for k in ("clean", "audit", "enabled")
    }
    node = f"report-{spaces['clean'][-5:]}"
    create_node(api_client, node)
    crd = train_job_crd(GROUP)
    try:
        for ns in spaces.values():
            wait_for_default_service_account(api_client, ns)
        create_crd(control_plane, crd)
        label(api_client, spaces["audit"], "audit")
        label(api_client, spaces["enabled"], "enabled")
        deployment = workload("Deployment", "infer", 1, replicas=2)
        control_plane.create(spaces["clean"], deployment)
        control_plane.create(spaces["enabled"], deployment)
        clean = spaces["clean"]
        nightly, _ = control_plane.create(clean, cron_job("nightly", 2))
        control_plane.create(clean, job("nightly-29412345", 2, owner=nightly))
        control_plane.create(clean, job("once", 8))
        control_plane.create(clean, workload("DaemonSet", "agent", 1))
        control_plane.create(clean, train_job("llm", GROUP, 4))
        sts = workload(
            "StatefulSet",
            "db",
            1,
            serviceName="db",
            replicas=1,
            template=pod_template(
                {"nvidia.com/gpu": 1}, env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]
            ),
        )
        control_plane.create(spaces["audit"], sts)
        control_plane.create(spaces["audit"], gpu_pod("mig", {"nvidia.com/mig-1g.5gb": 1}))

        def all_made() -> bool:
            kinds = owner_kinds(api_client, clean)
            return (
                kinds.count("Job") == 2 and kinds.count("ReplicaSet") == 2 and "DaemonSet" in kinds
            )

        wait_for(all_made, 60, "the pods of both Jobs, the Deployment and the DaemonSet")
        yield spaces
    finally:
        for ns in spaces.values():
            delete_namespace(api_client, ns)
        delete_node(api_client, node)
        control_plane.kubectl("delete", "crd", crd["metadata"]["name"], "--ignore-not-found")


def report_json(plane: ControlPlane, *args: str) -> Obj:
    return json.loads(gpu2dra(plane.kubeconfig, "report", "-o", "json", *args, check=0).stdout)  # type: ignore[no-any-return]


def test_every_workload_at_the_top(control_plane: ControlPlane, workloads: dict[str, str]) -> None:
    report = report_json(control_plane, "-A")
    mine = {n["name"]: n for n in report["namespaces"] if n["name"] in workloads.values()}
    clean = mine[workloads["clean"]]
    assert clean["mode"] == "disabled"
    rows = {f"{w['kind']}/{w['name']}": w for w in clean["workloads"]}
    # Each once, at the top: the Deployment's ReplicaSet and pods, the CronJob's Job and its
    # pod, the pods of the Job and of the DaemonSet.
    assert sorted(rows) == [
        "CronJob/nightly",
        "DaemonSet/agent",
        "Deployment/infer",
        "Job/once",
        "TrainJob/llm",
    ]
    assert rows["Deployment/infer"]["replicas"] == 2
    assert rows["Deployment/infer"]["gpus"] == {"nvidia.com/gpu": 1}
    assert rows["CronJob/nightly"]["gpus"] == {"nvidia.com/gpu": 2}
    assert rows["Job/once"]["gpus"] == {"nvidia.com/gpu": 8}
    assert rows["DaemonSet/agent"]["gpus"] == {"nvidia.com/gpu": 1}
    assert rows["TrainJob/llm"]["gpus"] == {"nvidia.com/gpu": 4}
    assert rows["TrainJob/llm"]["templates"][0].startswith("gpu2dra-gpu-x4-")
    assert rows["TrainJob/llm"]["templates"][0].endswith(": 4 x gpu.nvidia.com")
    assert {k: w["warnings"] for k, w in rows.items() if w["warnings"]} == {}

    audit = mine[workloads["audit"]]
    assert audit["mode"] == "audit"
    rows = {f"{w['kind']}/{w['name']}": w for w in audit["workloads"]}
    assert sorted(rows) == ["Pod/mig", "StatefulSet/db"]
    assert rows["Pod/mig"]["templates"][0].endswith(
        ": 1 x mig.nvidia.com where device.attributes['gpu.nvidia.com'].profile == '1g.5gb'"
    )
    assert rows["StatefulSet/db"]["warnings"] == [
        "container 'main' sets or reads NVIDIA_VISIBLE_DEVICES; under DRA it is `void` and "
        "devices come through CDI"
    ]

    enabled = mine[workloads["enabled"]]
    assert enabled["mode"] == "enabled"
    assert [w["kind"] for w in enabled["workloads"]] == ["Deployment"]  # pods translated

    order = [n for n in report["rollout"] if n in workloads.values()]
    assert order == [workloads["clean"], workloads["audit"]]


def test_one_namespace_as_table_and_csv(
    control_plane: ControlPlane, workloads: dict[str, str]
) -> None:
    ns = workloads["audit"]
    table = gpu2dra(control_plane.kubeconfig, "report", "-n", ns, check=0).stdout
    lines = table.splitlines()
    assert lines[0].split() == [
        *("NAMESPACE", "MODE", "WORKLOAD", "GPUS", "PER", "POD", "SERVED", "BY", "PREEMPTS"),
        *("NODE", "WARNINGS"),
    ]
    plugin = ["device", "plugin", "-", "-"]
    assert lines[1].split() == [ns, "audit", "Pod/mig", "nvidia.com/mig-1g.5gb=1", *plugin, "0"]
    assert lines[3].split() == [
        *(ns, "audit", "StatefulSet/db", "nvidia.com/gpu=1", "x1", *plugin, "1")
    ]
    assert "    warning: container 'main' sets or reads NVIDIA_VISIBLE_DEVICES" in table
    assert f"  1. {ns} (audit, 2 workload(s), 1 warning(s))" in table
    assert workloads["clean"] not in table

    rows = list(
        csv.DictReader(
            io.StringIO(
                gpu2dra(control_plane.kubeconfig, "report", "-n", ns, "-o", "csv", check=0).stdout
            )
        )
    )
    assert [(r["kind"], r["name"], r["replicas"], r["gpus"]) for r in rows] == [
        ("Pod", "mig", "", "nvidia.com/mig-1g.5gb=1"),
        ("StatefulSet", "db", "1", "nvidia.com/gpu=1"),
    ]
    assert "NVIDIA_VISIBLE_DEVICES" in rows[1]["warnings"]


def test_namespace_defaults_to_the_kubeconfigs(
    control_plane: ControlPlane, workloads: dict[str, str], tmp_path: Path
) -> None:
    ns = workloads["audit"]
    kubeconfig = kubeconfig_for(control_plane, tmp_path / "kubeconfig", namespace=ns)
    report = json.loads(gpu2dra(kubeconfig, "report", "-o", "json", check=0).stdout)
    assert [n["name"] for n in report["namespaces"]] == [ns]
    # Without a namespace in the context: `default`, like kubectl.
    bare = json.loads(gpu2dra(control_plane.kubeconfig, "report", "-o", "json", check=0).stdout)
    assert bare["namespaces"] == []


def test_unknown_namespace_is_one_line(control_plane: ControlPlane) -> None:
    done = gpu2dra(control_plane.kubeconfig, "report", "-n", "no-such-ns", check=1)
    assert done.stderr == "gpu2dra: namespace no-such-ns not found\n"

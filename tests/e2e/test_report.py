"""`gpu2dra report` against the real control plane: workloads still asking for legacy GPUs,
found at the controller at the top, by namespace, with a rollout order."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from tests.e2e.controlplane import ControlPlane
from tests.e2e.fixtures import (
    create_namespace,
    delete_namespace,
    gpu_pod,
    label,
    wait_for,
    wait_for_default_service_account,
)
from tests.e2e.inspecting import gpu2dra
from tests.e2e.webhook import Webhook

Obj = dict[str, Any]
CRD = "trainjobs.e2e.gpu2dra.io"


def template(resources: Obj, **container: Any) -> Obj:
    return {
        "metadata": {"labels": {"app": "w"}},
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "cuda:12",
                    "resources": {"limits": resources},
                    **container,
                }
            ]
        },
    }


def train_job_crd() -> Obj:
    """A custom resource embedding a pod template, like Kubeflow's or Ray's."""
    loose = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": CRD},
        "spec": {
            "group": "e2e.gpu2dra.io",
            "scope": "Namespaced",
            "names": {"plural": "trainjobs", "singular": "trainjob", "kind": "TrainJob"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "properties": {
                                        "template": {
                                            **loose,
                                            "properties": {
                                                "spec": {
                                                    **loose,
                                                    "properties": {
                                                        "containers": {
                                                            "type": "array",
                                                            "items": loose,
                                                        }
                                                    },
                                                }
                                            },
                                        }
                                    },
                                }
                            },
                        }
                    },
                }
            ],
        },
    }


@pytest.fixture(scope="module")
def workloads(
    webhook: Webhook, api_client: client.ApiClient, control_plane: ControlPlane
) -> Iterator[dict[str, str]]:
    """Three namespaces: `clean` (no label) and `audit` hold legacy GPU workloads, `enabled`
    is migrated already."""
    spaces = {
        k: create_namespace(api_client, f"report-{k}-") for k in ("clean", "audit", "enabled")
    }
    control_plane.kubectl("apply", "-f", "-", stdin=train_job_crd())
    try:
        for ns in spaces.values():
            wait_for_default_service_account(api_client, ns)
        label(api_client, spaces["audit"], "audit")
        label(api_client, spaces["enabled"], "enabled")
        deployment = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "infer"},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "w"}},
                "template": template({"nvidia.com/gpu": 1}),
            },
        }
        control_plane.create(spaces["clean"], deployment)
        control_plane.create(spaces["enabled"], deployment)
        cron = {
            "apiVersion": "batch/v1",
            "kind": "CronJob",
            "metadata": {"name": "nightly"},
            "spec": {
                "schedule": "0 3 * * *",
                "jobTemplate": {
                    "spec": {
                        "template": {
                            **template({"nvidia.com/gpu": 2}),
                            "spec": {
                                **template({"nvidia.com/gpu": 2})["spec"],
                                "restartPolicy": "Never",
                            },
                        }
                    }
                },
            },
        }
        control_plane.create(spaces["clean"], cron)
        wait_for(
            lambda: (
                control_plane.kubectl(
                    "get", "crd", CRD, "-o", "jsonpath={.status.acceptedNames.kind}"
                )
                == "TrainJob"
            ),
            30,
            "the TrainJob CRD",
        )
        control_plane.create(
            spaces["clean"],
            {
                "apiVersion": "e2e.gpu2dra.io/v1",
                "kind": "TrainJob",
                "metadata": {"name": "llm"},
                "spec": {"template": template({"nvidia.com/gpu": 4})},
            },
        )
        sts = {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {"name": "db"},
            "spec": {
                "serviceName": "db",
                "replicas": 1,
                "selector": {"matchLabels": {"app": "w"}},
                "template": template(
                    {"nvidia.com/gpu": 1}, env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]
                ),
            },
        }
        control_plane.create(spaces["audit"], sts)
        control_plane.create(spaces["audit"], gpu_pod("mig", {"nvidia.com/mig-1g.5gb": 1}))
        core = client.CoreV1Api(api_client)
        wait_for(
            lambda: len(core.list_namespaced_pod(spaces["clean"]).items) == 2,
            60,
            "the Deployment's pods",
        )
        yield spaces
    finally:
        for ns in spaces.values():
            delete_namespace(api_client, ns)
        control_plane.kubectl("delete", "crd", CRD, "--ignore-not-found", "--wait=false")


def report_json(plane: ControlPlane, *args: str) -> Obj:
    return json.loads(gpu2dra(plane.kubeconfig, "report", "-o", "json", *args, check=0).stdout)  # type: ignore[no-any-return]


def test_every_workload_at_the_top(control_plane: ControlPlane, workloads: dict[str, str]) -> None:
    report = report_json(control_plane, "-A")
    mine = {n["name"]: n for n in report["namespaces"] if n["name"] in workloads.values()}
    clean = mine[workloads["clean"]]
    assert clean["mode"] == "disabled"
    rows = {f"{w['kind']}/{w['name']}": w for w in clean["workloads"]}
    # The Deployment's ReplicaSet and pods are the Deployment's: one row.
    assert sorted(rows) == ["CronJob/nightly", "Deployment/infer", "TrainJob/llm"]
    assert rows["Deployment/infer"]["replicas"] == 2
    assert rows["Deployment/infer"]["gpus"] == {"nvidia.com/gpu": 1}
    assert rows["CronJob/nightly"]["gpus"] == {"nvidia.com/gpu": 2}
    assert rows["TrainJob/llm"]["gpus"] == {"nvidia.com/gpu": 4}
    assert rows["TrainJob/llm"]["templates"][0].startswith("gpu2dra-gpu-x4-")
    assert rows["TrainJob/llm"]["templates"][0].endswith(": 4 x gpu.nvidia.com")
    assert all(not w["warnings"] for w in rows.values())

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
    assert lines[0].split() == ["NAMESPACE", "MODE", "WORKLOAD", "GPUS", "PER", "POD", "WARNINGS"]
    assert lines[1].split() == [ns, "audit", "Pod/mig", "nvidia.com/mig-1g.5gb=1", "0"]
    assert lines[3].split() == [ns, "audit", "StatefulSet/db", "nvidia.com/gpu=1", "x1", "1"]
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


def test_unknown_namespace_is_one_line(control_plane: ControlPlane) -> None:
    done = gpu2dra(control_plane.kubeconfig, "report", "-n", "no-such-ns", check=1)
    assert done.stderr == "gpu2dra: namespace no-such-ns not found\n"

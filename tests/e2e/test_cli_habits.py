"""kubectl's habits against the real control plane: --context picks the kubeconfig's context
and, through it, -n's default."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from tests.e2e.inspecting import gpu2dra
from tests.support.cluster import gpu_pod
from tests.support.controlplane import ControlPlane

DEAD = "https://127.0.0.1:1"  # nothing listens there


def two_contexts(plane: ControlPlane, path: Path, namespace: str) -> Path:
    """The admin kubeconfig as context `lab` (its namespace `namespace`), and a current
    context `gone` whose API server does not answer."""
    config = yaml.safe_load(plane.kubeconfig.read_text())
    [cluster], [context] = config["clusters"], config["contexts"]
    config["clusters"].append({"name": "gone", "cluster": {**cluster["cluster"], "server": DEAD}})
    config["contexts"] = [
        {"name": "lab", "context": {**context["context"], "namespace": namespace}},
        {"name": "gone", "context": {**context["context"], "cluster": "gone"}},
    ]
    config["current-context"] = "gone"
    path.write_text(yaml.safe_dump(config))
    return path


def test_the_context_chooses_the_cluster_and_the_namespace(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    control_plane.create(namespace, gpu_pod("train", {"nvidia.com/gpu": 2}))
    kubeconfig = two_contexts(control_plane, tmp_path / "config", namespace)
    done = gpu2dra(kubeconfig, "report", "--context", "lab", "-o", "json", check=0)
    report = json.loads(done.stdout)
    assert [n["name"] for n in report["namespaces"]] == [namespace]
    assert [w["name"] for w in report["namespaces"][0]["workloads"]] == ["train"]
    # Its current context is the one whose API server is gone.
    gone = gpu2dra(kubeconfig, "report", check=1)
    assert f"cannot reach the API server at {DEAD}" in gone.stderr
    missing = gpu2dra(kubeconfig, "doctor", "--context", "staging", check=1)
    assert missing.stderr.strip().endswith("has no context named 'staging'")


def test_tables_wide_without_headers_and_as_yaml(
    control_plane: ControlPlane, namespace: str
) -> None:
    control_plane.create(namespace, gpu_pod("train", {"nvidia.com/gpu": 2}))
    kubeconfig = control_plane.kubeconfig

    def report(*args: str) -> str:
        return gpu2dra(kubeconfig, "report", "-n", namespace, *args, check=0).stdout

    wide = report("-o", "wide").splitlines()
    assert wide[0].split()[-3:] == ["WARNINGS", "TRANSLATES", "CODES"]
    assert wide[1].split()[:3] == [namespace, "disabled", "Pod/train"]
    # The two columns say what -o json says of the workload (whether gpu2dra would translate
    # it depends on the DeviceClasses other tests left in this cluster).
    (space,) = json.loads(report("-o", "json"))["namespaces"]
    (train,) = space["workloads"]
    said = ["yes" if train["translates"] else "no", ",".join(train["codes"]) or "-"]
    assert wide[1].split()[-2:] == said
    bare = report("--no-headers").splitlines()
    assert bare[0].split()[:3] == [namespace, "disabled", "Pod/train"]
    assert bare == report().splitlines()[1:]
    assert yaml.safe_load(report("-o", "yaml")) == json.loads(report("-o", "json"))

    capacity = gpu2dra(kubeconfig, "capacity", check=0).stdout
    assert "\nCLASS " in capacity or "\n  none" in capacity
    headless = gpu2dra(kubeconfig, "capacity", "--no-headers", check=0).stdout
    assert "NAMESPACE  MODE" not in headless and "\nCLASS " not in headless
    assert "\nRESOURCE " not in headless

    pruned = gpu2dra(kubeconfig, "prune-templates", "-n", namespace, "-o", "yaml", check=0)
    assert yaml.safe_load(pruned.stdout) == {
        "namespace": namespace,
        "applied": False,
        "templates": [],
    }


def test_version_names_the_webhook_a_cluster_runs_and_never_fails(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    labels = {
        "app.kubernetes.io/name": "gpu2dra",
        "app.kubernetes.io/component": "webhook",
        "app.kubernetes.io/version": "9.8.7",
    }
    control_plane.create(
        namespace,
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "gpu2dra", "labels": labels},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "containers": [{"name": "webhook", "image": "registry.local/gpu2dra:9.8.7"}]
                    },
                },
            },
        },
    )
    said = gpu2dra(control_plane.kubeconfig, "version", check=0).stdout.splitlines()
    assert said[0].startswith("client: gpu2dra ")
    assert said[1].startswith("cluster: https://127.0.0.1:") and ", Kubernetes v1." in said[1]
    assert (
        f"webhook: {namespace}/gpu2dra: 9.8.7 (image registry.local/gpu2dra:9.8.7), 0/1 ready"
        in said
    )
    body = json.loads(gpu2dra(control_plane.kubeconfig, "version", "-o", "json", check=0).stdout)
    [mine] = [w for w in body["webhook"]["found"] if w["namespace"] == namespace]
    assert (mine["version"], mine["tag"], mine["replicas"]) == ("9.8.7", "9.8.7", 1)

    kubeconfig = two_contexts(control_plane, tmp_path / "config", namespace)
    gone = gpu2dra(kubeconfig, "version", check=0).stdout.splitlines()
    assert gone[1].startswith(f"cluster: not reached: cannot reach the API server at {DEAD}")
    assert gone[2] == "webhook: unknown (no cluster)"

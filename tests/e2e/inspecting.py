"""Shared by the doctor, explain and report scenarios: the real CLI, run as a user would."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from tests.support.cluster import wait_for
from tests.support.controlplane import REPO_ROOT, ControlPlane

Obj = dict[str, Any]
MODE = "gpu2dra.io/migration"


def gpu2dra(
    kubeconfig: Path, *args: str, check: int | None = None
) -> subprocess.CompletedProcess[str]:
    """`python -m app ARGS --kubeconfig ...`; `check`: the exit status it must end with."""
    done = subprocess.run(
        [sys.executable, "-m", "app", *args, "--kubeconfig", str(kubeconfig)],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        check=False,
        timeout=120,
    )
    assert "Traceback" not in done.stderr, done.stderr
    if check is not None:
        assert done.returncode == check, f"exit {done.returncode}: {done.stdout}{done.stderr}"
    return done


def explain(kubeconfig: Path, pod: str, namespace: str, *args: str) -> str:
    """`gpu2dra explain pod`'s text; it must exit 3 exactly when a step says FAIL."""
    done = gpu2dra(kubeconfig, "explain", "pod", pod, "-n", namespace, *args)
    failed = any(line.lstrip().startswith("FAIL ") for line in done.stdout.splitlines())
    expected = 3 if failed else 0
    assert done.returncode == expected, f"exit {done.returncode}: {done.stdout}{done.stderr}"
    return done.stdout


def doctor(plane: ControlPlane, *args: str) -> tuple[int, dict[str, Obj]]:
    """Exit status and checks by name of `gpu2dra doctor -o json`."""
    code, checks, _ = doctor_with_source(plane, *args)
    return code, checks


def doctor_with_source(plane: ControlPlane, *args: str) -> tuple[int, dict[str, Obj], str]:
    """... and where the policy it judged by came from."""
    done = gpu2dra(plane.kubeconfig, "doctor", "-o", "json", *args)
    assert done.returncode in (0, 1), done.stderr
    body = json.loads(done.stdout)
    assert body["ok"] == (done.returncode == 0)
    return done.returncode, {c["name"]: c for c in body["checks"]}, body["policy"]


def kubeconfig_for(
    plane: ControlPlane, path: Path, *, token: str = "", namespace: str = ""
) -> Path:
    """The admin kubeconfig with another user's `token` and/or a context `namespace`."""
    config = yaml.safe_load(plane.kubeconfig.read_text())
    if token:
        config["users"][0]["user"] = {"token": token}
    if namespace:
        config["contexts"][0]["context"]["namespace"] = namespace
    path.write_text(yaml.safe_dump(config))
    return path


def unschedulable(api: client.ApiClient, namespace: str, name: str) -> str:
    """Wait until the scheduler has tried the pod and given up; its message."""

    def judged() -> str | None:
        pod = client.CoreV1Api(api).read_namespaced_pod(name, namespace)
        for c in pod.status.conditions or []:
            if c.reason == "Unschedulable":
                return str(c.message)
        return None

    return wait_for(judged, 60, f"the scheduler to give up on {namespace}/{name}")


def pod_template(resources: Obj, **container: Any) -> Obj:
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


def train_job_crd(group: str) -> Obj:
    """A custom resource TrainJob embedding a pod template, like Kubeflow's or Ray's."""
    loose = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    containers = {"containers": {"type": "array", "items": loose}}
    template = {**loose, "properties": {"spec": {**loose, "properties": containers}}}
    spec = {"type": "object", "properties": {"template": template}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"trainjobs.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "trainjobs", "singular": "trainjob", "kind": "TrainJob"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": spec}}},
                }
            ],
        },
    }


def create_crd(plane: ControlPlane, crd: Obj) -> None:
    """Apply the CRD and wait until its kind is served."""
    name, kind = crd["metadata"]["name"], crd["spec"]["names"]["kind"]
    plane.kubectl("apply", "-f", "-", stdin=crd)
    wait_for(
        lambda: (
            plane.kubectl("get", "crd", name, "-o", "jsonpath={.status.acceptedNames.kind}") == kind
        ),
        30,
        f"the {kind} CRD",
    )


def train_job(name: str, group: str, gpus: int) -> Obj:
    return {
        "apiVersion": f"{group}/v1",
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {"template": pod_template({"nvidia.com/gpu": gpus})},
    }

"""The chart's ValidatingAdmissionPolicy for the skip annotation (skipAnnotation.allowedUsers)
on the real API server: only the identities listed may opt a pod, or a workload's pod
template, out of translation; the controllers that make pods from templates it checked may;
an update that keeps an annotation the object had is no new opt-out."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from tests.support.cluster import gpu_pod
from tests.support.controlplane import ControlPlane
from tests.support.webhook import render_chart

Obj = dict[str, Any]
pytestmark = pytest.mark.every_release
SKIP = {"gpu2dra.io/skip": "true"}
ALLOWED, OTHER = "platform-bot", "alice"
DENIED = "only the identities in gpu2dra's skipAnnotation.allowedUsers may set it"


@pytest.fixture(scope="module")
def policy(control_plane: ControlPlane, api_client: client.ApiClient) -> Iterator[None]:
    """The chart's policy and binding, applied alone (nothing else of the chart is needed)."""
    docs = render_chart(control_plane.helm, f"skipAnnotation.allowedUsers={{{ALLOWED}}}")
    kinds = ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
    mine = [d for d in docs if d["kind"] in kinds]
    assert [d["kind"] for d in mine] == list(kinds)
    for doc in mine:
        control_plane.kubectl("apply", "-f", "-", stdin=doc)
    yield
    for doc in reversed(mine):
        control_plane.kubectl("delete", doc["kind"], doc["metadata"]["name"])


@pytest.fixture
def editors(control_plane: ControlPlane, namespace: str) -> str:
    """Both users may edit the namespace (the built-in `edit` role)."""
    for user in (ALLOWED, OTHER):
        control_plane.kubectl(
            "create", "rolebinding", f"edit-{user}", "-n", namespace, "--clusterrole=edit",
            f"--user={user}",
        )  # fmt: skip
    return namespace


def create(plane: ControlPlane, user: str, namespace: str, obj: Obj) -> tuple[int, str]:
    done = plane.run_kubectl("create", "--as", user, "-n", namespace, "-f", "-", stdin=obj)
    return done.returncode, done.stderr


def skipped_pod(name: str, annotations: dict[str, str] | None = SKIP) -> Obj:
    pod = gpu_pod(name, {"nvidia.com/gpu": 1})
    if annotations:
        pod["metadata"]["annotations"] = annotations
    return pod


def deployment(name: str, annotations: dict[str, str] | None) -> Obj:
    labels = {"app": name}
    meta: Obj = {"labels": labels, **({"annotations": annotations} if annotations else {})}
    pod = skipped_pod(name, None)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": labels},
            "template": {"metadata": meta, "spec": pod["spec"]},
        },
    }


def cronjob(name: str, annotations: dict[str, str] | None) -> Obj:
    template: Obj = {"spec": {**skipped_pod(name, None)["spec"], "restartPolicy": "Never"}}
    if annotations:
        template["metadata"] = {"annotations": annotations}
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": name},
        "spec": {"schedule": "0 0 1 1 *", "jobTemplate": {"spec": {"template": template}}},
    }


def wait_enforced(plane: ControlPlane, namespace: str) -> None:
    """The API server enforces a new policy once its informer has it."""
    deadline = time.monotonic() + 30
    while True:
        code, err = create(plane, OTHER, namespace, skipped_pod("probe"))
        if code != 0 and DENIED in err:
            return
        if code == 0:
            plane.kubectl("delete", "pod", "probe", "-n", namespace, "--wait=false")
        assert time.monotonic() < deadline, f"the policy was never enforced: {err}"
        time.sleep(0.5)


@pytest.mark.usefixtures("policy")
def test_only_listed_users_opt_pods_and_workloads_out(
    control_plane: ControlPlane, api_client: client.ApiClient, editors: str
) -> None:
    ns = editors
    wait_enforced(control_plane, ns)
    code, err = create(control_plane, OTHER, ns, skipped_pod("mine"))
    assert code != 0 and DENIED in err and "Forbidden" in err, err
    assert create(control_plane, OTHER, ns, skipped_pod("plain", None))[0] == 0
    assert create(control_plane, ALLOWED, ns, skipped_pod("theirs"))[0] == 0

    code, err = create(control_plane, OTHER, ns, deployment("web", SKIP))
    assert code != 0 and DENIED in err, err
    code, err = create(control_plane, OTHER, ns, cronjob("nightly", SKIP))
    assert code != 0 and DENIED in err, err
    # A template without metadata at all is no opt-out, and no error of the policy.
    assert create(control_plane, OTHER, ns, cronjob("bare", None)) == (0, "")

    # The allowed user's Deployment: the ReplicaSet and its pods are made by kube-system's
    # controllers; another user's update that keeps the annotation is allowed.
    assert create(control_plane, ALLOWED, ns, deployment("batch", SKIP))[0] == 0
    core = client.CoreV1Api(api_client)
    deadline = time.monotonic() + 60
    while len(core.list_namespaced_pod(ns, label_selector="app=batch").items) < 2:
        assert time.monotonic() < deadline, "the controllers made no pods of the Deployment"
        time.sleep(0.5)
    scaled = control_plane.run_kubectl(
        "scale", "deployment", "batch", "--replicas=1", "--as", OTHER, "-n", ns
    )
    assert scaled.returncode == 0, scaled.stderr
    relabel = control_plane.run_kubectl(
        "label", "deployment", "batch", "team=b", "--as", OTHER, "-n", ns
    )
    assert relabel.returncode == 0, relabel.stderr

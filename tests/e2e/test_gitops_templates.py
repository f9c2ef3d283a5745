"""`gpu2dra translate` output applied by someone who is not gpu2dra, as Argo CD, Flux or a
person applies a GitOps repository: with the real kubectl and API server, /validate lets
gpu2dra's own content in (content-addressed: exactly what gpu2dra writes under that name),
again on every sync, and still refuses anything else under gpu2dra's name."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from typing import Any

import pytest
from kubernetes import client

from tests.support.cluster import gpu_pod, read_pod
from tests.support.controlplane import REPO_ROOT, ControlPlane
from tests.support.webhook import Webhook

Obj = dict[str, Any]
pytestmark = pytest.mark.every_release
AS_ARGOCD = (
    "--as=system:serviceaccount:argocd:argocd-application-controller",
    "--as-group=system:masters",
)


def translate(namespace: str, *docs: Obj) -> str:
    """`gpu2dra translate -o json` of `docs`: a List kubectl applies."""
    done = subprocess.run(
        [sys.executable, "-m", "app", "translate", "-n", namespace, "-o", "json"],
        input="---\n".join(json.dumps(d) for d in docs),
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO_ROOT,
    )
    return done.stdout


def test_translated_output_applies_as_another_identity_and_reapplies(
    webhook: Webhook,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
) -> None:
    webhook.set_mode(api_client, namespace, "enabled")
    listed = translate(namespace, gpu_pod("train", {"nvidia.com/gpu": 2}))
    items = json.loads(listed)["items"]
    assert [i["kind"] for i in items] == ["ResourceClaimTemplate", "Pod"]
    name = items[0]["metadata"]["name"]
    for _ in range(2):  # every sync applies it again: an UPDATE of the template
        control_plane.kubectl(*AS_ARGOCD, "apply", "-n", namespace, "-f", "-", stdin=listed)
    stored = client.ResourceV1Api(api_client).read_namespaced_resource_claim_template(
        name, namespace
    )
    assert stored.metadata.labels["app.kubernetes.io/managed-by"] == "gpu2dra"
    pod = read_pod(api_client, namespace, "train")
    assert pod["spec"]["resourceClaims"][0]["resourceClaimTemplateName"] == name


def test_anything_else_under_gpu2dras_name_is_still_refused_to_another_identity(
    webhook: Webhook,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
) -> None:
    webhook.set_mode(api_client, namespace, "enabled")
    listed = json.loads(translate(namespace, gpu_pod("train", {"nvidia.com/gpu": 1})))
    squat = copy.deepcopy(listed["items"][0])  # the template, written first
    squat["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] = 3
    done = control_plane.run_kubectl(*AS_ARGOCD, "apply", "-n", namespace, "-f", "-", stdin=squat)
    assert done.returncode != 0
    assert "not exactly what gpu2dra writes under that name" in done.stderr, done.stderr
    assert "claimTemplates.extraWriters" in done.stderr

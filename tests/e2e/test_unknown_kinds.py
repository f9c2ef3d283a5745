"""A kind no rule knows, on the newest release: `gpu2dra translate` leaves it whole and says
that its pods are translated at admission, and the pod such a controller creates is translated
by the webhook when the API server stores it (docs/concepts/workloads.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import yaml
from kubernetes import client

from tests.support.cluster import add_gpu_node, gpu_pod, templates_in
from tests.support.controlplane import REPO_ROOT, ControlPlane
from tests.support.webhook import Webhook

Obj = dict[str, Any]


def clone_set() -> Obj:
    """An OpenKruise CloneSet: a controller gpu2dra has no rule for."""
    labels = {"app": "infer"}
    return {
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "CloneSet",
        "metadata": {"name": "infer"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": gpu_pod("x", {"nvidia.com/gpu": 1})["spec"],
            },
        },
    }


def test_an_unknown_kind_is_left_whole_and_its_pods_are_translated_at_admission(
    webhook: Webhook,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    gpu_nodes: list[str],
) -> None:
    doc = clone_set()
    done = subprocess.run(
        [sys.executable, "-m", "app", "translate", "-f", "-", "-n", namespace],
        input=json.dumps(doc),
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO_ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert list(yaml.safe_load_all(done.stdout)) == [doc]  # left whole, and no templates
    (warning,) = [line for line in done.stderr.splitlines() if line.startswith("warning: ")]
    assert "apps.kruise.io/CloneSet is a kind gpu2dra has no rule for: left as is" in warning
    assert "(pod templates asking for GPUs: spec.template)" in warning
    assert "translated at admission" in warning

    # The pod the CloneSet's controller would create from that template, as it creates it.
    add_gpu_node(api_client, gpu_nodes, gpus=2)
    webhook.set_mode(api_client, namespace, "enabled")
    template = doc["spec"]["template"]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "infer-abcde", "labels": template["metadata"]["labels"]},
        "spec": template["spec"],
    }
    stored, warnings = control_plane.create(namespace, pod)
    assert warnings == ""
    container = stored["spec"]["containers"][0]
    assert "limits" not in container["resources"]
    assert container["resources"]["claims"] == [{"name": "main-gpu"}]
    (claim,) = stored["spec"]["resourceClaims"]
    (made,) = templates_in(api_client, namespace)
    assert claim["resourceClaimTemplateName"] == made["metadata"]["name"]

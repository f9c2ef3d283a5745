"""Applying a translated bare pod's manifest again, with the real kubectl: client-side and
server-side apply both leave the pod as it is, where the API server alone would refuse the
update (a pod spec is immutable, and the manifest asks for `nvidia.com/gpu` again)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client

from app.core.patch import RECORD_ANNOTATION as RECORD
from tests.support.cluster import gpu_pod, read_pod
from tests.support.controlplane import ControlPlane
from tests.support.webhook import Webhook

Obj = dict[str, Any]

pytestmark = pytest.mark.every_release
APPLY = {"client-side": ("apply",), "server-side": ("apply", "--server-side")}


def manifest() -> Obj:
    """A bare pod asking for two GPUs of one product, as a GitOps repository holds it."""
    pod = gpu_pod("train", {"nvidia.com/gpu": 2, "cpu": "1"})
    pod["spec"]["nodeSelector"] = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"}
    return pod


def mutate_requests(webhook: Webhook) -> float:
    return webhook.metric("gpu2dra_requests_total", endpoint="mutate")


@pytest.mark.parametrize("how", APPLY)
def test_reapplying_a_translated_pod_changes_nothing(
    how: str,
    webhook: Webhook,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
) -> None:
    webhook.set_mode(api_client, namespace, "enabled")
    apply = (*APPLY[how], "-n", namespace, "-f", "-")
    control_plane.kubectl(*apply, stdin=manifest())
    live = read_pod(api_client, namespace, "train")
    assert "nvidia.com/gpu" not in json.dumps(live["spec"]), "translated on create"
    assert json.loads(live["metadata"]["annotations"][RECORD])["/spec/nodeSelector"] == {
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"
    }
    before = webhook.metric("gpu2dra_requests_total", endpoint="mutate", result="reapplied")

    for _ in range(2):  # a GitOps tool syncs again and again
        control_plane.kubectl(*apply, stdin=manifest())
        again = read_pod(api_client, namespace, "train")
        assert again["spec"] == live["spec"]
        assert again["metadata"]["annotations"] == live["metadata"]["annotations"]
        # the spec was not written again (the scheduler's status updates do bump the version)
        assert again["metadata"].get("generation") == live["metadata"].get("generation")
    after = webhook.metric("gpu2dra_requests_total", endpoint="mutate", result="reapplied")
    assert after - before == 2, "each re-apply reached gpu2dra and was patched back"


def test_without_the_record_the_api_server_refuses_the_reapply(
    webhook: Webhook,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
) -> None:
    # What gpu2dra's UPDATE path saves a pod from: the record removed by hand, a re-apply
    # is not sent to gpu2dra (matchConditions) and the API server refuses it.
    webhook.set_mode(api_client, namespace, "enabled")
    apply = ("apply", "-n", namespace, "-f", "-")
    control_plane.kubectl(*apply, stdin=manifest())
    control_plane.kubectl("annotate", "-n", namespace, "pod", "train", f"{RECORD}-")
    done = control_plane.run_kubectl(*apply, stdin=manifest())
    assert done.returncode != 0
    assert "pod updates may not change fields" in done.stderr


def test_other_updates_of_a_translated_pod_never_reach_gpu2dra(
    webhook: Webhook,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
) -> None:
    webhook.set_mode(api_client, namespace, "enabled")
    control_plane.kubectl("apply", "-n", namespace, "-f", "-", stdin=manifest())
    before = mutate_requests(webhook)
    control_plane.kubectl("label", "-n", namespace, "pod", "train", "team=ml")
    control_plane.kubectl("annotate", "-n", namespace, "pod", "train", "owner=ml")
    assert read_pod(api_client, namespace, "train")["metadata"]["labels"] == {"team": "ml"}
    assert mutate_requests(webhook) == before, "matchConditions keep routine updates away"

"""Faults against the real control plane: an API server that is unreachable, hangs or
restarts; concurrent creates; templates deleted behind gpu2dra's back; rolling restarts
(test_faults_rolling.py)."""

from __future__ import annotations

import base64
import json
import signal
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from tests.e2e.probes import metric, review
from tests.support.cluster import (
    gpu_pod,
    label,
    pod_resource_claims,
    read_pod,
    templates_in,
    wait_for,
)
from tests.support.controlplane import ControlPlane
from tests.support.webhook import Webhook

Obj = dict[str, Any]


def test_unreachable_api_server_at_start(control_plane: ControlPlane, tmp_path: Path) -> None:
    kubeconfig = yaml.safe_load(control_plane.kubeconfig.read_text())
    kubeconfig["clusters"][0]["cluster"]["server"] = "https://127.0.0.1:9"  # nothing listens
    dead = tmp_path / "dead.kubeconfig"
    dead.write_text(yaml.safe_dump(kubeconfig))
    hook = Webhook(tmp_path, dead, control_plane.helm)
    hook.start("--api-timeout", "1", wait_for="/healthz")
    try:
        assert hook.get("/readyz")[0] == 503, "not ready before the caches have synced"
        started = time.monotonic()
        status, answer = hook.post("/mutate", review("ml", gpu_pod("p", {"nvidia.com/gpu": 1})))
        assert time.monotonic() - started < 3
        assert status == 200
        response = answer["response"]
        assert response["allowed"] is True and "patch" not in response
        assert response["warnings"] == [
            "gpu2dra has not synced its caches yet; pod admitted unchanged"
        ]
        assert hook.get("/healthz")[0] == 200, "alive all along"
    finally:
        assert hook.stop() == 0


def test_hanging_api_server_mid_run(
    webhook: Webhook, api_client: client.ApiClient, control_plane: ControlPlane, namespace: str
) -> None:
    webhook.set_mode(api_client, namespace, "enabled")
    # A request shape whose template does not exist yet: answering needs the API server.
    pod = gpu_pod("p", {"nvidia.com/gpu": 7})
    apiserver = control_plane.process("kube-apiserver")
    apiserver.send_signal(signal.SIGSTOP)
    try:
        started = time.monotonic()
        status, answer = webhook.post("/mutate", review(namespace, pod))
        took = time.monotonic() - started
    finally:
        apiserver.send_signal(signal.SIGCONT)
    print(f"/mutate on a hanging API server answered in {took * 1000:.0f} ms")
    # The defaults: --api-timeout 2 bounds the create, --deadline 3 the answer.
    assert status == 200 and took < 3.5, f"answered in {took:.1f}s"
    response = answer["response"]
    assert response["allowed"] is True and "patch" not in response
    assert response["warnings"][0].startswith("gpu2dra could not create ResourceClaimTemplates")
    assert response["warnings"][0].endswith("pod admitted unchanged")
    # Once the API server answers again, so does translation.
    stored, _ = control_plane.create(namespace, gpu_pod("after", {"nvidia.com/gpu": 7}))
    assert stored["spec"]["resourceClaims"][0]["name"] == "main-gpu"


def test_caches_recover_after_api_server_restart(
    webhook: Webhook, api_client: client.ApiClient, control_plane: ControlPlane, namespace: str
) -> None:
    relists = metric(webhook, 'gpu2dra_cache_relists_total{cache="namespaces"}')
    control_plane.restart_apiserver()
    label(api_client, namespace, "enabled")  # a change the namespace watch must see

    def translated() -> bool:
        stored, _ = control_plane.create(
            namespace, gpu_pod(f"p{uuid.uuid4().hex[:5]}", {"nvidia.com/gpu": 1})
        )
        return "resourceClaims" in stored["spec"]

    wait_for(translated, 60, "translation after the API server restarted")
    assert metric(webhook, 'gpu2dra_cache_relists_total{cache="namespaces"}') > relists
    assert webhook.get("/readyz")[0] == 200


def test_fifty_concurrent_creates_share_one_new_template(
    webhook: Webhook, api_client: client.ApiClient, namespace: str
) -> None:
    webhook.set_mode(api_client, namespace, "enabled")
    core = client.CoreV1Api(api_client)

    def create_pod(i: int) -> Obj:
        body = client.V1Pod.model_validate(gpu_pod(f"p{i}", {"nvidia.com/gpu": "3"}))
        return api_client.sanitize_for_serialization(core.create_namespaced_pod(namespace, body))  # type: ignore[no-any-return]

    with ThreadPoolExecutor(50) as pool:
        pods = list(pool.map(create_pod, range(50)))
    (template,) = templates_in(api_client, namespace)
    for pod in pods:
        (claim,) = pod["spec"]["resourceClaims"]
        assert claim["resourceClaimTemplateName"] == template["metadata"]["name"]
    assert metric(webhook, 'gpu2dra_requests_total{endpoint="mutate",result="denied"}') == 0


def test_template_deleted_behind_our_back_is_recreated(
    webhook: Webhook, api_client: client.ApiClient, control_plane: ControlPlane, namespace: str
) -> None:
    webhook.set_mode(api_client, namespace, "enabled")
    control_plane.create(namespace, gpu_pod("first", {"nvidia.com/gpu": 5}))
    (template,) = templates_in(api_client, namespace)
    name = template["metadata"]["name"]
    # The cache counts templates of every namespace: let earlier tests' namespaces finish
    # going, so that the count drops for this deletion only.
    wait_for(lambda: not _terminating(api_client), 120, "earlier namespaces to be deleted")
    cached = 'gpu2dra_cache_objects{cache="resourceclaimtemplates"}'
    before = metric(webhook, cached)
    client.CustomObjectsApi(api_client).delete_namespaced_custom_object(
        "resource.k8s.io", "v1", namespace, "resourceclaimtemplates", name
    )
    wait_for(lambda: metric(webhook, cached) == before - 1, 30, "the cache to see the deletion")

    control_plane.create(namespace, gpu_pod("second", {"nvidia.com/gpu": 5}))
    assert [t["metadata"]["name"] for t in templates_in(api_client, namespace)] == [name]
    wait_for(
        lambda: pod_resource_claims(api_client, read_pod(api_client, namespace, "second")),
        60,
        "the controller to create the pod's claim from the template",
    )


def _terminating(api: client.ApiClient) -> list[str]:
    namespaces = client.CoreV1Api(api).list_namespace().items
    return [n.metadata.name for n in namespaces if n.status.phase == "Terminating"]


def test_patches_decode(webhook: Webhook, namespace: str) -> None:
    # The direct-post helper sees the same answer the API server does.
    status, answer = webhook.post("/mutate", review(namespace, gpu_pod("p", {"nvidia.com/gpu": 1})))
    assert status == 200
    assert "patch" not in answer["response"] or json.loads(
        base64.b64decode(answer["response"]["patch"])
    )

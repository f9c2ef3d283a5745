"""A fault of gpu2dra's own, on the real control plane: an exception while deciding /mutate or
/validate fails the call (HTTP 500), so the API server applies the registration's
failurePolicy. Under the chart's default `Ignore` the object is stored as it was sent; under
`Fail` its create is refused. A 200 with `allowed: false` would refuse it under both.

The served gpu2dra raises for objects labelled `gpu2dra-test/fault: raise`
(tests/e2e/faulty_serve.py) and decides every other object as it always does."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any, Literal

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.e2e.faulty_serve import FAULT_LABEL
from tests.support.cluster import create_nvidia_device_classes, gpu_pod, wait_for
from tests.support.controlplane import ControlPlane
from tests.support.webhook import Webhook, register, unregister

Obj = dict[str, Any]
FAULT = {FAULT_LABEL: "raise"}
FailurePolicy = Literal["Ignore", "Fail"]


@pytest.fixture(scope="module")
def faulty(
    control_plane: ControlPlane,
    api_client: client.ApiClient,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Webhook]:
    """gpu2dra with a bug planted, serving; each test registers it with its failurePolicy."""
    create_nvidia_device_classes(api_client)
    webhook = Webhook(
        tmp_path_factory.mktemp("gpu2dra-faulty"), control_plane.kubeconfig, control_plane.helm
    )
    webhook.start(module="tests.e2e.faulty_serve")
    try:
        yield webhook
    finally:
        unregister(api_client)
        assert webhook.stop() in (0, None)


def pod(name: str, labels: dict[str, str] | None = None) -> Obj:
    made = gpu_pod(name, {"nvidia.com/gpu": "1"})
    made["metadata"]["labels"] = labels or {}
    return made


def template(name: str) -> Obj:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "labels": FAULT},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]
                }
            }
        },
    }


def create_pod(api: client.ApiClient, namespace: str, body: Obj, *, dry_run: bool = False) -> Obj:
    created = client.CoreV1Api(api).create_namespaced_pod(
        namespace, client.V1Pod.model_validate(body), dry_run="All" if dry_run else None
    )
    return api.sanitize_for_serialization(created)  # type: ignore[no-any-return]


def create_template(api: client.ApiClient, namespace: str, body: Obj) -> Obj:
    created: Obj = client.CustomObjectsApi(api).create_namespaced_custom_object(
        "resource.k8s.io", "v1", namespace, "resourceclaimtemplates", body
    )
    return created


def errors(hook: Webhook, endpoint: str) -> float:
    return hook.metric("gpu2dra_requests_total", endpoint=endpoint, result="error")


def register_failing(
    api: client.ApiClient, hook: Webhook, namespace: str, failure_policy: FailurePolicy
) -> None:
    """Register both webhook configurations with `failure_policy` and wait until the API
    server applies it: a faulty pod's dry run is refused under Fail, and under Ignore passes
    through gpu2dra (its error count rises) and is admitted."""
    register(
        api,
        hook.rendered(
            f"webhook.mutating.failurePolicy={failure_policy}",
            f"webhook.validating.failurePolicy={failure_policy}",
        ),
    )
    hook.set_mode(api, namespace, "enabled")

    def applied() -> bool:
        before = errors(hook, "mutate")
        try:
            create_pod(api, namespace, pod("probe", FAULT), dry_run=True)
        except ApiException:
            return failure_policy == "Fail"
        return failure_policy == "Ignore" and errors(hook, "mutate") > before

    wait_for(applied, 30, f"the API server to call gpu2dra with failurePolicy {failure_policy}")


def assert_translated(api: client.ApiClient, namespace: str) -> None:
    """A pod without the label, in the same namespace, is translated as ever."""
    stored = create_pod(api, namespace, pod("plain"))
    assert stored["spec"]["resourceClaims"][0]["name"] == "main-gpu"
    assert "nvidia.com/gpu" not in stored["spec"]["containers"][0]["resources"].get("limits", {})


def failures(hook: Webhook, endpoint: str) -> dict[str, str]:
    """gpu2dra's log of its faults at `endpoint`: the request's uid to the traceback."""
    lines = hook.log.read_text().splitlines()
    entries = [json.loads(line) for line in lines if line.startswith("{")]
    return {e["uid"]: e["error"] for e in entries if e["msg"] == f"{endpoint} failed"}


def refusal(err: ApiException, webhook: str) -> str:
    """The uid gpu2dra answered with, from the API server's refusal for failurePolicy Fail."""
    assert err.status == 500, err.body
    message = json.loads(err.body)["message"]
    said = re.fullmatch(
        f'Internal error occurred: failed calling webhook "{re.escape(webhook)}": failed to '
        r'call webhook: an error on the server \("gpu2dra internal error \(uid ([0-9a-f-]+)\)"\) '
        "has prevented the request from succeeding",
        message,
    )
    assert said, message
    return said[1]


def test_a_fault_under_ignore_admits_the_object_untouched(
    faulty: Webhook, api_client: client.ApiClient, namespace: str
) -> None:
    register_failing(api_client, faulty, namespace, "Ignore")
    mutate_errors, validate_errors = errors(faulty, "mutate"), errors(faulty, "validate")

    stored = create_pod(api_client, namespace, pod("faulty", FAULT))
    assert "resourceClaims" not in stored["spec"]
    assert stored["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    assert errors(faulty, "mutate") == mutate_errors + 1, "gpu2dra was called, and failed"

    created = create_template(api_client, namespace, template("faulty"))
    assert created["metadata"]["name"] == "faulty"
    assert errors(faulty, "validate") == validate_errors + 1
    assert "planted fault in /validate" in "".join(failures(faulty, "validate").values())

    assert_translated(api_client, namespace)


def test_a_fault_under_fail_refuses_the_create(
    faulty: Webhook, api_client: client.ApiClient, namespace: str
) -> None:
    register_failing(api_client, faulty, namespace, "Fail")
    mutate_errors, validate_errors = errors(faulty, "mutate"), errors(faulty, "validate")

    with pytest.raises(ApiException) as refused:
        create_pod(api_client, namespace, pod("faulty", FAULT))
    uid = refusal(refused.value, "pods.mutate.gpu2dra.io")
    assert "planted fault in /mutate" in failures(faulty, "mutate")[uid]
    assert errors(faulty, "mutate") == mutate_errors + 1

    with pytest.raises(ApiException) as refused:
        create_template(api_client, namespace, template("faulty"))
    uid = refusal(refused.value, "claims.validate.gpu2dra.io")
    assert "planted fault in /validate" in failures(faulty, "validate")[uid]
    assert errors(faulty, "validate") == validate_errors + 1

    assert_translated(api_client, namespace)

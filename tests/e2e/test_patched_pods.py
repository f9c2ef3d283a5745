"""Every patch gpu2dra answers, applied to its pod, judged by the real API server.

The pod and its patched form are both created with a server-side dry run and strict field
validation: a pod the API server accepts must still be accepted once patched, and one it
refuses must still be refused (gpu2dra neither breaks a pod nor quietly repairs one). The
pods are the bad-input corpus's and random ones; the fuzz tests check the same rule against
the strict schemas, this checks it against Kubernetes' own validation, on every release
tests/k8s builds (the oldest and the newest)."""

from __future__ import annotations

import base64
from collections.abc import Coroutine
from typing import Any

import jsonpatch
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from kubernetes import client

from app.core.patch import RECORD_ANNOTATION
from app.core.policy import load_policy
from app.webhook.cluster import OfflineCluster
from app.webhook.mutate import Mutator
from app.webhook.reviews import ReviewError, parse_review
from tests.support.corpus import CORPUS_POLICY, corpus, outcome_of
from tests.support.reviews import pod_review
from tests.support.strategies import plausible_pod_specs, pod_specs

Obj = dict[str, Any]
POLICY = load_policy(CORPUS_POLICY)  # migration enabled everywhere
CLUSTER = OfflineCluster(POLICY)
RECORD_POINTER = "/metadata/annotations/" + RECORD_ANNOTATION.replace("/", "~1")
MUTATOR = Mutator(POLICY)

pytestmark = pytest.mark.every_release
RANDOM = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def patched_spec(body: bytes) -> tuple[Obj, Obj] | None:
    """The pod's spec and its patched form, when gpu2dra patches the review."""
    try:
        request = parse_review(body)
    except ReviewError:
        return None
    verdict = MUTATOR(request, CLUSTER)
    assert not isinstance(verdict, Coroutine)  # offline: templates are not created
    answer = verdict.response
    if "patch" not in answer:
        return None
    pod = request["object"]
    assert pod is not None
    ops = orjson.loads(base64.b64decode(answer["patch"]))
    # the spec's subtrees, and the record of what they held unless the pod has no metadata
    # map to hold it (a pod with the record is created in test_reapply.py)
    others = [op["path"] for op in ops if not op["path"].startswith("/spec/")]
    assert others in ([], ["/metadata/annotations"], [RECORD_POINTER]), ops
    return pod["spec"], jsonpatch.apply_patch(pod, ops, in_place=False)["spec"]


def verdict(api: client.ApiClient, namespace: str, spec: Any) -> str:
    """'' when the API server would create a pod with this spec, else its reason. The body
    goes as it is: the typed client would refuse what the API server is to judge."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}
    request = api.param_serialize(
        "POST",
        "/api/v1/namespaces/{namespace}/pods",
        path_params={"namespace": namespace},
        query_params=[("dryRun", "All"), ("fieldValidation", "Strict")],
        header_params={"Content-Type": "application/json", "Accept": "application/json"},
        body=pod,
        auth_settings=["BearerToken"],
    )
    response = api.call_api(*request)
    response.read()
    if response.status == 201:
        return ""
    assert response.status in (400, 422), (response.status, response.data)
    return str(orjson.loads(response.data).get("message"))


def check(api: client.ApiClient, namespace: str, body: bytes) -> bool:
    """The rule for one review; False when gpu2dra does not patch it."""
    specs = patched_spec(body)
    if specs is None:
        return False
    before = verdict(api, namespace, specs[0])
    if "unknown field" in before:
        return True  # refused before admission; the webhook never sees such a pod
    after = verdict(api, namespace, specs[1])
    if not before:
        assert not after, f"the patch breaks an accepted pod: {after}\n{specs[1]}"
    else:
        assert after, f"the patch repairs a refused pod ({before})\n{specs[0]}"
    return True


def test_corpus_patches(api_client: client.ApiClient, namespace: str) -> None:
    patched = [p for p in corpus("mutate") if outcome_of(p) == "patched"]
    assert len(patched) >= 10
    for path in patched:
        assert check(api_client, namespace, path.read_bytes()), path.name


@RANDOM
@given(spec=plausible_pod_specs())
def test_plausible_pods(api_client: client.ApiClient, namespace: str, spec: Obj) -> None:
    check(api_client, namespace, pod_review(spec, "plausible"))


@RANDOM
@given(spec=pod_specs)
def test_random_pods(api_client: client.ApiClient, namespace: str, spec: Obj) -> None:
    check(api_client, namespace, pod_review(spec, "random"))


@pytest.mark.parametrize("count", [1, 3])
def test_an_accepted_pod_stays_accepted(
    api_client: client.ApiClient, namespace: str, count: int
) -> None:
    """The rule can fail: a plain GPU pod is accepted and patched."""
    spec = {
        "containers": [
            {"name": "a", "image": "x", "resources": {"limits": {"nvidia.com/gpu": count}}}
        ]
    }
    specs = patched_spec(pod_review(spec, "plain"))
    assert specs is not None
    assert verdict(api_client, namespace, specs[0]) == ""
    assert verdict(api_client, namespace, specs[1]) == ""
    broken = {**specs[1], "resourceClaims": specs[1]["resourceClaims"] * 2}
    assert "Duplicate value" in verdict(api_client, namespace, broken)

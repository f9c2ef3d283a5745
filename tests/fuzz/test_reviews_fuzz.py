"""Malformed AdmissionReviews on /mutate and /validate: the corpus, then hypothesis.

Each answer must be a one-line 400 or a verdict that is not a 500 (tests/fuzz/answers.py),
and each patch must leave the pod with no error it did not have.
"""

from __future__ import annotations

import contextlib
import copy
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.catalog import Catalog
from app.core.policy import DEFAULT_POLICY_YAML, Policy, load_policy, parse_policy
from app.webhook.application import create_app
from app.webhook.settings import Settings
from tests.fuzz.answers import Answer, check_answer, check_patch, pod_of, uid_of
from tests.fuzz.big_pods import BIG_PODS
from tests.fuzz.strategies import FUZZ
from tests.support.corpus import CORPUS_POLICY, corpus, outcome_of
from tests.support.fake import FakeCluster
from tests.support.reviews import encode, pod_review
from tests.support.strategies import json_values, junk, plausible_pod_specs, pod_specs

Obj = dict[str, Any]


def post(client: TestClient, path: str, body: bytes, uid: Any = None) -> Answer:
    response = client.post(path, content=body)
    return check_answer(response.status_code, response.content, uid)


def check_mutation(answer: Answer, body: bytes) -> None:
    """A patch, if any, applies to the pod as sent and adds no error."""
    if answer.verdict is not None and "patch" in answer.verdict:
        pod = pod_of(body)
        assert pod is not None
        check_patch(pod, answer.ops)


# ---- the servers under test --------------------------------------------------------------
# One app per setup, started once: hypothesis runs each example against a live app.


def policy(**changes: Any) -> Policy:
    raw = yaml.safe_load(DEFAULT_POLICY_YAML)
    return parse_policy({**raw, **changes})


DEFAULT_POLICY = load_policy(None)
ML = {"ml": {"gpu2dra.io/migration": "enabled"}}
SETUPS: dict[str, tuple[Policy, FakeCluster]] = {
    "corpus": (load_policy(CORPUS_POLICY), FakeCluster()),  # the served process's view
    "enabled": (DEFAULT_POLICY, FakeCluster(labels=ML)),
    "keep-node-selectors": (policy(keepNodeSelectors=True), FakeCluster(labels=ML)),
    "shared-mapped": (
        policy(
            mappings={
                **yaml.safe_load(DEFAULT_POLICY_YAML)["mappings"],
                "nvidia.com/gpu.shared": {"deviceClassName": "gpu.nvidia.com"},
            }
        ),
        FakeCluster(labels=ML),
    ),
    "no-mig-class": (DEFAULT_POLICY, FakeCluster(Catalog.of(["gpu.nvidia.com"]), labels=ML)),
    "audit": (DEFAULT_POLICY, FakeCluster(labels={"ml": {"gpu2dra.io/migration": "audit"}})),
    "deny-on-error": (policy(onError="deny"), FakeCluster(labels=ML, fail_with="RBAC says no")),
}


@pytest.fixture(scope="module")
def clients() -> Iterator[dict[str, TestClient]]:
    with contextlib.ExitStack() as stack:
        yield {
            name: stack.enter_context(TestClient(create_app(Settings(policy=policy), cluster)))
            for name, (policy, cluster) in SETUPS.items()
        }


# ---- the corpus --------------------------------------------------------------------------


@pytest.mark.parametrize("endpoint", ["mutate", "validate"])
def test_corpus(clients: dict[str, TestClient], endpoint: str) -> None:
    """Every file gets the outcome its name says (the same test runs over HTTPS against a
    served process in test_served_corpus.py)."""
    for path in corpus(endpoint):
        body = path.read_bytes()
        answer = post(clients["corpus"], f"/{endpoint}", body, uid_of(body))
        assert answer.outcome == outcome_of(path), (path.name, answer.text[:500])
        if endpoint == "mutate":
            check_mutation(answer, body)


def test_corpus_on_every_setup(clients: dict[str, TestClient]) -> None:
    """The outcomes differ by setup (audit, a failing cluster...), the rules do not; and the
    pods of the mutate corpus are good bad input for /validate too."""
    for path in corpus("mutate"):
        body = path.read_bytes()
        for name, client in clients.items():
            if name != "corpus":
                check_mutation(post(client, "/mutate", body, uid_of(body)), body)
    for path in corpus("mutate") + corpus("validate"):
        body = path.read_bytes()
        post(clients["enabled"], "/validate", body, uid_of(body))


# ---- random bodies -----------------------------------------------------------------------


@FUZZ
@given(body=st.binary(max_size=300) | st.text(max_size=300).map(str.encode))
def test_random_bytes(clients: dict[str, TestClient], body: bytes) -> None:
    for endpoint in ("/mutate", "/validate"):
        assert post(clients["enabled"], endpoint, body).status == 400


@FUZZ
@given(value=json_values)
def test_random_json(clients: dict[str, TestClient], value: Any) -> None:
    for endpoint in ("/mutate", "/validate"):
        assert post(clients["enabled"], endpoint, encode(value)).status == 400


# Fields a review has, and what may stand in for them.
ENVELOPE: list[tuple[str, ...]] = [
    ("apiVersion",),
    ("kind",),
    ("request",),
    ("request", "uid"),
    ("request", "kind"),
    ("request", "kind", "group"),
    ("request", "kind", "version"),
    ("request", "kind", "kind"),
    ("request", "operation"),
    ("request", "namespace"),
    ("request", "name"),
    ("request", "object"),
    ("request", "oldObject"),
    ("request", "dryRun"),
    ("request", "subResource"),
    ("request", "userInfo"),
    ("request", "object", "metadata"),
    ("request", "object", "metadata", "namespace"),
    ("request", "object", "metadata", "annotations"),
    ("request", "object", "spec"),
    ("request", "object", "spec", "containers"),
    ("request", "object", "spec", "resourceClaims"),
    ("request", "object", "spec", "nodeSelector"),
    ("request", "object", "spec", "affinity"),
]
stand_ins = st.one_of(
    json_values,
    junk,
    st.sampled_from(
        ["Pod", "CREATE", "UPDATE", "DELETE", "CONNECT", "", "ml", "kube-system", "status", True]
    ),
)
metadata = st.one_of(
    st.just({"name": "p", "namespace": "ml"}),
    st.just({"generateName": "p-"}),
    st.just({"name": "p", "annotations": {"gpu2dra.io/skip": "true"}}),
    st.just({"name": "p", "annotations": {"kubernetes.io/config.mirror": "x"}}),
    st.just({"name": "p", "annotations": {"gpu2dra.io/skip": True}}),
    junk,
)


@st.composite
def reviews(draw: st.DrawFn) -> Obj:
    """A pod review, some of its fields replaced by anything or removed."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": draw(metadata), "spec": draw(pod_specs)}
    review: Obj = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "fuzz",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "operation": "CREATE",
            "namespace": "ml",
            "object": pod,
            "oldObject": None,
            "dryRun": False,
        },
    }
    review = copy.deepcopy(review)  # junk values are shared between examples: edit copies
    for path in draw(st.lists(st.sampled_from(ENVELOPE), max_size=3, unique=True)):
        parent = review
        for step in path[:-1]:
            parent = parent.get(step) if isinstance(parent, dict) else None  # type: ignore[assignment]
        if isinstance(parent, dict):
            if draw(st.booleans()):
                parent[path[-1]] = draw(stand_ins)
            else:
                parent.pop(path[-1], None)
    return review


setup_names = st.sampled_from([name for name in SETUPS if name != "corpus"])


@FUZZ
@given(review=reviews(), setup=setup_names)
def test_broken_reviews(clients: dict[str, TestClient], review: Obj, setup: str) -> None:
    body = encode(review)
    for endpoint in ("/mutate", "/validate"):
        answer = post(clients[setup], endpoint, body, uid_of(body))
        if endpoint == "/mutate":
            check_mutation(answer, body)


@settings(FUZZ, max_examples=200)
@given(spec=pod_specs, meta=metadata, setup=setup_names)
def test_random_pods(clients: dict[str, TestClient], spec: Obj, meta: Any, setup: str) -> None:
    """Well-formed reviews of random pods: every patch is one the apiserver accepts (for a pod
    it accepts) and adds no error to a pod it rejects."""
    body = pod_review(spec, "pod", meta)
    answer = post(clients[setup], "/mutate", body, "pod" if body.startswith(b"{") else None)
    check_mutation(answer, body)
    post(clients[setup], "/validate", body)


@settings(FUZZ, max_examples=150)
@given(spec=plausible_pod_specs(), setup=setup_names)
def test_plausible_pods(clients: dict[str, TestClient], spec: Obj, setup: str) -> None:
    body = pod_review(spec, "valid")
    check_mutation(post(clients[setup], "/mutate", body, "valid"), body)


claim_objects = st.fixed_dictionaries(
    {
        "metadata": metadata,
        "spec": st.one_of(
            junk,
            st.fixed_dictionaries(
                {
                    "devices": st.one_of(
                        junk,
                        st.fixed_dictionaries(
                            {
                                "requests": st.lists(
                                    st.one_of(
                                        junk,
                                        st.fixed_dictionaries(
                                            {
                                                "name": st.text(max_size=5) | junk,
                                                "exactly": junk
                                                | st.fixed_dictionaries(
                                                    {
                                                        "deviceClassName": st.sampled_from(
                                                            ["gpu.nvidia.com", "missing"]
                                                        )
                                                        | junk
                                                    }
                                                ),
                                                "firstAvailable": junk
                                                | st.lists(
                                                    st.fixed_dictionaries(
                                                        {
                                                            "name": junk,
                                                            "deviceClassName": st.sampled_from(
                                                                ["mig.nvidia.com", "missing"]
                                                            )
                                                            | junk,
                                                        }
                                                    ),
                                                    max_size=2,
                                                ),
                                            }
                                        ),
                                    ),
                                    max_size=3,
                                )
                                | junk
                            }
                        ),
                    )
                }
            ),
        ),
    }
)


@FUZZ
@given(
    obj=claim_objects,
    kind=st.sampled_from(["ResourceClaimTemplate", "ResourceClaim"]),
    wrap=st.booleans(),
    operation=st.sampled_from(["CREATE", "UPDATE", "DELETE"]),
)
def test_random_claims_and_templates(
    clients: dict[str, TestClient], obj: Obj, kind: str, wrap: bool, operation: str
) -> None:
    if wrap:  # a template's claim spec is under spec.spec
        obj = {**obj, "spec": {"spec": obj["spec"]}}
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "claim",
            "kind": {"group": "resource.k8s.io", "version": "v1", "kind": kind},
            "operation": operation,
            "namespace": "ml",
            "object": obj,
        },
    }
    answer = post(clients["enabled"], "/validate", encode(review), "claim")
    if answer.outcome == "denied":
        assert answer.verdict is not None and answer.verdict["status"]["code"] == 403
        assert "missing" in answer.verdict["status"]["message"]


# ---- big and odd pods (big_pods.py) ------------------------------------------------------


@pytest.mark.timing
@pytest.mark.parametrize("name", BIG_PODS)
def test_big_pods(clients: dict[str, TestClient], name: str) -> None:
    """Within the webhook's deadline (3 s, in which CPU-bound work cannot be interrupted),
    and the patched pod checked like any other."""
    body = pod_review(BIG_PODS[name])
    start = time.perf_counter()
    answer = post(clients["enabled"], "/mutate", body, None)
    assert time.perf_counter() - start < 3.0
    if answer.verdict is not None:
        assert answer.verdict["uid"] == "big"
        check_mutation(answer, body)  # a few seconds for 10,000 containers, outside the bound
    assert post(clients["enabled"], "/validate", body).status in (200, 400)


def test_corpus_is_small() -> None:
    """Big cases are made in code: the corpus stays a readable size."""
    total = sum(p.stat().st_size for p in Path(__file__).parent.glob("corpus/*/*"))
    assert total < 200_000

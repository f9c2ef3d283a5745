"""Coverage-guided fuzzing with atheris (libFuzzer): `python -m tests.fuzz.atheris_targets
mutate|validate|translate [libFuzzer flags] [corpus dirs]`. test_atheris.py runs each target
for a bounded time from the bad-input corpus; any exception but the clear rejections, and
any patch that does not apply or adds an error the API server would report, is a crash."""

from __future__ import annotations

import base64
import sys
from collections.abc import Callable, Coroutine
from typing import Any

import atheris
import orjson

with atheris.instrument_imports(include=["app"]):  # type: ignore[attr-defined]
    from app.core.policy import load_policy
    from app.webhook.application import _translate_body
    from app.webhook.cluster import OfflineCluster
    from app.webhook.mutate import Mutator
    from app.webhook.reviews import ReviewError, parse_review, review
    from app.webhook.validate import validate
    from app.webhook.verdicts import Decision

from tests.fuzz.answers import check_patch
from tests.support.corpus import CORPUS_POLICY

POLICY = load_policy(CORPUS_POLICY)
CLUSTER = OfflineCluster(POLICY)  # answers without awaiting: no event loop needed
MUTATOR = Mutator(POLICY)


def _settled(decision: Decision) -> Any:
    """The answer; a coroutine must finish without suspending (OfflineCluster never waits)."""
    if not isinstance(decision, Coroutine):
        return decision.response
    try:
        decision.send(None)
    except StopIteration as done:
        return done.value.response
    raise AssertionError("the offline answer waited on something")


def _encoded(request: Any, answer: Any) -> Any:
    """The response as the endpoint sends it: the uid stamped, the whole answer encodable."""
    return orjson.loads(review(request["uid"], answer))["response"]


def mutate(data: bytes) -> None:
    try:
        request = parse_review(data)
    except ReviewError:
        return  # the clear 400
    try:
        answer = _settled(MUTATOR(request, CLUSTER))
    except RecursionError:
        return  # the endpoint's clear 400: nested deeper than Python compares or prints
    assert _encoded(request, answer)["uid"] == request["uid"]
    if "patch" in answer:
        assert request["object"] is not None
        check_patch(request["object"], orjson.loads(base64.b64decode(answer["patch"])))


def validate_(data: bytes) -> None:
    try:
        request = parse_review(data)
    except ReviewError:
        return
    try:
        answer = _settled(validate(request, CLUSTER))
    except RecursionError:
        return  # the endpoint's clear 400
    encoded = _encoded(request, answer)
    assert encoded["uid"] == request["uid"] and isinstance(encoded["allowed"], bool)


def translate(data: bytes) -> None:
    for as_yaml in (False, True):
        status, body = _translate_body(
            data, POLICY, CLUSTER.catalog, namespace=None, mode="enabled", as_yaml=as_yaml
        )
        assert status == 200 or (status == 400 and body.count(b"\n") == 1), (status, body)


TARGETS: dict[str, Callable[[bytes], None]] = {
    "mutate": mutate,
    "validate": validate_,
    "translate": translate,
}

if __name__ == "__main__":
    target = TARGETS[sys.argv.pop(1)]
    atheris.Setup(sys.argv, target)
    atheris.Fuzz()

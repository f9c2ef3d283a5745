"""Admission requests for the in-memory verdict tests, and what a verdict's patch makes of a pod."""

from __future__ import annotations

import asyncio
import base64
import copy
from collections.abc import Coroutine
from typing import Any

import jsonpatch
import orjson

from app.webhook.reviews import AdmissionRequest, Answer
from app.webhook.verdicts import Decision
from tests.support.pods import container, gpu

Obj = dict[str, Any]


def pod(spec: Obj | None = None, annotations: Obj | None = None) -> Obj:
    meta: Obj = {"generateName": "train-", "namespace": "ml"}
    if annotations:
        meta["annotations"] = annotations
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": spec or {"containers": [container("c", gpu(2))]},
    }


def request(
    obj: Obj,
    operation: str = "CREATE",
    kind: str = "Pod",
    group: str = "",
    namespace: str = "ml",
    **extra: Any,
) -> AdmissionRequest:
    req: dict[str, Any] = {
        "uid": "u",
        "kind": {"group": group, "version": "v1", "kind": kind},
        "operation": operation,
        "namespace": namespace,
        "object": obj,
        **extra,
    }
    return req  # type: ignore[return-value]


def run(decision: Decision) -> Answer:
    verdict = asyncio.run(decision) if isinstance(decision, Coroutine) else decision
    return verdict.response


def apply(obj: Obj, response: Answer) -> Obj:
    ops = orjson.loads(base64.b64decode(response["patch"]))
    return jsonpatch.apply_patch(obj, ops)  # type: ignore[no-any-return]


def patched(obj: Obj, response: Answer) -> Obj:
    """The pod a plain patch (allowed, a JSONPatch, no warning) makes of `obj`."""
    assert {**response, "patch": ""} == {"allowed": True, "patchType": "JSONPatch", "patch": ""}
    return apply(copy.deepcopy(obj), response)

"""AdmissionReviews as the API server sends them: JSON bytes, a pod's CREATE review; and the pod
the mutating webhook's patch must make of one it translates."""

from __future__ import annotations

import json
from typing import Any

import orjson

from app.core.catalog import Catalog
from app.core.patch import RECORD_ANNOTATION, record
from app.core.policy import Policy
from app.core.translate import translate

Obj = dict[str, Any]


def encode(value: Any) -> bytes:
    """JSON as a client would send it; json (not orjson) for integers over 64 bits."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value).encode()


_NAMED_P: Any = object()


def pod_review(spec: Obj, uid: str = "big", metadata: Any = _NAMED_P) -> bytes:
    """A CREATE review of a pod in namespace ml; `metadata` may be anything, junk and None too."""
    meta = {"name": "p"} if metadata is _NAMED_P else metadata
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
    request = {
        "uid": uid,
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "operation": "CREATE",
        "namespace": "ml",
        "object": pod,
    }
    return encode(
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    )


def translated(obj: Obj, policy: Policy, catalog: Catalog) -> Obj:
    """`obj` as the mutating webhook must leave it: the spec translate() gives, and the record
    of what that replaced (tests/unit/core/test_patch.py reads the record back)."""
    result = translate(obj["spec"], policy, catalog, obj["metadata"].get("annotations"))
    annotations = {
        **obj["metadata"].get("annotations", {}),
        RECORD_ANNOTATION: record(obj["spec"], result.touched),
    }
    return {**obj, "metadata": {**obj["metadata"], "annotations": annotations}, "spec": result.spec}

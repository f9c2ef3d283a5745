"""AdmissionReviews as the API server sends them: JSON bytes, a pod's CREATE review."""

from __future__ import annotations

import json
from typing import Any

import orjson

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

"""AdmissionReview (admission.k8s.io/v1) on the wire, and the pure builders of its answers.
Answers carry no uid: `review` stamps it once, where the answer is encoded."""

from __future__ import annotations

import base64
from collections.abc import Iterable
from typing import Any, Literal, NotRequired, TypedDict

import orjson

from app.core.kube import Obj

Operation = Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]


class GroupVersionKind(TypedDict):
    group: str
    version: str
    kind: str


class AdmissionRequest(TypedDict):
    uid: str
    kind: GroupVersionKind
    operation: Operation
    namespace: NotRequired[str]
    name: NotRequired[str]
    object: NotRequired[Obj | None]
    oldObject: NotRequired[Obj | None]
    dryRun: NotRequired[bool]
    subResource: NotRequired[str]
    userInfo: NotRequired[Obj]


class Status(TypedDict):
    code: int
    message: str


class Answer(TypedDict):
    """An AdmissionResponse without its uid, which `review` stamps from the request."""

    allowed: bool
    status: NotRequired[Status]
    patch: NotRequired[str]
    patchType: NotRequired[Literal["JSONPatch"]]
    warnings: NotRequired[list[str]]
    auditAnnotations: NotRequired[dict[str, str]]


class ReviewError(ValueError):
    """The body is not an AdmissionReview we can answer: HTTP 400 with this one line."""


API_VERSION = "admission.k8s.io/v1"


# Built once: `dict | None` in isinstance() would build a union on every request.
_DICT_OR_NONE, _STR_OR_NONE, _BOOL_OR_NONE = (
    (dict, type(None)),
    (str, type(None)),
    (bool, type(None)),
)


def parse_review(body: bytes) -> AdmissionRequest:
    try:
        review = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise ReviewError("body is not JSON") from None
    if not isinstance(review, dict):
        raise ReviewError("body is not a JSON object")
    if review.get("apiVersion") != API_VERSION or review.get("kind") != "AdmissionReview":
        raise ReviewError(f"expected apiVersion {API_VERSION}, kind AdmissionReview")
    request = review.get("request")
    if not isinstance(request, dict):
        raise ReviewError("review has no request")
    if not isinstance(request.get("uid"), str) or not request["uid"]:
        raise ReviewError("request has no uid")
    kind = request.get("kind")
    if not isinstance(kind, dict) or not isinstance(kind.get("kind"), str):
        raise ReviewError("request has no kind")
    if not isinstance(request.get("operation"), str):
        raise ReviewError("request has no operation")
    for key in ("object", "oldObject"):
        if not isinstance(request.get(key), _DICT_OR_NONE):
            raise ReviewError(f"request.{key} is not an object")
    for key in ("namespace", "name", "subResource"):
        if not isinstance(request.get(key), _STR_OR_NONE):
            raise ReviewError(f"request.{key} is not a string")
    if not isinstance(request.get("dryRun"), _BOOL_OR_NONE):
        raise ReviewError("request.dryRun is not a boolean")
    # orjson reads 1,024 levels but writes 254: what an answer echoes of the request (a
    # patch, a record) is encoded where it is made, and refused there if it nests too deep.
    return request  # type: ignore[return-value]


def allowed(warnings: Iterable[str] = (), **extra: Any) -> Answer:
    response: Answer = {"allowed": True}
    if warnings and (warnings := list(warnings)):
        response["warnings"] = warnings
    if extra:
        response.update(extra)  # type: ignore[typeddict-item]
    return response


def denied(message: str, code: int = 403, warnings: Iterable[str] = ()) -> Answer:
    response: Answer = {
        "allowed": False,
        "status": {"code": code, "message": message},
    }
    if warnings := list(warnings):
        response["warnings"] = warnings
    return response


def encode_patch(ops: list[Obj]) -> str:
    """A JSON patch as an AdmissionResponse carries it: base64 of the JSON."""
    return base64.b64encode(orjson.dumps(ops)).decode()


def patched(patch: str, warnings: Iterable[str] = ()) -> Answer:
    """Allowed with `patch` (from `encode_patch`) applied; an empty patch changes nothing."""
    response = allowed(warnings)
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = patch
    return response


def review(uid: str, answer: Answer) -> bytes:
    """The AdmissionReview that carries `answer` for the request `uid`: the one place a
    response gets its uid, as controller-runtime's Response.Complete does."""
    response = {"uid": uid, **answer}
    return orjson.dumps(
        {"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": response}
    )


def namespace_of(request: AdmissionRequest, obj: Obj) -> str:
    """The request's namespace, else the object's own: "" when neither is a string."""
    metadata = obj.get("metadata")
    namespace = request.get("namespace") or (
        metadata.get("namespace") if isinstance(metadata, dict) else None
    )
    return namespace if isinstance(namespace, str) else ""

"""The AdmissionReview wire format: parsing what arrives and the shape of what leaves."""

from __future__ import annotations

import base64

import orjson
import pytest

from app.webhook.reviews import (
    ReviewError,
    allowed,
    denied,
    encode_patch,
    parse_review,
    patched,
    review,
)


def _body(**request: object) -> bytes:
    req = {
        "uid": "u1",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "operation": "CREATE",
        **request,
    }
    return orjson.dumps(
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req}
    )


def test_parse_accepts_a_review() -> None:
    assert parse_review(_body(object={"spec": {}}))["uid"] == "u1"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"not json", "body is not JSON"),
        (b"[1]", "not a JSON object"),
        (b'{"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview"}', "expected"),
        (b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}', "no request"),
        (
            b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {}}',
            "no uid",
        ),
        (_body(uid=""), "no uid"),
        (_body(kind="Pod"), "no kind"),
        (_body(operation=None), "no operation"),
        (_body(object=[1, 2]), "request.object is not an object"),
    ],
)
def test_parse_rejects_malformed_reviews(body: bytes, message: str) -> None:
    with pytest.raises(ReviewError, match=message):
        parse_review(body)


def test_allowed_carries_no_patch_and_no_empty_warnings() -> None:
    assert allowed() == {"allowed": True}
    assert allowed(["w"]) == {"allowed": True, "warnings": ["w"]}


def test_denied_carries_code_and_message() -> None:
    assert denied("no", 403) == {
        "allowed": False,
        "status": {"code": 403, "message": "no"},
    }


def test_patched_without_ops_is_plain_allowed() -> None:
    response = patched("")
    assert "patch" not in response and "patchType" not in response


def test_patched_encodes_json_patch() -> None:
    ops = [{"op": "add", "path": "/spec/x", "value": 1}]
    response = patched(encode_patch(ops), ["w"])
    assert response["patchType"] == "JSONPatch"
    assert orjson.loads(base64.b64decode(response["patch"])) == ops
    assert response["warnings"] == ["w"]


def test_review_envelope_stamps_the_uid_first() -> None:
    body = review("u", allowed(["w"]))
    assert body.startswith(
        b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"u",'
    )
    out = orjson.loads(body)
    assert out == {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": "u", "allowed": True, "warnings": ["w"]},
    }

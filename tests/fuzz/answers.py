"""What every answer to bad input must be, shared by the bad-input tests.

An answer is a clear 400 (one line of text), or a verdict (allowed, with or without warnings
or a patch, or denied with 403/503): never a 500 and never an exception. A patch must apply to
the pod as sent, and the patched pod must have no error the apiserver would report that the
pod did not have already; nor may it lose all of them (the webhook does not quietly repair a
pod the apiserver would have rejected).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

import jsonpatch
import orjson

from tests.support.validation import pod_errors

Obj = dict[str, Any]


def check_patch(pod: Obj, ops: list[Obj]) -> Obj:
    """The patched pod, after checking that the patch applies and adds no error."""
    patched: Obj = jsonpatch.apply_patch(pod, ops, in_place=False)
    before, after = pod_errors(pod), pod_errors(patched)
    assert after <= before, f"the patch adds errors: {sorted(after - before)}"
    # An unknown field is dropped when the API server decodes the pod, before admission: the
    # webhook never sees it, so removing the object that held it hides nothing.
    rejected = {e for e in before if _UNKNOWN_FIELD not in e}
    assert after or not rejected, f"the patch hides the pod's errors: {sorted(rejected)}"
    return patched


_UNKNOWN_FIELD = "Additional properties are not allowed"


# ---- answers -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    status: int
    text: str
    verdict: Obj | None  # AdmissionReview.response, for status 200

    @property
    def ops(self) -> list[Obj]:
        assert self.verdict is not None
        patch = self.verdict.get("patch")
        return orjson.loads(base64.b64decode(patch)) if patch else []

    @property
    def outcome(self) -> str:
        """400, allowed, warned, patched or denied: the corpus file names say which."""
        if self.verdict is None:
            return str(self.status)
        if not self.verdict["allowed"]:
            return "denied"
        if "patch" in self.verdict:
            return "patched"
        return "warned" if self.verdict.get("warnings") else "allowed"


def check_answer(status: int, body: bytes, uid: Any = None) -> Answer:
    """Only a one-line 400 (or 413) or an AdmissionReview verdict that echoes the uid."""
    text = body.decode()
    assert status in (200, 400, 413), (status, text[:500])  # 500: a fault of gpu2dra's own
    if status != 200:
        assert text.endswith("\n") and text.count("\n") == 1, text[:500]
        return Answer(status, text, None)
    review = orjson.loads(body)
    assert review["apiVersion"] == "admission.k8s.io/v1" and review["kind"] == "AdmissionReview"
    verdict: Obj = review["response"]
    if uid is not None:
        assert verdict["uid"] == uid
    if not verdict["allowed"]:
        assert verdict["status"]["code"] in (403, 503), verdict
        assert "patch" not in verdict
    if "patch" in verdict:
        assert verdict["patchType"] == "JSONPatch"
    for warning in verdict.get("warnings", []):
        assert isinstance(warning, str) and warning
    return Answer(status, text, verdict)


def check_translate_answer(status: int, body: bytes, yaml_wanted: bool = False) -> Any:
    """A one-line 400 (or 413), or the translation as JSON or YAML: never a 500."""
    import yaml

    text = body.decode()
    assert status in (200, 400, 413), (status, text[:500])
    if status != 200:
        assert text.endswith("\n") and text.count("\n") == 1, text[:500]
        return None
    if yaml_wanted:
        return list(yaml.safe_load_all(text))
    result = orjson.loads(body)
    assert set(result) == {"documents", "templates", "warnings"}
    return result


def uid_of(body: bytes) -> Any:
    try:
        return orjson.loads(body)["request"]["uid"]
    except Exception:
        return None


def pod_of(body: bytes) -> Obj | None:
    """The pod in a review body, if there is one to patch."""
    try:
        obj = orjson.loads(body)["request"]["object"]
    except Exception:
        return None
    return obj if isinstance(obj, dict) else None

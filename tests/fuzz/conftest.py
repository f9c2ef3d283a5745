"""What every answer to bad input must be, shared by the bad-input tests.

An answer is a clear 400 (one line of text), or a verdict (allowed, with or without warnings
or a patch, or denied with 403/503): never a 500 and never an exception. A patch must apply to
the pod as sent, and the patched pod must have no error the apiserver would report that the
pod did not have already; nor may it lose all of them (the webhook does not quietly repair a
pod the apiserver would have rejected).
"""

from __future__ import annotations

import base64
import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonpatch
import orjson
from kubernetes_validate import utils as kv

from tests.unit.test_schemas import K8S_VERSIONS, pod_claim_errors

Obj = dict[str, Any]

CORPUS = Path(__file__).parent / "corpus"
CORPUS_POLICY = CORPUS / "policy.yaml"  # the default policy, migration enabled by default

# ---- the strict schemas of each tested release, every error at once -----------------------


@functools.cache
def _validator(api_version: str, kind: str, k8s_version: str) -> Any:
    """kubernetes_validate.validate without re-reading the schema files on every call, and
    with `iter_errors`: the tests compare the errors before and after a patch."""
    version = [v for v in kv.all_versions() if kv.major_minor(v) <= k8s_version][-1]
    folder = f"kubernetes-json-schema/v{version}-local-strict"
    group = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    schema = kv.schema_contents(f"{folder}/{kind.lower()}-{group}.json", k8s_version)
    definitions = kv.schema_contents(f"{folder}/_definitions.json", k8s_version)
    registry = kv.Resource.from_contents(definitions) @ (
        kv.Resource.from_contents(schema) @ kv.Registry()
    )
    return kv.jsonschema.validators.Draft202012Validator(schema, registry=registry)


def schema_errors(obj: Obj) -> set[str]:
    """Each error of each release as `version: path: message`; the place in a list of node
    selector requirements left out, as removing a translated one moves the others."""
    return {
        f"{version}: "
        + re.sub(r"matchExpressions/\d+", "matchExpressions/*", "/".join(map(str, e.absolute_path)))
        + f": {e.message[:300]}"
        for version in K8S_VERSIONS
        for e in _validator(obj["apiVersion"], obj["kind"], version).iter_errors(obj)
    }


# ---- what validation adds (pkg/apis/core/validation), as far as translation can touch it --

_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")


def _bad_label_value(value: Any) -> bool:
    return isinstance(value, str) and (len(value) > 63 or not _LABEL_VALUE.fullmatch(value))


def node_errors(spec: Obj) -> list[str]:
    """`ValidateLabels(spec.nodeSelector)` and `ValidateNodeSelectorRequirement` of the
    required node affinity: the parts of a pod the GFD translation rewrites."""
    errors = []
    selector = spec.get("nodeSelector")
    if isinstance(selector, dict):
        errors += [
            f"spec.nodeSelector[{k}]: Invalid value: {v!r}"
            for k, v in selector.items()
            if _bad_label_value(v)
        ]
    affinity = spec.get("affinity")
    node = affinity.get("nodeAffinity") if isinstance(affinity, dict) else None
    required = (
        node.get("requiredDuringSchedulingIgnoredDuringExecution")
        if isinstance(node, dict)
        else None
    )
    terms = required.get("nodeSelectorTerms") if isinstance(required, dict) else None
    if terms == [] or (isinstance(required, dict) and terms is None):
        errors.append("nodeSelectorTerms: Required value")
    for i, term in enumerate(terms if isinstance(terms, list) else []):
        exprs = term.get("matchExpressions") if isinstance(term, dict) else None
        for expr in exprs if isinstance(exprs, list) else []:
            if not isinstance(expr, dict):
                continue
            where = f"nodeSelectorTerms[{i}].matchExpressions[{expr.get('key')!r}]"
            op, values = expr.get("operator"), expr.get("values") or []
            if op in ("In", "NotIn") and not values:
                errors.append(f"{where}.values: Required value")
            elif op in ("Exists", "DoesNotExist") and values:
                errors.append(f"{where}.values: Forbidden")
            elif op not in ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"):
                errors.append(f"{where}.operator: Unsupported value: {op!r}")
            if isinstance(values, list):
                errors += [
                    f"{where}.values: Invalid value: {v!r}" for v in values if _bad_label_value(v)
                ]
    return errors


def _claims_checkable(spec: Obj) -> bool:
    """pod_claim_errors reads the claim fields as the schema types them."""

    def maps(value: Any) -> bool:
        return value is None or (
            isinstance(value, list) and all(isinstance(v, dict) for v in value)
        )

    def strings(obj: Obj, *keys: str) -> bool:
        return all(obj.get(k) is None or isinstance(obj[k], str) for k in keys)

    claims = spec.get("resourceClaims")
    if not maps(claims) or not all(
        strings(c, "name", "resourceClaimName", "resourceClaimTemplateName") for c in claims or []
    ):
        return False
    for field in ("initContainers", "containers"):
        containers = spec.get(field)
        if not maps(containers):
            return False
        for container in containers or []:
            resources = container.get("resources")
            if resources is None:
                continue
            if not isinstance(resources, dict) or not maps(resources.get("claims")):
                return False
            if not all(strings(r, "name", "request") for r in resources.get("claims") or []):
                return False
    return True


def _without_nulls(value: Any) -> Any:
    """The apiserver decodes a null field as an absent one (the schemas say "array")."""
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def pod_errors(pod: Obj) -> set[str]:
    """What the apiserver would say of `pod`, as far as these tests can tell; empty: valid."""
    pod = _without_nulls(pod)
    errors = schema_errors({**pod, "apiVersion": "v1", "kind": "Pod"})
    spec = pod.get("spec")
    if isinstance(spec, dict):
        errors.update(node_errors(spec))
        if _claims_checkable(spec):
            errors.update(pod_claim_errors(spec))
    return errors


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
    assert status in (200, 400, 413), (status, text[:500])
    if status != 200:
        assert text.endswith("\n") and text.count("\n") == 1, text[:500]
        return Answer(status, text, None)
    review = orjson.loads(body)
    assert review["apiVersion"] == "admission.k8s.io/v1" and review["kind"] == "AdmissionReview"
    verdict: Obj = review["response"]
    if uid is not None:
        assert verdict["uid"] == uid
    if not verdict["allowed"]:
        assert verdict["status"]["code"] in (403, 503), verdict  # 500: a bug of ours
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


def corpus(endpoint: str) -> list[Path]:
    """The corpus files for `endpoint`, named `<outcome>--<what>.<ext>`."""
    return sorted((CORPUS / endpoint).iterdir())


def outcome_of(path: Path) -> str:
    return path.name.split("--", 1)[0]


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

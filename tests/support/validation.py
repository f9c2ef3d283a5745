"""What the API server rejects, as far as translation can touch it: the strict schemas of each
release the tests build, and the rules of pkg/apis/core/validation the schemas cannot say."""

from __future__ import annotations

import functools
import re
from typing import Any

from kubernetes_validate import utils as kv

from tests.support.controlplane import releases

Obj = dict[str, Any]

# The releases tests/k8s builds, newest first: ("1.37", "1.34").
K8S_VERSIONS = tuple(release.removeprefix("v") for release in releases())

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


# ---- the rules `validatePodResourceClaim` / `validateResourceClaimNames` add --------------
# (kubernetes pkg/apis/core/validation; see /work/shared/reference/dra-api.md section 2)

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def is_dns_label(value: Any) -> bool:
    return isinstance(value, str) and len(value) <= 63 and bool(_DNS_LABEL.fullmatch(value))


def is_dns_subdomain(value: Any) -> bool:
    return isinstance(value, str) and len(value) <= 253 and bool(_DNS_SUBDOMAIN.fullmatch(value))


def pod_claim_errors(spec: Obj) -> list[str]:
    """The errors the apiserver reports for the DRA claims of a pod spec, [] when valid."""
    errors: list[str] = []
    pod_names: set[str] = set()
    for i, claim in enumerate(spec.get("resourceClaims") or []):
        where = f"spec.resourceClaims[{i}]"
        name = claim.get("name")
        if not name:
            errors.append(f"{where}.name: Required value")
        elif name in pod_names:
            errors.append(f"{where}.name: Duplicate value: {name!r}")
        elif not is_dns_label(name):
            errors.append(f"{where}.name: Invalid value: {name!r}: not a DNS label")
        else:
            pod_names.add(name)
        sources = [
            (key, claim[key])
            for key in ("resourceClaimName", "resourceClaimTemplateName")
            if claim.get(key) is not None
        ]
        if len(sources) != 1:
            errors.append(
                f"{where}: Invalid value: must specify one of: "
                "`resourceClaimName`, `resourceClaimTemplateName`"
            )
        for key, value in sources:
            if not is_dns_subdomain(value):
                errors.append(f"{where}.{key}: Invalid value: {value!r}: not a DNS subdomain")
    for field in ("initContainers", "containers"):
        for c, container in enumerate(spec.get(field) or []):
            claims = (container.get("resources") or {}).get("claims") or []
            used: set[tuple[str, str]] = set()
            for i, ref in enumerate(claims):
                where = f"spec.{field}[{c}].resources.claims[{i}]"
                name, request = ref.get("name"), ref.get("request") or ""
                if not name:
                    errors.append(f"{where}.name: Required value")
                    continue
                if request and not is_dns_label(request):
                    errors.append(f"{where}.request: Invalid value: {request!r}: not a DNS label")
                # The same claim twice, the same request twice, or a whole claim and one of
                # its requests; different requests of one claim are fine.
                if (
                    any(n == name for n, _ in used)
                    if not request
                    else bool({(name, request), (name, "")} & used)
                ):
                    errors.append(f"{where}: Duplicate value: {name}/{request}")
                used.add((name, request))
                if name not in pod_names:
                    errors.append(
                        f"{where}: Not found: {name!r}: must be one of the names in "
                        "pod.spec.resourceClaims"
                    )
    return errors


def claims_checkable(spec: Obj) -> bool:
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
        if claims_checkable(spec):
            errors.update(pod_claim_errors(spec))
    return errors

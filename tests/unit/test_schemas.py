"""What gpu2dra emits is valid Kubernetes on every release the control plane is tested on
(tests/k8s: the newest, 1.37, and the oldest gpu2dra supports, 1.34): the strict JSON schemas
of each (unknown fields are errors, as under `kubectl --validate=strict`), plus the pod-claim
rules the schemas cannot say.
"""

from __future__ import annotations

import copy
import re
from typing import Any

import kubernetes_validate
import pytest
from hypothesis import HealthCheck, given, settings

from app.core.catalog import Catalog
from app.core.policy import Policy
from app.core.translate import translate
from tests.support.controlplane import releases
from tests.unit.test_properties import pod_specs, setups
from tests.unit.test_translate import CASES, Case

Obj = dict[str, Any]

# The releases tests/k8s builds, newest first: ("1.37", "1.34").
K8S_VERSIONS = tuple(release.removeprefix("v") for release in releases())


def validate(obj: Obj) -> None:
    """Raise kubernetes_validate.ValidationError (its .version says which) unless `obj` fits
    the strict schema of every release in K8S_VERSIONS."""
    for version in K8S_VERSIONS:
        kubernetes_validate.validate(obj, version, strict=True)


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_kubernetes_validate_has_each_release(version: str) -> None:
    """kubernetes-validate falls back to an older schema for a release it lacks: bump its
    minimum in pyproject.toml with a new release in tests/k8s."""
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}
    assert kubernetes_validate.validate(config_map, version, strict=True) == version


def as_pod(spec: Obj) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "trainer", "namespace": "ml"},
        "spec": spec,
    }


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


def test_the_claim_checker_catches_what_the_apiserver_rejects() -> None:
    good: Obj = {
        "resourceClaims": [
            {"name": "a-gpu", "resourceClaimTemplateName": "gpu2dra-gpu-x1-0123456789"},
            {"name": "shared", "resourceClaimName": "team.shared-gpus"},
        ],
        "containers": [
            {"name": "a", "resources": {"claims": [{"name": "a-gpu"}]}},
            {"name": "b", "resources": {"claims": [{"name": "shared", "request": "gpu"}]}},
            {"name": "c", "resources": {"claims": [
                {"name": "shared", "request": "gpu"}, {"name": "shared", "request": "nic"}
            ]}},
        ],
    }  # fmt: skip
    assert pod_claim_errors(good) == []
    bad: list[tuple[Obj, str]] = [
        ({"resourceClaims": [{"resourceClaimName": "x"}]}, "Required"),
        ({"resourceClaims": [{"name": "A_gpu", "resourceClaimName": "x"}]}, "DNS label"),
        ({"resourceClaims": [{"name": "a" * 64, "resourceClaimName": "x"}]}, "DNS label"),
        ({"resourceClaims": [{"name": "a", "resourceClaimName": "x"}] * 2}, "Duplicate"),
        ({"resourceClaims": [{"name": "a"}]}, "must specify one of"),
        (
            {
                "resourceClaims": [
                    {"name": "a", "resourceClaimName": "x", "resourceClaimTemplateName": "y"}
                ]
            },
            "must specify one of",
        ),
        ({"resourceClaims": [{"name": "a", "resourceClaimTemplateName": "Y"}]}, "DNS subdomain"),
        (
            {"resourceClaims": [{"name": "a", "resourceClaimTemplateName": "y" * 254}]},
            "DNS subdomain",
        ),
        ({"containers": [{"resources": {"claims": [{"name": "gpu"}]}}]}, "Not found"),
        (
            {
                "resourceClaims": [{"name": "a", "resourceClaimName": "x"}],
                "containers": [{"resources": {"claims": [{"name": "a"}, {"name": "a"}]}}],
            },
            "Duplicate",
        ),
        (
            {
                "resourceClaims": [{"name": "a", "resourceClaimName": "x"}],
                "initContainers": [
                    {"resources": {"claims": [{"name": "a"}, {"name": "a", "request": "r"}]}}
                ],
            },
            "Duplicate",
        ),
        (
            {
                "resourceClaims": [{"name": "a", "resourceClaimName": "x"}],
                "containers": [{"resources": {"claims": [{"name": "a", "request": "R"}]}}],
            },
            "DNS label",
        ),
    ]
    for spec, error in bad:
        errors = pod_claim_errors(spec)
        assert len(errors) == 1 and error in errors[0], (spec, errors)


# ---- the translation table ---------------------------------------------------------------


def _case_ids(cases: list[Case]) -> list[str]:
    return [c.id for c in cases]


@pytest.mark.parametrize("case", CASES, ids=_case_ids(CASES))
def test_case_templates_are_valid(case: Case, policy: Policy, catalog: Catalog) -> None:
    for template in translate(case.spec, policy, catalog).templates:
        validate(template)
        validate({**template, "metadata": {**template["metadata"], "namespace": "ml"}})


@pytest.mark.parametrize("case", CASES, ids=_case_ids(CASES))
def test_case_pods_are_valid(case: Case, policy: Policy, catalog: Catalog) -> None:
    result = translate(case.spec, policy, catalog)
    validate(_without_input_errors(case.spec, result.spec))
    assert pod_claim_errors(result.spec) == []


def _without_input_errors(before: Obj, after: Obj) -> Obj:
    """The translated pod less the parts that were already invalid in the input (the table
    has a count of `true` and a placeholder `podAntiAffinity: {x: 1}`): each must be the very
    same error, at the same place, before the translation."""
    pod_before, pod_after = copy.deepcopy(as_pod(before)), copy.deepcopy(as_pod(after))
    for _ in range(10):
        try:
            validate(pod_after)
            return pod_after
        except kubernetes_validate.ValidationError as err:
            path = list(err.absolute_path)
            message = err.message
        assert path[:1] == ["spec"], path
        with pytest.raises(kubernetes_validate.ValidationError) as same:
            validate(pod_before)
        assert (list(same.value.absolute_path), same.value.message) == (path, message)
        for pod in (pod_before, pod_after):
            parent = pod
            for step in path[:-1]:
                parent = parent[step]
            del parent[path[-1]]
    raise AssertionError("too many errors")


def test_v1beta1_flat_request_is_rejected_under_v1() -> None:
    """The check can fail: the widely copied v1beta1 request shape is not v1."""
    flat: Obj = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "gpu", "namespace": "ml"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [{"name": "gpu", "deviceClassName": "gpu.nvidia.com", "count": 1}]
                }
            }
        },
    }
    with pytest.raises(kubernetes_validate.ValidationError, match="deviceClassName"):
        validate(flat)
    exact = {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 1}}
    flat["spec"]["spec"]["devices"]["requests"] = [exact]
    validate(flat)  # and the v1 spelling of the same request passes


def test_a_misplaced_pod_claim_field_is_rejected() -> None:
    spec = {
        "containers": [{"name": "c", "image": "x", "resources": {"claims": [{"name": "g"}]}}],
        "resourceClaims": [{"name": "g", "source": {"resourceClaimTemplateName": "t"}}],  # 1.30
    }
    with pytest.raises(kubernetes_validate.ValidationError, match="source"):
        validate(as_pod(spec))


# ---- random pods -------------------------------------------------------------------------

# Templates are named by their content: one validation per name is enough.
_VALID_TEMPLATES: set[str] = set()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=pod_specs, setup=setups)
def test_random_templates_are_valid(spec: Obj, setup: tuple[Policy, Catalog]) -> None:
    for template in translate(spec, *setup).templates:
        name = template["metadata"]["name"]
        assert is_dns_subdomain(name)
        for request in template["spec"]["spec"]["devices"]["requests"]:
            assert is_dns_label(request["name"]), request  # the schema does not say so
        if name not in _VALID_TEMPLATES:
            validate(template)
            _VALID_TEMPLATES.add(name)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=pod_specs, setup=setups)
def test_random_valid_pods_keep_valid_claims(spec: Obj, setup: tuple[Policy, Catalog]) -> None:
    """A pod whose claims the apiserver accepts still has acceptable claims afterwards."""
    if _claims_are_checkable(spec) and not pod_claim_errors(spec):
        result = translate(spec, *setup)
        assert pod_claim_errors(result.spec) == []


def _claims_are_checkable(spec: Obj) -> bool:
    """Is every claim-related field of the right JSON type (what the schema ensures)?"""

    def list_of_maps(value: Any) -> bool:
        return value is None or (
            isinstance(value, list) and all(isinstance(v, dict) for v in value)
        )

    def str_or_none(obj: Obj, *keys: str) -> bool:
        return all(obj.get(k) is None or isinstance(obj[k], str) for k in keys)

    claims = spec.get("resourceClaims")
    if not list_of_maps(claims):
        return False
    if not all(
        str_or_none(c, "name", "resourceClaimName", "resourceClaimTemplateName")
        for c in claims or []
    ):
        return False
    for field in ("initContainers", "containers"):
        containers = spec.get(field)
        if not list_of_maps(containers):
            return False
        for container in containers or []:
            resources = container.get("resources")
            if resources is None:
                continue
            if not isinstance(resources, dict) or not list_of_maps(resources.get("claims")):
                return False
            if not all(str_or_none(r, "name", "request") for r in resources.get("claims") or []):
                return False
    return True

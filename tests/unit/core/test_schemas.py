"""What gpu2dra emits is valid Kubernetes on every release the control plane is tested on
(tests/k8s: the newest, 1.37, and the oldest gpu2dra supports, 1.34): the strict JSON schemas
of each (unknown fields are errors, as under `kubectl --validate=strict`), plus the pod-claim
rules the schemas cannot say (tests/support/validation.py).
"""

from __future__ import annotations

import copy
from typing import Any

import kubernetes_validate
import pytest
from hypothesis import HealthCheck, given, settings

from app.core.catalog import Catalog
from app.core.policy import Policy
from app.core.translate import translate
from tests.support.strategies import pod_specs, setups
from tests.support.validation import (
    K8S_VERSIONS,
    claims_checkable,
    is_dns_label,
    is_dns_subdomain,
    pod_claim_errors,
)
from tests.unit.core.translation_cases import CASES, Case

Obj = dict[str, Any]


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
    if claims_checkable(spec) and not pod_claim_errors(spec):
        result = translate(spec, *setup)
        assert pod_claim_errors(result.spec) == []

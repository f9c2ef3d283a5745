"""The validating verdict: ResourceClaimTemplates, ResourceClaims and pods that name a
DeviceClass which does not exist are denied, against an in-memory cluster."""

from __future__ import annotations

import copy

from app.core.resources import DraRequest
from app.webhook.validate import validate
from tests.support.fake import FakeCluster
from tests.support.pods import container
from tests.unit.admission import pod, request, run

V1_TEMPLATE = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaimTemplate",
    "metadata": {"name": "t", "namespace": "ml"},
    "spec": {
        "spec": {
            "devices": {
                "requests": [
                    {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}},
                    {
                        "name": "any",
                        "firstAvailable": [
                            {"name": "big", "deviceClassName": "gpu.nvidia.com"},
                            {"name": "small", "deviceClassName": "nope.example.com"},
                        ],
                    },
                ]
            }
        }
    },
}


def test_template_naming_a_missing_class_is_denied() -> None:
    req = request(V1_TEMPLATE, kind="ResourceClaimTemplate", group="resource.k8s.io")
    assert run(validate(req, FakeCluster())) == {
        "allowed": False,
        "status": {
            "code": 403,
            "message": "ResourceClaimTemplate ml/t: request 'any/small' names DeviceClass "
            "'nope.example.com', which does not exist",
        },
    }


def test_claim_update_is_validated_too() -> None:
    claim = {
        "metadata": {"name": "c"},
        "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gone"}}]}},
    }
    req = request(claim, operation="UPDATE", kind="ResourceClaim", group="resource.k8s.io")
    assert run(validate(req, FakeCluster())) == {
        "allowed": False,
        "status": {
            "code": 403,
            "message": "ResourceClaim ml/c: request 'r' names DeviceClass 'gone', "
            "which does not exist",
        },
    }


def test_valid_template_is_allowed() -> None:
    ok = copy.deepcopy(V1_TEMPLATE)
    del ok["spec"]["spec"]["devices"]["requests"][1]  # type: ignore[index]
    req = request(ok, kind="ResourceClaimTemplate", group="resource.k8s.io")
    assert run(validate(req, FakeCluster())) == {"allowed": True}


def test_pod_referencing_a_bad_template_is_denied() -> None:
    cluster = FakeCluster(templates={("ml", "t"): [DraRequest("gpu", "gone.example.com", 1, ())]})
    obj = pod(
        {
            "resourceClaims": [{"name": "g", "resourceClaimTemplateName": "t"}],
            "containers": [container("c")],
        }
    )
    assert run(validate(request(obj), cluster)) == {
        "allowed": False,
        "status": {
            "code": 403,
            "message": "Pod ml/train-: claim 'g' uses ResourceClaimTemplate 't', whose request "
            "'gpu' names DeviceClass 'gone.example.com', which does not exist",
        },
    }


def test_pod_referencing_a_bad_claim_is_denied() -> None:
    cluster = FakeCluster(claims={("ml", "shared"): [DraRequest("gpu", "gone.example.com", 1, ())]})
    obj = pod(
        {
            "resourceClaims": [{"name": "g", "resourceClaimName": "shared"}],
            "containers": [container("c")],
        }
    )
    assert run(validate(request(obj), cluster)) == {
        "allowed": False,
        "status": {
            "code": 403,
            "message": "Pod ml/train-: claim 'g' uses ResourceClaim 'shared', whose request "
            "'gpu' names DeviceClass 'gone.example.com', which does not exist",
        },
    }


def test_pod_referencing_a_template_not_yet_created_is_allowed_with_warning() -> None:
    obj = pod(
        {
            "resourceClaims": [{"name": "g", "resourceClaimTemplateName": "later"}],
            "containers": [container("c")],
        }
    )
    assert run(validate(request(obj), FakeCluster())) == {
        "allowed": True,
        "warnings": ["claim 'g': ResourceClaimTemplate 'later' does not exist yet"],
    }


def test_delete_is_not_validated() -> None:
    req = request(
        V1_TEMPLATE, operation="DELETE", kind="ResourceClaimTemplate", group="resource.k8s.io"
    )
    assert run(validate(req, FakeCluster())) == {"allowed": True}

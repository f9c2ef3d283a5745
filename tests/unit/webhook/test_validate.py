"""The validating verdict: ResourceClaimTemplates, ResourceClaims and pods that name a
DeviceClass which does not exist are denied, against an in-memory cluster."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from app.core.catalog import Catalog
from app.core.policy import load_policy
from app.core.resources import DraRequest
from app.core.translate import translate
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


# ---- gpu2dra's name space is reserved to gpu2dra's identity -------------------------------

GPU2DRA = "system:serviceaccount:gpu2dra-system:gpu2dra"
WRITERS = frozenset({GPU2DRA, "ops-bot"})


def template(name: str = "gpu2dra-gpu-x1-0123456789", **labels: str) -> Any:
    spec = {
        "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}
    }
    return {"metadata": {"name": name, "namespace": "ml", "labels": labels}, "spec": {"spec": spec}}


def reserved(name: str, what: str, user: str) -> Any:
    """The denial of a template under gpu2dra's name or label to `user` (as repr'd)."""
    return {
        "allowed": False,
        "status": {
            "code": 403,
            "message": f"ResourceClaimTemplate ml/{name}: {what} are reserved to gpu2dra "
            f"(ops-bot, {GPU2DRA}), and {user} is not it: gpu2dra would use such a template for "
            "pods it translates, and this one is not exactly what gpu2dra writes under that name "
            "(as `gpu2dra translate` prints it, which anyone may apply). Choose another name and "
            "label (or ask the cluster admin to add the identity to the chart's "
            "claimTemplates.extraWriters)",
        },
    }


LABEL = "the label app.kubernetes.io/managed-by=gpu2dra"


def by(user: str, obj: Any, operation: str = "CREATE", **extra: Any) -> Any:
    return request(
        obj,
        operation=operation,
        kind="ResourceClaimTemplate",
        group="resource.k8s.io",
        userInfo={"username": user, "groups": ["system:authenticated"]},
        **extra,
    )


@pytest.mark.parametrize(
    ("obj", "carries"),
    [
        (template(), "the name prefix 'gpu2dra-'"),
        (template("mine", **{"app.kubernetes.io/managed-by": "gpu2dra"}), "the label"),
        ({**template(), "metadata": {"generateName": "gpu2dra-", "namespace": "ml"}}, "prefix"),
    ],
)
def test_gpu2dras_prefix_and_label_are_refused_to_others(obj: Any, carries: str) -> None:
    answer = run(validate(by("mallory", obj), FakeCluster(), WRITERS))
    assert not answer["allowed"]
    message = answer["status"]["message"]
    assert carries in message and "reserved to gpu2dra" in message and "'mallory'" in message
    assert GPU2DRA in message


def test_an_update_that_takes_gpu2dras_label_off_is_refused() -> None:
    old = template("mine", **{"app.kubernetes.io/managed-by": "gpu2dra"})
    answer = run(
        validate(by("mallory", template("mine"), "UPDATE", oldObject=old), FakeCluster(), WRITERS)
    )
    assert answer == reserved("mine", LABEL, "'mallory'")


def test_an_update_that_adds_gpu2dras_label_is_refused() -> None:
    new = template("mine", **{"app.kubernetes.io/managed-by": "gpu2dra"})
    answer = run(
        validate(by("mallory", new, "UPDATE", oldObject=template("mine")), FakeCluster(), WRITERS)
    )
    assert answer == reserved("mine", LABEL, "'mallory'")


@pytest.mark.parametrize("user", [GPU2DRA, "ops-bot"])
def test_gpu2dra_and_the_extra_writers_may(user: str) -> None:
    obj = template(**{"app.kubernetes.io/managed-by": "gpu2dra"})
    assert run(validate(by(user, obj), FakeCluster(), WRITERS)) == {"allowed": True}
    assert run(validate(by(user, obj, "UPDATE", oldObject=obj), FakeCluster(), WRITERS)) == {
        "allowed": True
    }


def test_other_templates_are_anyones() -> None:
    assert run(validate(by("mallory", template("mine")), FakeCluster(), WRITERS)) == {
        "allowed": True
    }


def test_nothing_is_reserved_when_no_identity_is_known_to_be_gpu2dra() -> None:
    assert run(validate(by("mallory", template()), FakeCluster())) == {"allowed": True}


def test_a_request_without_a_username_is_refused() -> None:
    req = by("x", template())
    del req["userInfo"]
    assert run(validate(req, FakeCluster(), WRITERS)) == reserved(
        "gpu2dra-gpu-x1-0123456789", "the name prefix 'gpu2dra-'", "None"
    )


def test_an_update_is_not_refused_for_a_device_class_gone_since_create() -> None:
    obj = copy.deepcopy(V1_TEMPLATE)
    req = request(
        obj,
        operation="UPDATE",
        kind="ResourceClaimTemplate",
        group="resource.k8s.io",
        oldObject=obj,
    )
    assert run(validate(req, FakeCluster())) == {"allowed": True}


# ---- a template exactly as gpu2dra writes it is anyone's to apply (GitOps) ---------------


def gpu2dras(gpus: int = 1) -> Any:
    """The template `gpu2dra translate` prints for a pod asking for `gpus` GPUs."""
    policy = load_policy(None)
    spec = {"containers": [container("c", {"nvidia.com/gpu": gpus})]}
    (written,) = translate(spec, policy, Catalog.of(policy.device_classes)).templates
    out = copy.deepcopy(written)
    out["metadata"]["namespace"] = "ml"
    return out


def test_gpu2dras_own_content_is_anyones_to_create_and_reapply() -> None:
    obj = gpu2dras()
    assert run(validate(by("argocd", obj), FakeCluster(), WRITERS)) == {"allowed": True}
    # kubectl apply, Argo CD and Flux add annotations and labels of their own
    applied = copy.deepcopy(obj)
    applied["metadata"]["annotations"] = {"kubectl.kubernetes.io/last-applied-configuration": "{}"}
    applied["metadata"]["labels"] = {**obj["metadata"]["labels"], "argocd.argoproj.io/i": "a"}
    applied["spec"]["metadata"] = {}  # as the API server writes the claims' empty metadata
    answer = run(validate(by("flux", applied, "UPDATE", oldObject=obj), FakeCluster(), WRITERS))
    assert answer == {"allowed": True}


def _changed(obj: Any, how: str) -> Any:
    out = copy.deepcopy(obj)
    exactly = out["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    if how == "count":
        exactly["count"] = 2  # more devices under the one-GPU name
    elif how == "selector":
        exactly["selectors"] = [{"cel": {"expression": "true"}}]
    elif how == "label":
        del out["metadata"]["labels"]["app.kubernetes.io/managed-by"]
    elif how == "name":
        out["metadata"]["name"] = gpu2dras(2)["metadata"]["name"]  # another shape's name
    elif how == "extra":
        out["spec"]["metadata"] = {"labels": {"a": "b"}}  # claims made from it would differ
    return out


@pytest.mark.parametrize("how", ["count", "selector", "label", "name", "extra"])
def test_anything_else_under_gpu2dras_name_is_still_refused(how: str) -> None:
    obj = _changed(gpu2dras(), how)
    answer = run(validate(by("mallory", obj), FakeCluster(), WRITERS))
    assert not answer["allowed"], how
    message = answer["status"]["message"]
    assert "not exactly what gpu2dra writes under that name" in message
    assert "claimTemplates.extraWriters" in message


def test_an_update_that_takes_the_label_off_gpu2dras_content_is_refused() -> None:
    obj = gpu2dras()
    answer = run(
        validate(
            by("mallory", _changed(obj, "label"), "UPDATE", oldObject=obj), FakeCluster(), WRITERS
        )
    )
    assert not answer["allowed"]

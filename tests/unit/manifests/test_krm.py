"""`gpu2dra translate` as a KRM function: a ResourceList in, the same out, the items translated,
the templates they need among them, every warning a result naming its item."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.cli import main
from app.core.catalog import Catalog
from app.core.policy import load_policy
from app.manifests import krm

DEPLOYMENT: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {
        "name": "infer",
        "namespace": "ml",
        "annotations": {
            "config.kubernetes.io/index": "0",
            "internal.config.kubernetes.io/index": "0",
            "internal.config.kubernetes.io/path": "apps/infer.yaml",
            "internal.config.kubernetes.io/id": "1",
            "config.k8s.io/id": "1",
        },
    },
    "spec": {
        "template": {
            "spec": {
                "containers": [
                    {"name": "c", "image": "i", "resources": {"limits": {"nvidia.com/gpu": 1}}}
                ]
            }
        }
    },
}
CLONESET = {
    "apiVersion": "apps.kruise.io/v1alpha1",
    "kind": "CloneSet",
    "metadata": {"name": "cs", "namespace": "ml"},
    "spec": {"template": DEPLOYMENT["spec"]["template"]},
}
SERVICE = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "infer"}}


def _list(*items: Any, data: dict[str, str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "apiVersion": "config.kubernetes.io/v1",
        "kind": "ResourceList",
        "items": list(items),
    }
    if data is not None:
        out["functionConfig"] = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "gpu2dra"},
            "data": data,
        }
    return out


def _run(resource_list: dict[str, Any], *, strict: bool = False) -> tuple[Any, krm.Answer]:
    policy = load_policy(None)
    given = krm.Settings(policy=policy, namespace=None, mode="enabled", strict=strict)
    answer = krm.run(resource_list, given, Catalog.of(policy.device_classes), as_json=False)
    return yaml.safe_load(answer.body), answer


def test_items_are_translated_in_place_and_their_template_added_after_them() -> None:
    out, answer = _run(_list(DEPLOYMENT, SERVICE))
    assert answer.status == 0
    assert (out["apiVersion"], out["kind"]) == ("config.kubernetes.io/v1", "ResourceList")
    deployment, service, template = out["items"]
    assert service == SERVICE
    pod = deployment["spec"]["template"]["spec"]
    assert pod["resourceClaims"][0]["resourceClaimTemplateName"] == template["metadata"]["name"]
    assert (template["kind"], template["metadata"]["namespace"]) == ("ResourceClaimTemplate", "ml")
    # The orchestrator's annotations come back as they went: it maps outputs to inputs by them.
    assert deployment["metadata"] == DEPLOYMENT["metadata"]


def test_each_warning_is_a_result_naming_its_item_and_file() -> None:
    out, _ = _run(_list(DEPLOYMENT, CLONESET))
    by_code = {r["tags"]["gpu2dra.io/code"]: r for r in out["results"]}
    assert by_code["toleration"] == {
        "message": by_code["toleration"]["message"],
        "severity": "info",
        "resourceRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "infer"}
        | {"namespace": "ml"},
        "file": {"path": "apps/infer.yaml", "index": 0},
        "tags": {"gpu2dra.io/code": "toleration"},
    }
    left = by_code["no-rule"]
    assert left["severity"] == "warning"
    assert left["resourceRef"]["kind"] == "CloneSet" and "file" not in left
    assert left["message"].startswith("apps.kruise.io/CloneSet is a kind")


def test_strict_fails_with_an_error_result_for_each_item_left() -> None:
    out, answer = _run(_list(DEPLOYMENT, CLONESET, data={"strict": "true"}))
    assert answer.status == krm.LEFT == 3
    [error] = [r for r in out["results"] if r["severity"] == "error"]
    assert error["resourceRef"]["name"] == "cs" and "(no-rule)" in error["message"]
    assert answer.said[-1] == "gpu2dra: 2 documents: 1 translated, 1 left (no-rule 1), 0 unchanged"
    assert len(out["items"]) == 3  # written all the same


def test_function_config_sets_the_namespace_mode_and_policy() -> None:
    bare = {**DEPLOYMENT, "metadata": {"name": "infer"}}
    out, _ = _run(_list(bare, data={"namespace": "team-a"}))
    assert out["items"][1]["metadata"]["namespace"] == "team-a"
    out, _ = _run(_list(bare, data={"mode": "audit"}))
    assert out["items"] == [bare]
    assert [r["tags"]["gpu2dra.io/code"] for r in out["results"]] == ["would"]
    # A policy of its own: this one names the CloneSet's kind among those translated in place.
    out, _ = _run(_list(CLONESET, data={"policy": "translateKinds: [apps.kruise.io/CloneSet]\n"}))
    assert [i["kind"] for i in out["items"]] == ["CloneSet", "ResourceClaimTemplate"]


@pytest.mark.parametrize(
    ("data", "said"),
    [
        ({"strcit": "true"}, "functionConfig.data: unknown strcit"),
        ({"mode": "on"}, "functionConfig.data.mode must be one of enabled, audit, disabled"),
        ({"strict": "yes"}, 'functionConfig.data.strict must be "true" or "false"'),
        ({"policy": "defaultMode: sometimes\n"}, "functionConfig.data.policy: "),
    ],
)
def test_a_function_config_it_cannot_read_is_an_error_and_the_items_come_back(
    data: dict[str, str], said: str
) -> None:
    out, answer = _run(_list(DEPLOYMENT, data=data))
    assert answer.status == krm.FAILED == 1
    [error] = out["results"]
    assert error["severity"] == "error" and error["message"].startswith(said)
    assert out["items"] == [DEPLOYMENT]


def test_an_item_that_is_no_object_is_an_error() -> None:
    out, answer = _run(_list(DEPLOYMENT, "text"))
    assert answer.status == 1
    assert out["results"] == [
        {"message": "items: document 2: not a Kubernetes object", "severity": "error"}
    ]


def test_its_own_output_comes_back_the_same() -> None:
    """Run twice (two transformers, or kpt's render again), the template is not added twice:
    kustomize refuses a function that returns two objects of one name."""
    once, _ = _run(_list(DEPLOYMENT))
    twice, _ = _run(_list(*once["items"]))
    assert twice["items"] == once["items"]


def test_only_a_resource_list_is_read_as_one() -> None:
    assert krm.read_resource_list(yaml.safe_dump(_list(SERVICE))) == _list(SERVICE)
    beta = {**_list(SERVICE), "apiVersion": "config.kubernetes.io/v1beta1"}
    assert krm.read_resource_list(json.dumps(beta)) == beta
    other = {**_list(SERVICE), "apiVersion": "example.com/v1"}
    assert krm.read_resource_list(yaml.safe_dump(other)) is None
    stream = yaml.safe_dump_all([_list(SERVICE), SERVICE])
    assert krm.read_resource_list(stream) is None
    assert krm.read_resource_list("kind: List\nitems: []\n") is None


def test_translate_answers_a_resource_list_in_kind_json_for_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "in.json"
    path.write_text(json.dumps(_list(DEPLOYMENT)))
    assert main(["translate", "-f", str(path), "-o", "json"]) == 0
    out = capsys.readouterr()
    answer = json.loads(out.out)
    assert answer["kind"] == "ResourceList" and len(answer["items"]) == 2
    assert "warning: document 1 (Deployment infer): toleration" in out.err
    path.write_text(yaml.safe_dump(_list(CLONESET)))
    assert main(["translate", "-f", str(path), "--strict"]) == 3
    assert yaml.safe_load(capsys.readouterr().out)["results"][-1]["severity"] == "error"

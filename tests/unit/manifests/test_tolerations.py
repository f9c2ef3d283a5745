"""Offline translations keep the tolerations the ExtendedResourceToleration admission plugin
gave their pods (app/manifests/tolerations.py); admission and `report` add none."""

from __future__ import annotations

from typing import Any

import pytest

from app.core.catalog import Catalog
from app.core.kube import Obj
from app.core.outcomes import Code
from app.core.policy import Mode, Policy
from app.manifests.documents import Result, translate_documents
from app.manifests.tolerations import plugin_tolerations

GPU = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
MIG = {"key": "nvidia.com/mig-1g.5gb", "operator": "Exists", "effect": "NoSchedule"}
NOTE = (
    "toleration nvidia.com/gpu (operator Exists, effect NoSchedule) added: the "
    "ExtendedResourceToleration admission plugin gives it to pods that ask for nvidia.com/gpu, "
    "which this pod no longer does, and nodes tainted nvidia.com/gpu:NoSchedule take only pods "
    "that tolerate it (drop it where the cluster does not run the plugin)"
)


def container(name: str, limits: Obj) -> Obj:
    return {"name": name, "image": "cuda", "resources": {"limits": limits}}


def pod(*containers: Obj, init: tuple[Obj, ...] = (), **spec: Any) -> Obj:
    body: Obj = {"containers": list(containers), **spec}
    if init:
        body["initContainers"] = list(init)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": body}


def offline(doc: Obj, policy: Policy, catalog: Catalog, mode: Mode = "enabled") -> Result:
    return translate_documents([doc], policy, catalog, namespace="ns", mode=mode, offline=True)


def test_a_translated_pod_gains_the_toleration_and_says_why(
    policy: Policy, catalog: Catalog
) -> None:
    result = offline(pod(container("c", {"nvidia.com/gpu": 1})), policy, catalog)
    spec = result.documents[0]["spec"]
    assert "resourceClaims" in spec and spec["tolerations"] == [GPU]
    (note,) = result.notes
    assert note.text.code is Code.TOLERATION
    assert str(note) == f"document 1 (Pod p): {NOTE}"


def test_tolerations_of_its_own_are_kept_and_the_plugins_appended(
    policy: Policy, catalog: Catalog
) -> None:
    own = {"key": "team", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}
    doc = pod(container("c", {"nvidia.com/gpu": 2}), tolerations=[own])
    assert offline(doc, policy, catalog).documents[0]["spec"]["tolerations"] == [own, GPU]
    assert doc["spec"]["tolerations"] == [own], "the input is never changed"


@pytest.mark.parametrize(
    "already",
    [
        [GPU],
        [{"key": "other", "operator": "Exists"}, {**GPU, "value": ""}],  # value "" is no value
    ],
)
def test_a_pod_with_the_plugins_toleration_gains_none(
    policy: Policy, catalog: Catalog, already: list[Obj]
) -> None:
    doc = pod(container("c", {"nvidia.com/gpu": 1}), tolerations=already)
    result = offline(doc, policy, catalog)
    assert result.documents[0]["spec"]["tolerations"] is already
    assert result.notes == []


@pytest.mark.parametrize(
    "broader",
    [
        {"operator": "Exists"},  # tolerates every taint
        {"key": "nvidia.com/gpu", "operator": "Exists"},  # every effect
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"},
    ],
)
def test_a_broader_or_narrower_toleration_does_not_stop_the_plugin_nor_this(
    policy: Policy, catalog: Catalog, broader: Obj
) -> None:
    # The plugin's AddOrUpdateTolerationInPod matches key, operator, effect and value exactly,
    # so it appends its own beside these; the translation stores what the plugin would have.
    doc = pod(container("c", {"nvidia.com/gpu": 1}), tolerations=[broader])
    assert offline(doc, policy, catalog).documents[0]["spec"]["tolerations"] == [broader, GPU]


def test_init_containers_count(policy: Policy, catalog: Catalog) -> None:
    doc = pod(container("app", {}), init=(container("prep", {"nvidia.com/gpu": 1}),))
    result = offline(doc, policy, catalog)
    assert "nvidia.com/gpu" not in str(result.documents[0]["spec"]["initContainers"])
    assert result.documents[0]["spec"]["tolerations"] == [GPU]
    assert [n.text.code for n in result.notes] == [Code.TOLERATION]


def test_each_resource_removed_gets_its_own_in_order(policy: Policy, catalog: Catalog) -> None:
    doc = pod(
        container("a", {"nvidia.com/mig-1g.5gb": 1}),
        container("b", {"nvidia.com/gpu": 1}),
    )
    result = offline(doc, policy, catalog)
    assert result.documents[0]["spec"]["tolerations"] == [GPU, MIG]
    assert [n.text.split(" (")[0] for n in result.notes] == [
        "toleration nvidia.com/gpu",
        "toleration nvidia.com/mig-1g.5gb",
    ]


def test_a_resource_the_pod_still_asks_for_is_left_to_the_plugin() -> None:
    # Only what the translation removed: example.com/fpga still brings the plugin's own.
    before = {"containers": [container("c", {"nvidia.com/gpu": 1, "example.com/fpga": 1})]}
    after = {"containers": [container("c", {"example.com/fpga": 1})], "resourceClaims": []}
    spec, notes = plugin_tolerations(before, after)
    assert spec["tolerations"] == [GPU] and len(notes) == 1
    # requests count as limits do; native and quota names are no extended resources
    asked = {"requests": {"cpu": 1, "hugepages-2Mi": "2Mi", "kubernetes.io/x": 1}}
    native = {"containers": [{"name": "c", "resources": asked}]}
    assert plugin_tolerations(native, {"containers": [container("c", {})]}) == (
        {"containers": [container("c", {})]},
        [],
    )


def test_tolerations_that_are_no_list_are_left_for_the_api_server_to_refuse() -> None:
    before = {"containers": [container("c", {"nvidia.com/gpu": 1})], "tolerations": "x"}
    after = {**before, "containers": [container("c", {})]}
    assert plugin_tolerations(before, after) == (after, [])


def test_admission_report_and_audit_add_none(policy: Policy, catalog: Catalog) -> None:
    doc = pod(container("c", {"nvidia.com/gpu": 1}))
    # What admission would do (report reads it so): the plugin already ran, or is off.
    at_admission = translate_documents([doc], policy, catalog, namespace="ns", mode="enabled")
    assert "tolerations" not in at_admission.documents[0]["spec"]
    assert at_admission.notes == []
    audit = offline(doc, policy, catalog, "audit")
    assert audit.documents[0] is doc
    assert Code.TOLERATION not in [n.text.code for n in audit.notes]


def test_a_pod_left_on_the_device_plugin_gains_none(policy: Policy, catalog: Catalog) -> None:
    doc = pod(container("c", {"nvidia.com/gpu": 99}))  # more than a claim can hold
    result = offline(doc, policy, catalog)
    assert result.documents[0] is doc
    assert Code.TOLERATION not in [n.text.code for n in result.notes]

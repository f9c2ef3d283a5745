"""The JSON patch of a translation: it touches only what changed; the pod records what it
replaced, and applying its manifest again is a no-op."""

from __future__ import annotations

import asyncio
import base64
import copy
from collections.abc import Coroutine
from typing import Any

import jsonpatch
import orjson
import pytest
from hypothesis import HealthCheck, assume, given, settings

from app.core.patch import (
    ANNOTATIONS_LIMIT,
    RECORD_ANNOTATION,
    patch_ops,
    record,
    record_ops,
    revert_ops,
)
from app.core.policy import Policy
from app.core.translate import translate
from app.webhook.mutate import Mutator
from app.webhook.reviews import Answer
from app.webhook.verdicts import Decision
from tests.support.fake import FakeCluster
from tests.support.pods import PRODUCT_A100, container, gpu
from tests.support.strategies import plausible_pod_specs, setups
from tests.support.validation import pod_errors

Obj = dict[str, Any]
MANIFEST: Obj = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "train", "namespace": "ml", "annotations": {"team": "ml"}},
    "spec": {
        "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB", "zone": "a"},
        "containers": [container("c", {**gpu(2), "cpu": "1"})],
    },
}


@pytest.fixture
def mutate(policy: Policy) -> Mutator:
    return Mutator(policy)


def request(obj: Obj, operation: str = "CREATE", **extra: Any) -> Any:
    kind = {"group": "", "version": "v1", "kind": "Pod"}
    return {"uid": "u", "kind": kind, "operation": operation, "object": obj, **extra}


def run(decision: Decision) -> Answer:
    verdict = asyncio.run(decision) if isinstance(decision, Coroutine) else decision
    return verdict.response


def apply(obj: Obj, response: Answer) -> Obj:
    ops = orjson.loads(base64.b64decode(response["patch"]))
    return jsonpatch.apply_patch(obj, ops)  # type: ignore[no-any-return]


def enabled() -> FakeCluster:
    return FakeCluster(labels={"ml": {"gpu2dra.io/migration": "enabled"}})


def created(mutate: Mutator, manifest: Obj = MANIFEST) -> Obj:
    """The pod as the API server stores it after gpu2dra's patch."""
    response = run(mutate(request(copy.deepcopy(manifest)), enabled()))
    return apply(copy.deepcopy(manifest), response)


def merge(live: Any, applied: Any) -> Any:
    """What kubectl's client-side apply sends back: the manifest's fields over the live pod."""
    if isinstance(live, dict) and isinstance(applied, dict):
        return {**live, **{k: merge(live.get(k), v) for k, v in applied.items()}}
    if isinstance(live, list) and isinstance(applied, list) and all(_named(i) for i in applied):
        named = {i["name"]: i for i in live if _named(i)}  # containers: merged by name
        return [merge(named.get(i["name"]), i) for i in applied]
    return applied


def _named(item: Any) -> bool:
    return isinstance(item, dict) and isinstance(item.get("name"), str)


def update(mutate: Mutator, live: Obj, new: Obj) -> Obj:
    """The object the API server stores after gpu2dra answers the UPDATE."""
    response = run(mutate(request(copy.deepcopy(new), "UPDATE", oldObject=live), FakeCluster()))
    return apply(copy.deepcopy(new), response) if "patch" in response else new


def test_the_pod_records_what_the_patch_replaced(mutate: Mutator) -> None:
    pod = created(mutate)
    recorded = orjson.loads(pod["metadata"]["annotations"][RECORD_ANNOTATION])
    assert recorded == {
        "/spec/containers/0/resources": MANIFEST["spec"]["containers"][0]["resources"],
        "/spec/resourceClaims": None,
        "/spec/nodeSelector": MANIFEST["spec"]["nodeSelector"],
    }
    assert pod["metadata"]["annotations"]["team"] == "ml"


def test_a_pod_without_annotations_gets_the_map(mutate: Mutator) -> None:
    manifest = copy.deepcopy(MANIFEST)
    del manifest["metadata"]["annotations"]
    assert RECORD_ANNOTATION in created(mutate, manifest)["metadata"]["annotations"]


def test_client_side_reapply_is_patched_back(mutate: Mutator) -> None:
    live = created(mutate)
    sent = merge(live, MANIFEST)
    assert sent["spec"] != live["spec"]  # nvidia.com/gpu and the GFD term are back
    assert update(mutate, live, sent) == live


def test_server_side_reapply_is_patched_back(mutate: Mutator) -> None:
    # The manifest's fields over the live pod, and what gpu2dra added, which the manifest
    # lacks, taken away: claims, the record.
    live = created(mutate)
    sent = merge(live, MANIFEST)
    del sent["spec"]["resourceClaims"], sent["spec"]["containers"][0]["resources"]["claims"]
    del sent["metadata"]["annotations"][RECORD_ANNOTATION]
    assert update(mutate, live, sent) == live


@pytest.mark.parametrize(
    "change",
    [
        lambda spec: spec["containers"][0]["resources"]["limits"].update({"cpu": "4"}),
        lambda spec: spec["nodeSelector"].update({"rack": "r1"}),
        lambda spec: spec["containers"][0]["resources"]["limits"].update({"nvidia.com/gpu": "8"}),
    ],
    ids=["a new cpu limit", "a new node term", "another GPU count"],
)
def test_a_real_change_is_left_to_the_api_server(mutate: Mutator, change: Any) -> None:
    live = created(mutate)
    sent = merge(live, MANIFEST)
    change(sent["spec"])
    assert revert_ops(live, sent) is None


def test_an_update_outside_the_translation_is_allowed_as_is(mutate: Mutator) -> None:
    live = created(mutate)
    labelled = copy.deepcopy(live)
    labelled["metadata"]["labels"] = {"new": "label"}
    assert revert_ops(live, labelled) is None
    assert update(mutate, live, labelled) == labelled


@pytest.mark.parametrize("value", ["not json", "[]", '{"/metadata/name": null}', "{}"])
def test_an_unreadable_record_changes_nothing(mutate: Mutator, value: str) -> None:
    live = created(mutate)
    live["metadata"]["annotations"][RECORD_ANNOTATION] = value
    assert revert_ops(live, merge(live, MANIFEST)) is None


def test_a_pod_gpu2dra_did_not_translate_is_not_patched(mutate: Mutator) -> None:
    assert revert_ops(MANIFEST, merge(MANIFEST, {"spec": {"nodeSelector": {}}})) is None


def test_no_room_for_the_record_is_said(policy: Policy) -> None:
    manifest = copy.deepcopy(MANIFEST)
    manifest["metadata"]["annotations"]["big"] = "x" * (ANNOTATIONS_LIMIT - 100)
    response = run(Mutator(policy)(request(manifest), enabled()))
    assert any("no room for gpu2dra.io/translated-from" in w for w in response["warnings"])
    pod = apply(manifest, response)
    assert RECORD_ANNOTATION not in pod["metadata"]["annotations"]
    assert "resourceClaims" in pod["spec"]


def strip_added(sent: Any, manifest: Any) -> Any:
    """Server-side apply's side: what the manifest does not name (gpu2dra's additions, which
    its field manager came to own) dropped."""
    if isinstance(sent, dict) and isinstance(manifest, dict):
        return {k: strip_added(v, manifest[k]) for k, v in sent.items() if k in manifest}
    if isinstance(sent, list) and isinstance(manifest, list) and len(sent) == len(manifest):
        return [strip_added(a, b) for a, b in zip(sent, manifest, strict=True)]
    return sent


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=plausible_pod_specs(), setup=setups)
def test_any_reapplied_translation_is_patched_back(spec: Obj, setup: Any) -> None:
    """For random pods: the manifest applied again over the translated pod, client-side
    (merged) or server-side (merged, gpu2dra's additions dropped), comes back as the pod."""
    policy, catalog = setup
    translation = translate(spec, policy, catalog)
    assume(translation.changed)
    manifest = {"metadata": {"name": "p"}, "spec": spec}
    assume(not pod_errors(manifest))  # only a pod the API server took is applied again
    ops = [*patch_ops(spec, translation), *record_ops(record(spec, translation.touched), False)]
    live = jsonpatch.apply_patch(manifest, ops, in_place=False)
    for sent in (merge(live, manifest), strip_added(merge(live, manifest), manifest)):
        reverted = revert_ops(live, sent)
        if sent["spec"] == live["spec"]:
            continue  # nothing brought back: nothing to do
        assert reverted is not None, sent
        assert jsonpatch.apply_patch(sent, reverted, in_place=False)["spec"] == live["spec"]


@pytest.mark.parametrize("metadata", [[], "x", {"annotations": []}, {"annotations": None}])
def test_odd_metadata_is_no_record(mutate: Mutator, metadata: Any) -> None:
    live = created(mutate)
    assert revert_ops({**live, "metadata": metadata}, merge(live, MANIFEST)) is None
    # an update whose own metadata is odd still gets the translation back, the record only
    # where there is a metadata map to hold it
    ops = revert_ops(live, {**merge(live, MANIFEST), "metadata": metadata})
    assert ops is not None
    assert all(op["path"].startswith("/spec/") for op in ops) == (not isinstance(metadata, dict))


def test_patch_touches_only_what_changed(policy: Policy) -> None:
    spec = {
        "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"},
        "containers": [container("a", {"cpu": "1"}), container("b", gpu(1))],
        "volumes": [{"name": "v"}],
    }
    t = translate(spec, policy, FakeCluster().catalog)
    ops = patch_ops(spec, t)
    assert [(o["op"], o["path"]) for o in ops] == [
        ("replace", "/spec/containers/1/resources"),
        ("add", "/spec/resourceClaims"),
        ("remove", "/spec/nodeSelector"),
    ]
    assert jsonpatch.apply_patch({"spec": spec}, ops) == {"spec": t.spec}
    assert t.templates[0]["spec"]["spec"]["devices"]["requests"][0]["exactly"]["selectors"] == [
        {"cel": {"expression": PRODUCT_A100}}
    ]


def test_a_shared_pods_reapply_is_patched_back() -> None:
    """HAMi's gpumem goes with the GPU into a claim on a shared device, and comes back on a
    re-apply: both are patched away again."""
    from app.core.policy import parse_policy

    consumable = {"shares": 1, "memory": "nvidia.com/gpumem"}
    mapping = {"deviceClassName": "gpu.nvidia.com", "consumable": consumable}
    mutate = Mutator(parse_policy({"mappings": {"nvidia.com/gpu": mapping}}))
    manifest = copy.deepcopy(MANIFEST)
    manifest["spec"]["nodeSelector"] = {"nvidia.com/gpu.product": "Tesla-T4-SHARED"}
    manifest["spec"]["containers"] = [
        container("c", {**gpu(1), "nvidia.com/gpumem": 3000, "cpu": "1"})
    ]
    live = created(mutate, manifest)
    assert live["spec"]["containers"][0]["resources"]["limits"] == {"cpu": "1"}
    sent = merge(live, manifest)
    assert update(mutate, live, sent) == live

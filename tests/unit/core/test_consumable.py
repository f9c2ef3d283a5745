"""Shared GPUs as consumable capacity: time-sliced replicas become shares, HAMi's memory
fractions become memory, only where the cluster's drivers publish shared devices."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.core.catalog import Catalog, sharing_of, slice_sharing
from app.core.outcomes import Code, codes
from app.core.policy import Policy, load_policy, parse_policy
from app.core.translate import describe, translate
from tests.support.pods import GPU, Obj, container, gpu
from tests.support.validation import schema_errors

PRODUCT = "nvidia.com/gpu.product"
T4 = "device.attributes['gpu.nvidia.com'].productName.replace(' ', '-') == 'Tesla-T4'"
HAS_SHARES = "'shares' in device.capacity['gpu.nvidia.com']"
HAS_MEMORY = "device.allowMultipleAllocations && 'memory' in device.capacity['gpu.nvidia.com']"
SHARED_T4 = {PRODUCT: "Tesla-T4-SHARED", "nvidia.com/gpu.replicas": "4"}
EVERYWHERE = {"gpu.nvidia.com": frozenset({"", "shares", "memory"})}


def policy_with(consumable: Any = None, **mapping: Any) -> Policy:
    body: Obj = {"deviceClassName": GPU, **mapping}
    if consumable is not None:
        body["consumable"] = consumable
    return parse_policy({"mappings": {"nvidia.com/gpu": body}})


SHARES = policy_with({"shares": 1})
SHARES_2 = policy_with({"shares": 2})
MEMORY = policy_with({"shares": 1, "memory": "nvidia.com/gpumem"})
SHARED_RESOURCE = parse_policy(
    {"mappings": {"nvidia.com/gpu.shared": {"deviceClassName": GPU, "consumable": {}}}}
)


@dataclass
class Case:
    id: str
    spec: Obj
    policy: Policy
    # (count, selectors, capacity requests) of the one request; None: the pod is left
    request: tuple[int, tuple[str, ...], dict[str, str]] | None
    codes: tuple[Code, ...]
    sharing: dict[str, frozenset[str]] | None = field(default_factory=lambda: EVERYWHERE)
    removed: tuple[str, ...] = ("nvidia.com/gpu",)  # keys gone from the container's limits


CASES = [
    Case(
        "a -SHARED product: one replica is one share of a T4 that allows several claims",
        {"nodeSelector": SHARED_T4, "containers": [container("c", gpu(1))]},
        SHARES,
        (1, (T4, HAS_SHARES), {"shares": "1"}),
        (Code.CONSUMABLE,),
    ),
    Case(
        "a replica takes the shares the policy says (driver shares twice the replicas)",
        {"nodeSelector": SHARED_T4, "containers": [container("c", gpu(1))]},
        SHARES_2,
        (1, (T4, HAS_SHARES), {"shares": "2"}),
        (Code.CONSUMABLE,),
    ),
    Case(
        "a sharing strategy in an affinity picks shared GPUs too",
        {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {
                                        "key": "nvidia.com/gpu.sharing-strategy",
                                        "operator": "In",
                                        "values": ["time-slicing"],
                                    }
                                ]
                            }
                        ]
                    }
                }
            },
            "containers": [container("c", gpu(1))],
        },
        SHARES,
        (1, (HAS_SHARES,), {"shares": "1"}),
        (Code.CONSUMABLE,),
    ),
    Case(
        "renamed replicas (nvidia.com/gpu.shared) mapped with consumable",
        {"containers": [container("c", {"nvidia.com/gpu.shared": 1})]},
        SHARED_RESOURCE,
        (1, (HAS_SHARES,), {"shares": "1"}),
        (Code.CONSUMABLE,),
        removed=("nvidia.com/gpu.shared",),
    ),
    Case(
        "N replicas: one GPU or several under the device plugin, neither under DRA: left",
        {"nodeSelector": SHARED_T4, "containers": [container("c", gpu(2))]},
        SHARES,
        None,
        (Code.SHARED_COUNT,),
    ),
    Case(
        "the cluster publishes no shared device: left, saying what to configure",
        {"nodeSelector": SHARED_T4, "containers": [container("c", gpu(1))]},
        SHARES,
        None,
        (Code.NOT_SHARING,),
        sharing={},
    ),
    Case(
        "the driver shares memory only (--consumable-shares=memory): time-sliced pods stay",
        {"nodeSelector": SHARED_T4, "containers": [container("c", gpu(1))]},
        SHARES,
        None,
        (Code.NOT_SHARING,),
        sharing={"gpu.nvidia.com": frozenset({"", "memory"})},
    ),
    Case(
        "another driver's shares are not this driver's",
        {"nodeSelector": SHARED_T4, "containers": [container("c", gpu(1))]},
        SHARES,
        None,
        (Code.NOT_SHARING,),
        sharing={"gpu.example.com": frozenset({"", "shares"})},
    ),
    Case(
        "shares: none leaves time-sliced pods as before",
        {"nodeSelector": SHARED_T4, "containers": [container("c", gpu(1))]},
        policy_with({"shares": "none", "memory": "nvidia.com/gpumem"}),
        None,
        (Code.SHARED_NODES,),
    ),
    Case(
        "not shared: a whole GPU stays a whole GPU under a consumable mapping",
        {"containers": [container("c", gpu(1))]},
        SHARES,
        (1, (), {}),
        (),
        sharing={},
    ),
    Case(
        "HAMi memory: each of 2 GPUs gives 4000 MiB, on devices whose memory is consumable",
        {"containers": [container("c", {**gpu(2), "nvidia.com/gpumem": 4000})]},
        MEMORY,
        (2, (HAS_MEMORY,), {"memory": "4000Mi"}),
        (Code.CONSUMABLE,),
        removed=("nvidia.com/gpu", "nvidia.com/gpumem"),
    ),
    Case(
        "HAMi memory on a time-sliced node: both capacities",
        {
            "nodeSelector": SHARED_T4,
            "containers": [container("c", {**gpu(1), "nvidia.com/gpumem": "2048"})],
        },
        MEMORY,
        (1, (T4, HAS_SHARES, HAS_MEMORY), {"memory": "2048Mi", "shares": "1"}),
        (Code.CONSUMABLE,),
        removed=("nvidia.com/gpu", "nvidia.com/gpumem"),
    ),
    Case(
        "HAMi memory where memory is not consumable: left",
        {"containers": [container("c", {**gpu(1), "nvidia.com/gpumem": 4000})]},
        MEMORY,
        None,
        (Code.NOT_SHARING,),
        sharing={"gpu.nvidia.com": frozenset({""})},
    ),
    Case(
        "HAMi memory without a mapping that reads it: left, naming it",
        {"containers": [container("c", {**gpu(1), "nvidia.com/gpumem": 4000})]},
        SHARES,
        None,
        (Code.VENDOR_RESOURCE,),
    ),
    Case(
        "gpumem-percentage and gpucores have no equivalent: left, naming them",
        {
            "containers": [
                container(
                    "c",
                    {
                        **gpu(1),
                        "nvidia.com/gpumem": 4000,
                        "nvidia.com/gpumem-percentage": 50,
                        "nvidia.com/gpucores": 30,
                    },
                )
            ]
        },
        MEMORY,
        None,
        (Code.VENDOR_RESOURCE,),
    ),
    Case(
        "a memory amount that is no whole MiB: left",
        {"containers": [container("c", {**gpu(1), "nvidia.com/gpumem": "1.5"})]},
        MEMORY,
        None,
        (Code.MEMORY_AMOUNT,),
    ),
    Case(
        "a memory request apart from its limit: left",
        {
            "containers": [
                container(
                    "c",
                    {**gpu(1), "nvidia.com/gpumem": 4000},
                    {**gpu(1), "nvidia.com/gpumem": 2000},
                )
            ]
        },
        MEMORY,
        None,
        (Code.MEMORY_AMOUNT,),
    ),
    Case(
        "memory without a GPU in its container: left as before",
        {"containers": [container("c", gpu(1)), container("d", {"nvidia.com/gpumem": 4000})]},
        MEMORY,
        None,
        (Code.VENDOR_RESOURCE,),
    ),
    Case(
        "offline (the cluster unknown): translated as the policy says",
        {"nodeSelector": SHARED_T4, "containers": [container("c", gpu(1))]},
        SHARES,
        (1, (T4, HAS_SHARES), {"shares": "1"}),
        (Code.CONSUMABLE,),
        sharing=None,
    ),
]


def _catalog(sharing: dict[str, frozenset[str]] | None) -> Catalog:
    return replace(Catalog.of([GPU]), sharing=sharing)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_consumable(case: Case) -> None:
    catalog = _catalog(case.sharing)
    before = copy.deepcopy(case.spec)
    result = translate(case.spec, case.policy, catalog)
    assert case.spec == before
    assert codes(result.warnings) == case.codes, result.warnings
    if case.request is None:
        assert not result.changed and result.spec is case.spec
        return
    (template,) = result.templates
    (request,) = template["spec"]["spec"]["devices"]["requests"]
    exactly = request["exactly"]
    count, selectors, capacity = case.request
    assert exactly["count"] == count
    assert tuple(s["cel"]["expression"] for s in exactly.get("selectors", [])) == selectors
    assert exactly.get("capacity", {}).get("requests", {}) == capacity
    assert "config" not in template["spec"]["spec"]["devices"], "no opaque sharing config"
    limits = result.spec["containers"][0]["resources"].get("limits", {})
    assert not set(case.removed) & set(limits)
    assert "nodeSelector" not in result.spec, "GFD's sharing labels ask nothing of a device"
    named = {**template, "metadata": {**template["metadata"], "namespace": "ml"}}
    assert schema_errors(named) == set(), "valid under the strict 1.34 and 1.37 schemas"
    assert not translate(result.spec, case.policy, catalog).changed
    if capacity:
        assert "taking " in describe(case.spec, result)


def test_init_container_reuses_the_shared_claim() -> None:
    spec = {
        "nodeSelector": SHARED_T4,
        "initContainers": [container("i", gpu(1))],
        "containers": [container("c", gpu(1))],
    }
    result = translate(spec, SHARES, _catalog(EVERYWHERE))
    assert len(result.spec["resourceClaims"]) == 1
    assert result.spec["initContainers"][0]["resources"]["claims"] == [{"name": "c-gpu"}]


def test_policy_consumable_shape() -> None:
    mapping = MEMORY.mapping_for("nvidia.com/gpu")[0]  # type: ignore[index]
    assert mapping.consumable is not None
    assert (mapping.consumable.shares, mapping.consumable.memory) == (1, "nvidia.com/gpumem")
    assert mapping.consumable.driver == "gpu.nvidia.com" and mapping.takes_shares
    assert load_policy(None).mapping_for("nvidia.com/gpu")[0].consumable is None  # type: ignore[index]


@pytest.mark.parametrize(
    ("mapping", "error"),
    [
        ({"consumable": {"shares": 0}}, "shares"),
        ({"consumable": {"shares": True}}, "shares"),
        ({"consumable": {"memory": "gpumem"}}, "memory"),
        ({"consumable": {"memory": "nvidia.com/gpu"}}, "the GPU itself"),
        ({"consumable": {"shares": "none"}}, "nothing to share"),
        ({"consumable": {"other": 1}}, "unknown field"),
        ({"consumable": [1]}, "must be a map"),
        ({"consumable": {}, "sharing": "TimeSlicing"}, "not both"),
        ({"consumable": {}, "nodeLabels": "mig"}, "whole-GPU"),
    ],
)
def test_policy_consumable_errors(mapping: Obj, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        parse_policy({"mappings": {"nvidia.com/gpu": {"deviceClassName": GPU, **mapping}}})


def _slice(driver: str, *devices: Obj) -> Obj:
    return {"spec": {"driver": driver, "pool": {"name": "n"}, "devices": list(devices)}}


def test_a_slice_says_which_capacities_its_shared_devices_publish() -> None:
    shared = {
        "name": "gpu-0",
        "allowMultipleAllocations": True,
        "capacity": {"shares": {"value": "4"}, "gpu.nvidia.com/memory": {"value": "16Gi"}},
    }
    whole = {"name": "gpu-1", "capacity": {"memory": {"value": "16Gi"}}}
    assert slice_sharing(_slice(GPU, shared, whole)) == (GPU, frozenset({"", "shares", "memory"}))
    assert slice_sharing(_slice(GPU, whole)) == ("", frozenset())
    assert slice_sharing({"spec": None}) == ("", frozenset())
    merged = sharing_of([slice_sharing(_slice(GPU, shared)), ("", frozenset())])
    assert merged == {GPU: frozenset({"", "shares", "memory"})}


@given(count=st.integers(1, 32), mib=st.integers(1, 2**20), shared=st.booleans())
def test_claims_count_the_devices_the_device_plugin_counted(
    count: int, mib: int, shared: bool
) -> None:
    """Whatever a container asks for, a translated claim counts the devices it asked for,
    as requests.nvidia.com/gpu did: the quota of the DRA side sees what the legacy side saw."""
    spec: Obj = {"containers": [container("c", {**gpu(count), "nvidia.com/gpumem": mib})]}
    if shared:
        spec["nodeSelector"] = SHARED_T4
    result = translate(spec, MEMORY, _catalog(EVERYWHERE))
    if shared and count > 1:
        assert codes(result.warnings) == (Code.SHARED_COUNT,)
        return
    assert result.changed
    counted = sum(
        r["exactly"]["count"]
        for t in result.templates
        for r in t["spec"]["spec"]["devices"]["requests"]
    )
    assert counted == count

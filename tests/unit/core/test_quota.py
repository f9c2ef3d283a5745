"""Quota: translating a pod never lets its namespace escape a GPU quota (the pure decision, the
admission verdict, the DRA-side quota `gpu2dra quota` prints)."""

from __future__ import annotations

import copy
from dataclasses import replace
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.catalog import Catalog
from app.core.policy import Policy, load_policy, parse_policy
from app.core.quota import Quota, namespace_uses, unguarded
from app.core.resources import legacy_devices
from app.core.translate import translate
from app.webhook.mutate import Mutator
from app.webhook.verdicts import Verdict
from tests.support.fake import FakeCluster
from tests.support.pods import container, gpu
from tests.support.reviews import translated
from tests.support.strategies import TRANSLATED, pod_specs
from tests.unit.admission import apply, patched, pod, request, run

Obj = dict[str, Any]
GPU, MIG = "nvidia.com/gpu", "nvidia.com/mig-1g.10gb"
GPU_DEVICES = "gpu.nvidia.com.deviceclass.resource.k8s.io/devices"
MIG_DEVICES = "mig.nvidia.com.deviceclass.resource.k8s.io/devices"
PLAIN = Catalog.of(["gpu.nvidia.com", "mig.nvidia.com"])
KEP5004 = Catalog(MappingProxyType({"gpu.nvidia.com": GPU, "mig.nvidia.com": None}))


def q(name: str, **hard: str) -> Quota:
    """`requests_nvidia_com__gpu` -> `requests.nvidia.com/gpu`."""
    return Quota(name, {k.replace("__", "/").replace("_", "."): v for k, v in hard.items()})


def quotas(*keys: str, name: str = "gpus") -> list[Quota]:
    return [Quota(name, dict.fromkeys(keys, "4"))]


@pytest.mark.parametrize(
    ("uses", "found", "catalog", "lifted", "why"),
    [
        ([(GPU, "gpu.nvidia.com")], [], PLAIN, [], "no quota at all"),
        ([(GPU, "gpu.nvidia.com")], quotas("requests.cpu"), PLAIN, [], "no GPU quota"),
        ([(GPU, "gpu.nvidia.com")], quotas(f"requests.{GPU}"), PLAIN, [GPU], "lifted"),
        ([(GPU, "gpu.nvidia.com")], quotas(f"limits.{GPU}"), PLAIN, [GPU], "limits. too"),
        ([(GPU, "gpu.nvidia.com")], quotas(GPU), PLAIN, [], "bare name: not a request quota"),
        (
            [(GPU, "gpu.nvidia.com")],
            quotas(f"requests.{GPU}", GPU_DEVICES),
            PLAIN,
            [],
            "DRA side limited in the same quota",
        ),
        (
            [(GPU, "gpu.nvidia.com")],
            [*quotas(f"requests.{GPU}"), *quotas(GPU_DEVICES, name="dra")],
            PLAIN,
            [],
            "DRA side limited in another quota",
        ),
        (
            [(GPU, "gpu.nvidia.com")],
            quotas(f"requests.{GPU}", MIG_DEVICES),
            PLAIN,
            [GPU],
            "another class's limit does not count",
        ),
        (
            [(GPU, "gpu.nvidia.com")],
            quotas(f"requests.{GPU}"),
            KEP5004,
            [],
            "KEP-5004 served: claims count against requests.nvidia.com/gpu",
        ),
        (
            [(MIG, "mig.nvidia.com")],
            quotas(f"requests.{MIG}"),
            KEP5004,
            [MIG],
            "the other class carries no extendedResourceName",
        ),
        (
            [(GPU, "gpu.nvidia.com"), (MIG, "mig.nvidia.com")],
            quotas(f"requests.{MIG}", GPU_DEVICES),
            PLAIN,
            [MIG],
            "only the unguarded one",
        ),
        ([(GPU, "gpu.nvidia.com")], quotas(f"requests.{MIG}"), PLAIN, [], "other resource"),
    ],
)
def test_what_translation_would_lift(
    uses: list[tuple[str, str]],
    found: list[Quota],
    catalog: Catalog,
    lifted: list[str],
    why: str,
) -> None:
    assert [u.resource for u in unguarded(uses, found, catalog)] == lifted, why


def test_uses_are_what_the_translation_took_off(policy: Policy) -> None:
    spec = {
        "containers": [
            container("a", gpu(1)),
            container("b", {MIG: 1}),
        ]
    }
    t = translate(spec, policy, PLAIN)
    assert t.uses == ((GPU, "gpu.nvidia.com"), (MIG, "mig.nvidia.com"))
    # one container left leaves the pod, and so it uses nothing of DRA
    left = {"containers": [*spec["containers"], container("c", {GPU: 1}, {GPU: 2})]}
    assert translate(left, policy, PLAIN).uses == ()


def test_namespace_uses_are_the_limited_mapped_resources(policy: Policy) -> None:
    found = [
        q("a", requests_nvidia_com__gpu="2", requests_cpu="8"),
        Quota("b", {"limits.nvidia.com/mig-2g.20gb": "1"}),
    ]
    assert namespace_uses(found, policy) == (
        (GPU, "gpu.nvidia.com"),
        ("nvidia.com/mig-2g.20gb", "mig.nvidia.com"),
    )


# ---- admission -------------------------------------------------------------------------------


def cluster(mode: str, *found: Quota, catalog: Catalog = PLAIN) -> FakeCluster:
    return FakeCluster(
        catalog=catalog,
        labels={"ml": {"gpu2dra.io/migration": mode}},
        quotas={"ml": list(found)},
    )


def test_a_pod_under_a_legacy_quota_stays_on_the_device_plugin(policy: Policy) -> None:
    fake = cluster("enabled", *quotas(f"requests.{GPU}", "requests.cpu", name="team-gpus"))
    mutator = Mutator(policy)
    verdict = mutator(request(pod()), fake)
    assert isinstance(verdict, Verdict)  # answered without awaiting anything
    assert verdict.result == "quota"
    response = run(verdict)
    assert response["allowed"] and "patch" not in response and fake.created == []
    (warning,) = response["warnings"]
    assert warning == (
        "gpu2dra left the pod on the device plugin, under its quota: ResourceQuota team-gpus "
        "limits requests.nvidia.com/gpu and no quota limits "
        f"{GPU_DEVICES}, so its DRA claims would escape the quota; to translate such "
        "pods, limit the DRA side too: gpu2dra quota -n ml | kubectl apply -f -"
    )


def test_audit_says_the_same(policy: Policy) -> None:
    response = run(Mutator(policy)(request(pod()), cluster("audit", *quotas(f"requests.{GPU}"))))
    assert "patch" not in response and "auditAnnotations" not in response
    (warning,) = response["warnings"]
    assert warning.startswith("gpu2dra audit: would not translate: gpu2dra left the pod")
    assert "gpu2dra quota -n ml | kubectl apply -f -" in warning


@pytest.mark.parametrize(
    ("found", "catalog"),
    [
        (quotas(f"requests.{GPU}", GPU_DEVICES), PLAIN),
        (quotas(f"requests.{GPU}"), KEP5004),
        (quotas("requests.cpu"), PLAIN),
    ],
)
def test_a_guarded_quota_lets_the_pod_be_translated(
    policy: Policy, found: list[Quota], catalog: Catalog
) -> None:
    # A mapping that translates even where the class serves the resource in-tree: else the
    # pod is left to the in-tree path, whose claims count against the legacy quota anyway.
    (gpu, *rest) = policy.mappings
    policy = replace(policy, mappings=(replace(gpu, in_tree="translate"), *rest))
    response = run(Mutator(policy)(request(pod()), cluster("enabled", *found, catalog=catalog)))
    assert patched(pod(), response) == translated(pod(), policy, catalog)


def test_the_memo_does_not_carry_a_namespace_decision(policy: Policy) -> None:
    mutator = Mutator(policy)
    expected = translated(pod(), policy, PLAIN)
    assert patched(pod(), run(mutator(request(pod()), cluster("enabled")))) == expected
    assert "patch" not in run(
        mutator(request(pod()), cluster("enabled", *quotas(f"requests.{GPU}")))
    )
    assert patched(pod(), run(mutator(request(pod()), cluster("enabled")))) == expected


LEGACY_KEYS = [f"{p}{r}" for p in ("requests.", "limits.") for r in TRANSLATED]


@settings(max_examples=200, deadline=None)
@given(
    spec=pod_specs,
    keys=st.lists(st.sampled_from([*LEGACY_KEYS, GPU_DEVICES, MIG_DEVICES, "requests.cpu"])),
)
def test_translation_never_lifts_an_unmatched_legacy_quota(spec: Obj, keys: list[str]) -> None:
    policy = load_policy(None)
    fake = cluster("enabled", Quota("q", dict.fromkeys(keys, "1")))
    obj = pod(copy.deepcopy(spec))
    response = run(Mutator(policy)(request(obj), fake))
    if "patch" not in response:
        return
    before = legacy_devices(obj["spec"], policy)
    after = legacy_devices(apply(copy.deepcopy(obj), response)["spec"], policy)
    for resource, devices in before.items():
        hit = policy.mapping_for(resource)
        assert hit is not None
        limited = {f"requests.{resource}", f"limits.{resource}"} & set(keys)
        guarded = f"{hit[0].device_class}.deviceclass.resource.k8s.io/devices" in keys
        if limited and not guarded:
            assert after.get(resource, 0) == devices, (resource, keys)


# ---- shared devices (consumable capacity) ---------------------------------------------------

GPUMEM = "nvidia.com/gpumem"
SHARING = parse_policy(
    {
        "mappings": {
            GPU: {
                "deviceClassName": "gpu.nvidia.com",
                "inTree": "translate",
                "consumable": {"shares": 1, "memory": GPUMEM},
            }
        }
    }
)
SHARED_NODE = {"nvidia.com/gpu.product": "Tesla-T4-SHARED"}


def test_a_resource_that_becomes_capacity_is_lifted_by_any_legacy_quota_on_it() -> None:
    found = quotas(f"requests.{GPUMEM}", f"requests.{GPU}", GPU_DEVICES)
    (lifted,) = unguarded([(GPU, "gpu.nvidia.com")], found, PLAIN, [GPUMEM])
    assert (lifted.resource, lifted.device_class) == (GPUMEM, "")
    assert unguarded([(GPU, "gpu.nvidia.com")], found, PLAIN) == ()
    assert unguarded([], quotas("requests.cpu"), PLAIN, [GPUMEM]) == ()


def test_a_time_sliced_pod_counts_one_device_as_it_counted_one_replica() -> None:
    spec = {"nodeSelector": SHARED_NODE, "containers": [container("c", gpu(1))]}
    t = translate(spec, SHARING, PLAIN)
    assert t.uses == ((GPU, "gpu.nvidia.com"),) and t.capacities == ()
    assert legacy_devices(spec, SHARING) == {GPU: 1}
    (template,) = t.templates
    (req,) = template["spec"]["spec"]["devices"]["requests"]
    assert req["exactly"]["count"] == 1, "counted under gpu.nvidia.com's devices as 1"
    guarded = cluster("enabled", *quotas(f"requests.{GPU}", GPU_DEVICES))
    response = run(Mutator(SHARING)(request(pod(spec)), guarded))
    assert "patch" in response and response["warnings"] == list(t.warnings)
    unguarded_ns = cluster("enabled", *quotas(f"requests.{GPU}"))
    assert "patch" not in run(Mutator(SHARING)(request(pod(spec)), unguarded_ns))


def test_a_memory_fraction_under_a_memory_quota_stays_on_the_device_plugin() -> None:
    spec = {"containers": [container("c", {**gpu(1), GPUMEM: 4000})]}
    assert translate(spec, SHARING, PLAIN).capacities == (GPUMEM,)
    fake = cluster("enabled", *quotas(f"requests.{GPUMEM}", GPU_DEVICES, name="mem"))
    verdict = Mutator(SHARING)(request(pod(spec)), fake)
    assert isinstance(verdict, Verdict) and verdict.result == "quota"
    (warning,) = run(verdict)["warnings"]
    assert "limits requests.nvidia.com/gpumem, which becomes DRA consumable capacity" in warning
    free = cluster("enabled", *quotas(f"requests.{GPU}", GPU_DEVICES))
    assert "patch" in run(Mutator(SHARING)(request(pod(spec)), free))

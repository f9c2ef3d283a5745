"""Properties of `translate` over random pod specs (tests/support/strategies.py), valid and
malformed alike."""

from __future__ import annotations

import copy
import re
from collections import Counter
from collections.abc import Callable
from typing import Any

import jsonpatch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from app.core.catalog import Catalog
from app.core.kube import is_dns_label
from app.core.names import request_name
from app.core.patch import patch_ops
from app.core.policy import MODE_LABEL, Policy
from app.core.resources import legacy_devices, parse_count
from app.core.translate import Translation, translate
from app.diagnose.explain.explain import explain
from app.diagnose.explain.facts import PodFacts
from app.diagnose.report.report import report_row
from app.manifests.podspecs import is_pod_spec
from tests.support.strategies import ANY_SLICE, DEFAULT_POLICY, MEMORY, SHARED, pod_specs, setups

Obj = dict[str, Any]

PROPERTY_SETTINGS = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)

_DEFAULT_SETUP = (DEFAULT_POLICY, Catalog.of(DEFAULT_POLICY.device_classes))


def _gpu(name: str, n: int = 1, **extra: Any) -> Obj:
    return {
        "name": name,
        "image": "cuda:12",
        "resources": {"limits": {"nvidia.com/gpu": n}},
        **extra,
    }


# Bugs hypothesis found in app/translate.py and app/gfd.py (shrunk, then trimmed by hand):
# every property checks each of them on every run.
REGRESSIONS: list[tuple[Obj, tuple[Policy, Catalog]]] = [
    # A pod claim whose name is a list: `taken` was a set comprehension over raw names.
    ({"containers": [_gpu("a", 0)], "resourceClaims": [{"name": []}]}, _DEFAULT_SETUP),
    # `command: true` in a translated container: [*(command or [])] raised TypeError.
    ({"containers": [_gpu("a", command=True)]}, _DEFAULT_SETUP),
    # A dangling reference to the name gpu2dra then gave its own claim: container 0 (or an
    # init container) silently started to share the GPU of container 1.
    (
        {
            "containers": [
                {"name": "b", "image": "x", "resources": {"claims": [{"name": "a-gpu"}]}},
                _gpu("a"),
            ]
        },
        _DEFAULT_SETUP,
    ),
    # GFD memory "²": str.isdigit() is true, int() raises ValueError.
    ({"nodeSelector": {MEMORY: "²"}, "containers": [_gpu("a")]}, _DEFAULT_SETUP),
    # Two resources of one shape in a regular init container (a policy mapping
    # nvidia.com/gpu.shared to GPUs) both reused the same app claim: the container named it
    # twice (an invalid pod) and got 1 device for 2.
    (
        {
            "initContainers": [
                {
                    "name": "init",
                    "image": "x",
                    "resources": {"limits": {"nvidia.com/gpu": 1, "nvidia.com/gpu.shared": 1}},
                }
            ],
            "containers": [_gpu("a")],
        },
        (SHARED, Catalog.of(SHARED.device_classes)),
    ),
]


def property_test(test: Callable[[Obj, tuple[Policy, Catalog]], None]) -> Callable[..., None]:
    """Run `test` on random pods and on every regression."""
    for spec, setup in REGRESSIONS:
        test = example(spec=spec, setup=setup)(test)
    return PROPERTY_SETTINGS(given(spec=pod_specs, setup=setups)(test))


# ---- helpers -----------------------------------------------------------------------------

Where = tuple[str, int]
_MIG = re.compile(r"nvidia\.com/mig-.+(?<!\.shared)")  # a MIG profile, not shared replicas


def _containers(spec: Obj) -> list[tuple[Where, Obj]]:
    out = []
    for field in ("containers", "initContainers"):
        items = spec.get(field)
        if isinstance(items, list):
            out += [((field, i), c) for i, c in enumerate(items) if isinstance(c, dict)]
    return out


def _entries(container: Obj) -> list[Any]:
    """The container's `resources.claims`, as they are."""
    resources = container.get("resources")
    claims = resources.get("claims") if isinstance(resources, dict) else None
    return claims if isinstance(claims, list) else []


def _refs(container: Obj) -> list[str]:
    """The claim names the container refers to (in order, duplicates kept)."""
    return [c["name"] for c in _entries(container) if isinstance(c, dict) and _is_str(c, "name")]


def _is_str(obj: Obj, key: str) -> bool:
    return isinstance(obj.get(key), str)


def _claims_of_pod(spec: Obj) -> list[Any]:
    claims = spec.get("resourceClaims")
    return claims if isinstance(claims, list) else []


def _new_claims(spec: Obj, result: Translation) -> list[Obj]:
    """The pod claims the translation appended."""
    return list(_claims_of_pod(result.spec)[len(_claims_of_pod(spec)) :]) if result.changed else []


def _is_legacy(policy: Policy, resource: str) -> bool:
    """Is `resource` one the policy translates (an independent restatement of the rule)?"""
    hit = policy.mapping_for(resource)
    return hit is not None and not (resource.endswith(".shared") and hit[0].is_pattern)


def _names_used(spec: Obj) -> set[Any]:
    """Every claim name the input pod spells: its pod claims and its containers' references."""
    names = {c["name"] for c in _claims_of_pod(spec) if isinstance(c, dict) and _is_str(c, "name")}
    for _, container in _containers(spec):
        names.update(_refs(container))
    return names


# ---- properties --------------------------------------------------------------------------


@property_test
def test_never_raises_nor_mutates(spec: Obj, setup: tuple[Policy, Catalog]) -> None:
    before = copy.deepcopy(spec)
    result = translate(spec, *setup)
    assert spec == before
    if not result.changed:
        assert result.spec is spec and not result.templates
    assert len(set(result.warnings)) == len(result.warnings)


@property_test
def test_idempotent(spec: Obj, setup: tuple[Policy, Catalog]) -> None:
    result = translate(spec, *setup)
    again = translate(result.spec, *setup)
    assert not again.changed, again.touched
    assert again.spec is result.spec


@property_test
def test_a_pod_is_translated_whole(spec: Obj, setup: tuple[Policy, Catalog]) -> None:
    """A translated pod asks the device plugin for nothing of a mapped vendor: no container
    keeps a legacy GPU request, or another resource of that vendor's domain, beside claims."""
    policy = setup[0]
    result = translate(spec, *setup)
    if not result.changed:
        return
    for where, container in _containers(result.spec):
        resources = container.get("resources")
        for key in ("limits", "requests"):
            kept = resources.get(key) if isinstance(resources, dict) else None
            for resource in kept if isinstance(kept, dict) else ():
                domain = str(resource).split("/", 1)[0]
                assert domain not in policy.vendor_domains, (where, resource, result.warnings)


@property_test
def test_device_counts_are_preserved(spec: Obj, setup: tuple[Policy, Catalog]) -> None:
    policy = setup[0]
    result = translate(spec, *setup)
    counts = {t["metadata"]["name"]: _template_count(t) for t in result.templates}
    new = {c["name"]: counts[c["resourceClaimTemplateName"]] for c in _new_claims(spec, result)}
    after = dict(_containers(result.spec))
    # Per resource, as the device plugin allocates: the running containers' sum, or the
    # largest regular init container's; and what the new claims hold, each claim once.
    running: Counter[str] = Counter()
    init: Counter[str] = Counter()
    claimed: Counter[str] = Counter()
    seen: set[str] = set()
    for where, old in _containers(spec):
        container = after[where]
        if (*where, "resources") not in result.touched:
            assert container is old, where
            assert not any(n in new for n in _refs(container)), where  # no claim of ours
            continue
        for key in ("limits", "requests"):
            kept = container["resources"].get(key)
            if isinstance(kept, dict):
                assert not any(_is_legacy(policy, r) for r in kept), (where, kept)
                assert not any(r == "nvidia.com/gpu" or _MIG.fullmatch(r) for r in kept), kept
        legacy = _legacy_counts(policy, old)
        mine = [n for n in dict.fromkeys(_refs(container)) if n in new]
        got = sum(new[n] for n in mine)
        if where[0] == "initContainers" and old.get("restartPolicy") != "Always":
            assert got >= legacy.total(), (where, got, legacy)
            for resource, n in legacy.items():
                init[resource] = max(init[resource], n)
        else:
            assert got == legacy.total(), (where, got, legacy)
            running.update(legacy)
        for name in mine:
            if name not in seen:
                seen.add(name)
                claimed[_resource_of(result, spec, name, legacy)] += new[name]
    more = {r for r in claimed if claimed[r] > max(running[r], init[r])}
    said = {
        r for r in claimed if any(f"many {r}, so it gets a claim" in w for w in result.warnings)
    }
    assert said == more, (dict(claimed), dict(running), dict(init), result.warnings)


def _legacy_counts(policy: Policy, container: Obj) -> Counter[str]:
    limits = container["resources"].get("limits")
    found: Counter[str] = Counter()
    for resource, value in (limits if isinstance(limits, dict) else {}).items():
        if _is_legacy(policy, resource):
            count = parse_count(value)
            assert count is not None, (resource, value)
            found[resource] += count
    return found


def _resource_of(result: Translation, spec: Obj, claim: str, legacy: Counter[str]) -> str:
    """The legacy resource a new claim stands for: its request is named after it."""
    template = next(
        c["resourceClaimTemplateName"] for c in _new_claims(spec, result) if c["name"] == claim
    )
    (body,) = (t for t in result.templates if t["metadata"]["name"] == template)
    (request,) = body["spec"]["spec"]["devices"]["requests"]
    (resource,) = (r for r in legacy if request_name(r) == request["name"])
    return resource


def _template_count(template: Obj) -> int:
    (request,) = template["spec"]["spec"]["devices"]["requests"]
    count = request["exactly"]["count"]
    assert isinstance(count, int)
    return count


@property_test
def test_claims_are_well_formed(spec: Obj, setup: tuple[Policy, Catalog]) -> None:
    result = translate(spec, *setup)
    new = _new_claims(spec, result)
    names = [c["name"] for c in new]
    assert all(is_dns_label(n) for n in names), names
    assert len(set(names)) == len(names)
    assert not set(names) & _names_used(spec), "a new claim takes a name the pod already uses"
    templates = {t["metadata"]["name"] for t in result.templates}
    assert {c["resourceClaimTemplateName"] for c in new} == templates
    assert all(set(c) == {"name", "resourceClaimTemplateName"} for c in new)
    pod_names = {
        c["name"] for c in _claims_of_pod(result.spec) if isinstance(c, dict) and _is_str(c, "name")
    }
    before = dict(_containers(spec))
    for where, container in _containers(result.spec):
        entries, old = _entries(container), _entries(before[where])
        assert entries[: len(old)] == old, "existing references stay first and unchanged"
        added = entries[len(old) :]
        assert all(set(c) == {"name"} for c in added), added  # whole claims, no request
        names_added = [c["name"] for c in added]
        assert all(n in pod_names for n in names_added), (where, added)
        assert len(set(names_added)) == len(names_added), (where, added)
        assert not set(names_added) & set(_refs(before[where])), (where, entries)


@property_test
def test_patch_ops_rebuild_the_translation(spec: Obj, setup: tuple[Policy, Catalog]) -> None:
    """The webhook's patch, applied to the pod as admitted, gives the translated pod."""
    result = translate(spec, *setup)
    pod = {"metadata": {"name": "p"}, "spec": spec}
    patched = jsonpatch.apply_patch(pod, patch_ops(spec, result), in_place=False)
    assert patched == {"metadata": {"name": "p"}, "spec": result.spec}


@property_test
def test_translate_explain_and_report_count_alike(spec: Obj, setup: tuple[Policy, Catalog]) -> None:
    """Every reader of legacy requests sees the same GPUs: `report`'s row, `explain`'s
    first step, and the claims the translation makes (unless it says it makes more)."""
    policy, catalog = setup
    want = legacy_devices(spec, policy)
    workload = {"kind": "Deployment", "spec": {"template": {"spec": spec}}}
    row = report_row(
        workload, namespace="ml", policy=policy, catalog=catalog, kind="Deployment", name="d"
    )
    if is_pod_spec(spec):  # report finds pod specs by shape: one with containers
        assert (row.gpus if row is not None else {}) == want
    if want:  # explain reads pods the API server stored: a GPU pod here, well formed or not
        pod = {"metadata": {"name": "p", "namespace": "ml"}, "spec": spec}
        classes = [{"metadata": {"name": name}} for name in catalog.classes]
        first = explain(PodFacts(pod, {MODE_LABEL: "enabled"}, classes), policy).steps[0]
        assert f"({', '.join(f'{n} x {r}' for r, n in want.items())})" in first.text
    result = translate(spec, policy, catalog)
    if not result.changed or legacy_devices(result.spec, policy):
        return  # left as is, or only some containers translated
    templates = {t["metadata"]["name"]: t for t in result.templates}
    claimed: Counter[str] = Counter()
    for claim in _new_claims(spec, result):
        template = templates[claim["resourceClaimTemplateName"]]
        (request,) = template["spec"]["spec"]["devices"]["requests"]
        claimed[request["name"]] += request["exactly"]["count"]
    before: Counter[str] = Counter()
    for resource, n in want.items():
        before[request_name(resource)] += n
    if policy is ANY_SLICE:
        # Every MIG resource has one shape there, and an init container reuses an app claim
        # of its shape whatever resource it stands for: never more devices, perhaps fewer.
        assert all(claimed[name] <= before[name] for name in claimed) or any(
            "so it gets a claim of its own" in w for w in result.warnings
        )
        return
    if any("so it gets a claim of its own" in w for w in result.warnings):
        assert claimed.total() > before.total()
    else:
        assert claimed == before


# ---- fail closed ---------------------------------------------------------------------------

# What can pick a pod's GPUs and gpu2dra does not translate: (where, key, value).
_UNTRANSLATED = st.sampled_from(
    [
        ("annotation", "nvidia.com/vgpu-mode", "mig"),
        ("annotation", "nvidia.com/numa-bind", "true"),
        ("annotation", "hami.io/gpu-scheduler-policy", "spread"),
        ("annotation", "gpu.nvidia.com/anything", ""),
        ("annotation", "nvidia.com/use-gputype", ","),
        ("label", "nvidia.com/gpu.count", "2"),
        ("label", "nvidia.com/mig.strategy", "mixed"),
        ("label", "nvidia.com/gpu-type", "a100"),
        ("label", "hami.io/pool", "x"),
        ("affinity", "nvidia.com/gpu.deploy.driver", "true"),
        ("scheduler", "hami-scheduler", ""),
        ("scheduler", "volcano", ""),
    ]
)


def _with_untranslated(spec: Obj, where: str, key: str, value: str) -> tuple[Obj, Obj]:
    """The spec and annotations of `spec`'s pod with the key added where it is read."""
    if where == "annotation":
        return spec, {key: value}
    if where == "scheduler":
        return {**spec, "schedulerName": key}, {}
    if where == "label":
        selector = spec.get("nodeSelector")
        return {
            **spec,
            "nodeSelector": {**(selector if isinstance(selector, dict) else {}), key: value},
        }, {}
    term = {"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]}
    required = {"nodeSelectorTerms": [term]}
    return {
        **spec,
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}},
    }, {}


@PROPERTY_SETTINGS
@given(spec=pod_specs, setup=setups, untranslated=_UNTRANSLATED)
@example(
    spec={"containers": [_gpu("a")]},
    setup=_DEFAULT_SETUP,
    untranslated=("label", "nvidia.com/gpu.count", "2"),
)
def test_what_can_pick_gpus_untranslated_leaves_the_pod(
    spec: Obj, setup: tuple[Policy, Catalog], untranslated: tuple[str, str, str]
) -> None:
    """A pod with a key gpu2dra does not translate is never translated; when the pod without
    it would have been, a warning names the key."""
    where, key, value = untranslated
    changed, annotations = _with_untranslated(spec, where, key, value)
    result = translate(changed, *setup, annotations)
    assert not result.changed and result.spec is changed
    before = translate(spec, *setup)
    if before.changed:
        assert any(key in w for w in result.warnings), result.warnings

"""Properties of `translate` over random pod specs, valid and malformed alike.

The strategies here (`pod_specs`, `setups`) are shared with test_schemas.py.
"""

from __future__ import annotations

import copy
import re
from collections import Counter
from collections.abc import Callable
from typing import Any

import jsonpatch
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from app.core.catalog import Catalog
from app.core.kube import is_dns_label
from app.core.names import request_name
from app.core.patch import patch_ops
from app.core.policy import DEFAULT_POLICY_YAML, MODE_LABEL, Policy, load_policy, parse_policy
from app.core.resources import legacy_devices, parse_count
from app.core.translate import Translation, translate
from app.manifests.podspecs import is_pod_spec
from app.troubleshoot.claims import PodFacts
from app.troubleshoot.explain import explain
from app.troubleshoot.report import workload_of

Obj = dict[str, Any]

# ---- strategies --------------------------------------------------------------------------
# Cheap flat strategies (sampled_from and small integers) rather than deep recursive ones: they
# generate and shrink fast, and the pools are small on purpose so that names collide.

PRODUCT = "nvidia.com/gpu.product"
FAMILY = "nvidia.com/gpu.family"
MEMORY = "nvidia.com/gpu.memory"

NAME_POOL = ["a", "b", "main", "side"]
TRANSLATED = ["nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "nvidia.com/mig-2g.20gb.me"]
ODD_GPU = [
    "nvidia.com/gpu.shared",
    "nvidia.com/mig-1g.10gb.me",  # same request name (mig-1g-10gb-me) as the next one
    "nvidia.com/mig-1g.10gb-me",
    "nvidia.com/mig-1g.20gb.me.all",
    "nvidia.com/mig-1c.3g.20gb",
    "nvidia.com/mig-large",
    "nvidia.com/mig-",
    "nvidia.com/mig-1g.5gb.shared",
    "nvidia.com/GPU",
    "nvidia.com/gpumem",  # HAMi's fractions: a companion no mapping covers
    "nvidia.com/gpucores",
]
OTHER_RESOURCES = ["cpu", "memory", "example.com/fpga"]
REQUEST_NAMES = ["gpu", "mig-1g-10gb", "gpu-shared"]
CLAIM_POOL = [f"{c}-{r}" for c in NAME_POOL for r in REQUEST_NAMES] + ["shared"]

JUNK: list[Any] = [None, True, False, 0, -1, 1.5, "", "x", "1", [], [1], ["a"], {}, {"a": 1}]
junk: st.SearchStrategy[Any] = st.one_of(
    st.sampled_from(JUNK), st.text(max_size=6), st.integers(), st.lists(st.text(max_size=3))
)

container_names = st.one_of(
    st.sampled_from(NAME_POOL),
    st.sampled_from(NAME_POOL),
    st.sampled_from(NAME_POOL),
    st.sampled_from(
        ["a" * 63, "a" * 62 + "b", "z" * 80, "Main", "GPU_worker", "trainer_0", "gpu-", "-", ""]
    ),
    st.text(max_size=70),  # unicode, spaces, anything
    junk,
)
counts = st.one_of(
    st.integers(0, 3),
    st.integers(0, 3),
    st.integers(0, 3),
    st.integers(0, 3).map(str),
    st.sampled_from(
        [-1, 32, 33, "02", "-1", "1e3", "", "abc", "2Gi", " 1", "\u0661", 2.0, 1.5, -1.0, 1e300]
    ),
    st.integers(-5, 100),
    junk,
)
resource_names = st.one_of(
    st.sampled_from(TRANSLATED),
    st.sampled_from(TRANSLATED),
    st.sampled_from(ODD_GPU),
    st.sampled_from(OTHER_RESOURCES),
    st.text(max_size=12),
)


_PICKS = {n: st.integers(0, n - 1) for n in range(2, 31)}


def _one_in(draw: st.DrawFn, n: int) -> bool:
    """True about once in `n` draws. Shrinks to False, so keep False the plain case."""
    return draw(_PICKS[n]) == n - 1


def _upto(draw: st.DrawFn, n: int) -> int:
    return draw(_PICKS[n + 1])


other_amounts = st.sampled_from(["1", "500m", 2])
good_counts = st.one_of(st.integers(0, 3), st.integers(1, 3), st.integers(0, 3).map(str))
plausible_resources = st.sampled_from([*TRANSLATED, "nvidia.com/gpu", "nvidia.com/gpu.shared"])


@st.composite
def _amounts(draw: st.DrawFn) -> Obj:
    """Chaotic: any resource names and any counts."""
    names = draw(st.lists(resource_names, min_size=1, max_size=3, unique=True))
    return {n: draw(other_amounts if n in OTHER_RESOURCES else counts) for n in names}


@st.composite
def _plausible_amounts(draw: st.DrawFn) -> Obj:
    """What real GPU pods ask for: one or two GPU resources with sane counts, maybe a CPU."""
    names = draw(st.lists(plausible_resources, min_size=1, max_size=2, unique=True))
    out = {n: draw(good_counts) for n in names}
    if _one_in(draw, 3):
        out["cpu"] = "1"
    return out


claim_names = st.sampled_from(CLAIM_POOL) | junk


@st.composite
def _claim_refs(draw: st.DrawFn) -> Any:
    if _one_in(draw, 6):
        return draw(junk)
    refs: list[Any] = []
    for _ in range(_upto(draw, 2)):
        ref = {"name": draw(claim_names)}
        if _one_in(draw, 5):
            ref["request"] = "gpu"
        refs.append(ref)
    return refs


@st.composite
def _resources(draw: st.DrawFn) -> Any:
    if _one_in(draw, 20):
        return draw(st.just([{"limits": {"nvidia.com/gpu": 1}}]) | junk)  # not a map
    out: Obj = {}
    chaotic = _one_in(draw, 3)
    limits = draw(amounts if chaotic else plausible_amounts)
    how = _upto(draw, 9)
    if how <= 7:
        out["limits"] = limits
    elif how == 8:
        out["limits"] = draw(junk)  # e.g. a string
    how = _upto(draw, 7)
    if how <= 2:
        out["requests"] = dict(limits)  # equal, as extended resources need
    elif how == 3:
        out["requests"] = {k: v for k, v in limits.items() if draw(st.booleans())}
    elif how == 4 and chaotic:
        out["requests"] = draw(amounts)
    elif how == 5 and chaotic:
        out["requests"] = draw(junk)
    if draw(st.booleans()):
        out["claims"] = draw(claim_refs)
    return out


visible = {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}
envs = st.sampled_from([[visible], [{"name": "PATH"}], [1], "NVIDIA"]) | junk
commands = st.sampled_from([["sh", "-c", "echo $NVIDIA_VISIBLE_DEVICES"]]) | junk
restart_policies = st.sampled_from(["Always", "Always", "OnFailure", "Never"])


@st.composite
def _container(draw: st.DrawFn, init: bool = False) -> Any:
    if _one_in(draw, 25):
        return draw(junk)  # not a map
    out: Obj = {"name": draw(container_names), "image": "cuda:12"}
    if not _one_in(draw, 8):
        out["resources"] = draw(resources)
    if init and draw(st.booleans()):
        out["restartPolicy"] = draw(restart_policies)
    if _one_in(draw, 8):
        out["env"] = draw(envs)
    if _one_in(draw, 8):
        out["command"] = draw(commands)
    if _one_in(draw, 10):
        out["args"] = draw(junk)
    return out


gfd_values: dict[str, list[str]] = {
    PRODUCT: [
        "NVIDIA-A100-SXM4-40GB",
        "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb",
        "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb.me",
        "NVIDIA-A100-SXM4-40GB-MIG-INVALID",
        "NVIDIA-A100-SXM4-40GB-MIG-big",
        "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb-SHARED",
        "Tesla-T4-SHARED",
        "NVIDIA-H100-80GB-HBM3",
        "it's\\",
    ],
    FAMILY: ["ampere", "hopper", "ada-lovelace", "Ampere", "unknown"],
    MEMORY: ["40960", "81559", "0", "40GB", "9999999999999", "-1"],
    "nvidia.com/gpu.count": ["1", "8"],
    "nvidia.com/gpu.replicas": ["1", "4"],
    "nvidia.com/gpu.sharing-strategy": ["none", "time-slicing", "mps"],
    "nvidia.com/gpu.compute.major": ["8", "9"],
    "nvidia.com/cuda.driver-version.full": ["550.107.02", "580.82.07", "550"],
    "nvidia.com/cuda.driver.rev": ["02", ""],
    "nvidia.com/mig.strategy": ["mixed"],
    "zone": ["a", "b"],
}
label_keys = st.sampled_from([PRODUCT, FAMILY, MEMORY, *gfd_values])
# Strings of (unicode) digits: what an "is it a number" check must get right.
# ASCII digits, other decimal digits (Nd: Arabic-Indic, Devanagari) and digits that are no
# decimal digits (No: superscripts, circled): str.isdigit() says yes to all of them.
digits = st.text(st.sampled_from("0123456789٣४²³①"), min_size=1, max_size=4)
label_values = {
    key: st.one_of(
        st.sampled_from(values),
        st.sampled_from(values),
        digits,
        digits if key == MEMORY else st.sampled_from(values),
        st.text(max_size=10),
        junk,
    )
    for key, values in gfd_values.items()
}


@st.composite
def _node_selectors(draw: st.DrawFn) -> Any:
    if _one_in(draw, 10):
        return draw(junk)
    keys = draw(st.lists(label_keys, max_size=3, unique=True))
    return {k: draw(label_values[k]) for k in keys}


operators = st.sampled_from(["In", "In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "in"])


@st.composite
def _match_expressions(draw: st.DrawFn) -> Any:
    if _one_in(draw, 15):
        return draw(junk)
    key = draw(label_keys)
    out: Obj = {"key": key, "operator": draw(operators)}
    if not _one_in(draw, 5):
        out["values"] = [draw(label_values[key]) for _ in range(_upto(draw, 3))]
    return out


@st.composite
def _affinities(draw: st.DrawFn) -> Any:
    if _one_in(draw, 15):
        return draw(junk)
    terms: list[Any] = []
    for _ in range(draw(st.sampled_from([1, 1, 1, 0, 2]))):
        if _one_in(draw, 10):
            terms.append(draw(junk))
            continue
        term: Obj = {"matchExpressions": [draw(match_expressions) for _ in range(_upto(draw, 3))]}
        if _one_in(draw, 5):
            term["matchFields"] = [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]
        terms.append(term)
    required: Any = draw(junk) if _one_in(draw, 10) else {"nodeSelectorTerms": terms}
    node_affinity: Obj = {"requiredDuringSchedulingIgnoredDuringExecution": required}
    if _one_in(draw, 3):
        node_affinity["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": 1, "preference": {"matchExpressions": []}}
        ]
    out: Obj = {"nodeAffinity": node_affinity}
    if _one_in(draw, 3):
        out["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": []}
    return out


claim_sources = st.sampled_from(["resourceClaimName", "resourceClaimTemplateName"])


@st.composite
def _pod_claims(draw: st.DrawFn) -> Any:
    if _one_in(draw, 10):
        return draw(junk)
    claims: list[Any] = []
    for _ in range(_upto(draw, 3)):
        how = _upto(draw, 9)
        if how == 8:
            claims.append(draw(junk))
        elif how == 9:
            claims.append({"name": draw(junk)})
        else:
            claims.append({"name": draw(st.sampled_from(CLAIM_POOL)), draw(claim_sources): "s"})
    return claims


@st.composite
def _pod_specs(draw: st.DrawFn) -> Obj:
    """A pod spec: mostly plausible GPU pods, with malformed shapes mixed in."""
    spec: Obj = {}
    if _one_in(draw, 30):
        spec["containers"] = draw(junk)
    else:
        spec["containers"] = [draw(app_containers) for _ in range(_upto(draw, 4))]
    if draw(st.booleans()):
        spec["initContainers"] = [draw(init_containers) for _ in range(_upto(draw, 3))]
    if _one_in(draw, 4):
        spec["resourceClaims"] = draw(pod_claims)
    if draw(st.booleans()):
        _refer_to_would_be_claims(draw, spec)
    if draw(st.booleans()):
        spec["nodeSelector"] = draw(node_selectors)
    if _one_in(draw, 4):
        spec["affinity"] = draw(affinities)
    return spec


def _refer_to_would_be_claims(draw: st.DrawFn, spec: Obj) -> None:
    """Use the names gpu2dra would give its claims (`<container>-gpu`) in the pod's own claims
    and in (dangling) container references, so that they collide."""
    found = [
        (field, i, c)
        for field in ("containers", "initContainers")
        if isinstance(spec.get(field), list)
        for i, c in enumerate(spec[field])
        if isinstance(c, dict)
    ]
    names = [
        f"{c['name']}-{r}"
        for _, _, c in found
        if isinstance(c.get("name"), str)
        for r in REQUEST_NAMES
    ]
    if not names:
        return
    would_be = st.sampled_from(names)
    if draw(st.booleans()):
        # Copies, not edits: junk values are shared between examples.
        field, index, container = draw(st.sampled_from(found))
        res = container.get("resources")
        res = res if isinstance(res, dict) else {}
        refs: list[Any] = res["claims"] if isinstance(res.get("claims"), list) else []
        ref = {"name": draw(would_be)}
        spec[field] = [*spec[field]]
        spec[field][index] = {**container, "resources": {**res, "claims": [*refs, ref]}}
    else:
        claims = spec.get("resourceClaims")
        claims = claims if isinstance(claims, list) else []
        source = draw(claim_sources)
        spec["resourceClaims"] = [*claims, {"name": draw(would_be), source: "s"}]


# Built once: building a strategy per draw costs more than drawing from it.
amounts = _amounts()
plausible_amounts = _plausible_amounts()
claim_refs = _claim_refs()
resources = _resources()
app_containers = _container()
init_containers = _container(init=True)
node_selectors = _node_selectors()
match_expressions = _match_expressions()
affinities = _affinities()
pod_claims = _pod_claims()
pod_specs = _pod_specs()


def _policy(**changes: Any) -> Policy:
    raw: Obj = yaml.safe_load(DEFAULT_POLICY_YAML)
    for key, value in changes.items():
        raw[key] = {**raw[key], **value} if isinstance(value, dict) else value
    return parse_policy(raw)


DEFAULT_POLICY = load_policy(None)
_KEEP = _policy(keepNodeSelectors=True)
# Two resources of one shape (class and selectors) can meet in one container.
_SHARED = _policy(
    mappings={
        "nvidia.com/gpu.shared": {"deviceClassName": "gpu.nvidia.com", "sharing": "TimeSlicing"}
    }
)
# Shared GPUs translated with the driver's sharing config, MIG single strategy included.
_SHARING = _policy(
    mappings={
        "nvidia.com/gpu": {"deviceClassName": "gpu.nvidia.com", "sharing": "TimeSlicing"},
        "nvidia.com/mig-*": {
            "deviceClassName": "mig.nvidia.com",
            "sharing": {"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 50}},
            "selectors": ["device.attributes['gpu.nvidia.com'].profile == '{profile}'"],
        },
    }
)
# Any MIG slice will do: every MIG resource has the same shape (class, selectors).
_ANY_SLICE = _policy(mappings={"nvidia.com/mig-*": {"deviceClassName": "mig.nvidia.com"}})
_SERVED = Catalog.from_objects(
    [
        {
            "metadata": {"name": "gpu.nvidia.com"},
            "spec": {"extendedResourceName": "nvidia.com/gpu"},
        },
        {"metadata": {"name": "mig.nvidia.com"}},
    ]
)

setups: st.SearchStrategy[tuple[Policy, Catalog]] = st.sampled_from(
    [
        (DEFAULT_POLICY, Catalog.of(DEFAULT_POLICY.device_classes)),
        (DEFAULT_POLICY, Catalog.of(DEFAULT_POLICY.device_classes)),
        (_KEEP, Catalog.of(_KEEP.device_classes)),
        (_SHARED, Catalog.of(_SHARED.device_classes)),
        (_SHARING, Catalog.of(_SHARING.device_classes)),
        (_ANY_SLICE, Catalog.of(_ANY_SLICE.device_classes)),
        (DEFAULT_POLICY, Catalog.of(["gpu.nvidia.com"])),
        (DEFAULT_POLICY, _SERVED),
    ]
)

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
        (_SHARED, Catalog.of(_SHARED.device_classes)),
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
    row = workload_of(workload, "ml", policy, catalog, "Deployment", "d")
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
    if policy is _ANY_SLICE:
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

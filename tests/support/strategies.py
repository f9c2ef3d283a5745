"""Hypothesis strategies the suites share: pod specs (mostly malformed, or plausible), policy
setups, JSON values."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import yaml
from hypothesis import strategies as st

from app.core.catalog import Catalog
from app.core.policy import DEFAULT_POLICY_YAML, Policy, load_policy, parse_policy

Obj = dict[str, Any]

# ---- pod specs, valid and malformed alike ------------------------------------------------
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


# ---- policies and catalogs to translate with ---------------------------------------------


def _policy(**changes: Any) -> Policy:
    raw: Obj = yaml.safe_load(DEFAULT_POLICY_YAML)
    for key, value in changes.items():
        raw[key] = {**raw[key], **value} if isinstance(value, dict) else value
    return parse_policy(raw)


DEFAULT_POLICY = load_policy(None)
_KEEP = _policy(keepNodeSelectors=True)
# Two resources of one shape (class and selectors) can meet in one container.
SHARED = _policy(
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
# Shared GPUs and HAMi's memory onto devices several claims share (consumable capacity).
_CONSUMABLE = _policy(
    mappings={
        "nvidia.com/gpu": {
            "deviceClassName": "gpu.nvidia.com",
            "consumable": {"shares": 1, "memory": "nvidia.com/gpumem"},
        },
        "nvidia.com/gpu.shared": {"deviceClassName": "gpu.nvidia.com", "consumable": {}},
    }
)
_EVERY_DRIVER_SHARES = replace(Catalog.of(_CONSUMABLE.device_classes), sharing=None)
_NO_DRIVER_SHARES = replace(Catalog.of(_CONSUMABLE.device_classes), sharing={})
# Any MIG slice will do: every MIG resource has the same shape (class, selectors).
ANY_SLICE = _policy(mappings={"nvidia.com/mig-*": {"deviceClassName": "mig.nvidia.com"}})
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
        (SHARED, Catalog.of(SHARED.device_classes)),
        (_SHARING, Catalog.of(_SHARING.device_classes)),
        (ANY_SLICE, Catalog.of(ANY_SLICE.device_classes)),
        (DEFAULT_POLICY, Catalog.of(["gpu.nvidia.com"])),
        (DEFAULT_POLICY, _SERVED),
        (_CONSUMABLE, _EVERY_DRIVER_SHARES),
        (_CONSUMABLE, _NO_DRIVER_SHARES),
    ]
)


# ---- plausible pod specs -----------------------------------------------------------------
# Pods the apiserver accepts, or rejects for one reason only, so that both halves of the patch
# check have many examples: the shared strategy makes mostly malformed pods.
DNS_NAMES = ["a", "b", "main", "side", "trainer", "x-gpu", "a" * 63, "a" * 62 + "b"]
GPU_LIMITS = st.dictionaries(
    st.sampled_from(
        ["nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "nvidia.com/mig-2g.20gb.me", "cpu"]
    ),
    st.integers(0, 4) | st.sampled_from(["1", "2"]),
    max_size=3,
)
CLAIM_NAMES = ["a-gpu", "main-gpu", "a-mig-1g-10gb", "trainer-gpu", "shared", "x-gpu-gpu"]
GFD_TERMS = st.sampled_from(
    [
        ("nvidia.com/gpu.product", "In", ("NVIDIA-A100-SXM4-80GB",)),
        ("nvidia.com/gpu.product", "NotIn", ("Tesla-T4", "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb")),
        ("nvidia.com/gpu.family", "In", ("ampere", "hopper")),
        ("nvidia.com/gpu.memory", "In", ("81920",)),
        ("nvidia.com/gpu.product", "Exists", ()),
        ("nvidia.com/gpu.count", "Gt", ("4",)),
        ("topology.kubernetes.io/zone", "In", ("a",)),
        # rejected by the apiserver: translated, they would make the pod valid
        ("nvidia.com/gpu.product", "In", ("NVIDIA A100-SXM4-80GB",)),
        ("nvidia.com/gpu.family", "Exists", ("ampere",)),
    ]
)


@st.composite
def plausible_pod_specs(draw: st.DrawFn) -> Obj:
    pod_claims = [
        {"name": n, draw(st.sampled_from(["resourceClaimName", "resourceClaimTemplateName"])): "t"}
        for n in draw(st.lists(st.sampled_from(CLAIM_NAMES), max_size=3, unique=True))
    ]
    names = draw(st.lists(st.sampled_from(DNS_NAMES), min_size=1, max_size=6, unique=True))
    split = draw(st.integers(1, len(names)))
    spec: Obj = {}
    for field, group in (("containers", names[:split]), ("initContainers", names[split:])):
        if not group:
            continue
        spec[field] = []
        for name in group:
            limits = draw(GPU_LIMITS)
            resources: Obj = {"limits": limits} if limits else {}
            if draw(st.booleans()) and limits:
                resources["requests"] = dict(limits)
            refs = draw(st.lists(st.sampled_from([c["name"] for c in pod_claims] or ["-"])))
            if pod_claims and refs:
                resources["claims"] = [{"name": r} for r in dict.fromkeys(refs)]
            container: Obj = {"name": name, "image": "cuda:12", "resources": resources}
            if field == "initContainers" and draw(st.booleans()):
                container["restartPolicy"] = "Always"
            spec[field].append(container)
    if pod_claims:
        spec["resourceClaims"] = pod_claims
    terms = draw(st.lists(GFD_TERMS, max_size=3, unique=True))
    if draw(st.booleans()) and terms:
        spec["nodeSelector"] = {k: v[0] for k, op, v in terms if op == "In"} or None
    elif terms:
        exprs = [
            {"key": k, "operator": op, **({"values": list(v)} if v else {})} for k, op, v in terms
        ]
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": exprs}]
                }
            }
        }
    return {k: v for k, v in spec.items() if v is not None}


# ---- any JSON ----------------------------------------------------------------------------
json_values: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)

"""What a pod spec asks for, read once for everyone: legacy extended resources (the device
plugin's `nvidia.com/gpu: 2`) and DRA requests (a claim's `exactly` or `firstAvailable`).

The translator, `explain`, `report` and the webhook's pre-filter all read pods through here,
so they cannot disagree on what a pod asks for.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

from app.core.kube import MAX_DEVICES_PER_CLAIM, Obj, cel_expressions
from app.core.mapping import ResourceMapping
from app.core.nvidia.mig import mig_profile
from app.core.outcomes import Code, Finding
from app.core.policy import Policy
from app.core.quantity import parse_quantity

# ---- containers ----------------------------------------------------------------------------


def containers(spec: Obj) -> Iterator[tuple[str, int, Obj]]:
    """(field, index, container) of a pod spec: app containers first, then init containers
    (the translator's order: init containers can only reuse claims that already exist)."""
    for field in ("containers", "initContainers"):
        items = spec.get(field)
        if isinstance(items, list):
            for index, container in enumerate(items):
                if isinstance(container, dict):
                    yield field, index, container


def is_regular_init(field: str, container: Obj) -> bool:
    """Sidecars (restartPolicy: Always) run beside the app; regular init containers run
    before it, and the device plugin hands their GPUs on to the app containers."""
    return field == "initContainers" and container.get("restartPolicy") != "Always"


def asks_extended_resources(spec: Obj) -> bool:
    """Whether any container asks for a resource named with a domain (`vendor/name`): every
    mapped resource is, and most pods ask only for cpu and memory."""
    for field in ("containers", "initContainers"):
        items = spec.get(field)
        for container in items if isinstance(items, list) else ():
            resources = container.get("resources") if isinstance(container, dict) else None
            if not isinstance(resources, dict):
                continue
            for key in ("limits", "requests"):
                amounts = resources.get(key)
                if isinstance(amounts, dict):
                    for name in amounts:  # not any(): every pod pays it (docs/performance.md)
                        if isinstance(name, str) and "/" in name:
                            return True
    return False


# ---- legacy extended resources ---------------------------------------------------------------

_COUNT = re.compile(r"[0-9]{1,18}")


def parse_count(value: Any) -> int | None:
    """A device count as the API server reads an extended resource: an integer, or a quantity
    with a whole value (`2`, `"2"`, `2.0`, `"2000m"`); None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float):
        return int(value) if value.is_integer() and 0 <= value < 2**53 else None
    if not isinstance(value, str):
        return None
    if _COUNT.fullmatch(value):  # the common case, without the quantity parser
        return int(value)
    try:
        number = parse_quantity(value).value
    except ValueError:
        return None
    whole = number.denominator == 1 and 0 <= number < 2**63
    return int(number) if whole else None


class LegacyRequest(NamedTuple):
    """One mapped legacy resource of one container, as the translator will claim it."""

    resource: str
    devices: int
    mapping: ResourceMapping
    selectors: tuple[str, ...]  # the mapping's, with {profile} filled in
    shared: bool = False  # the device plugin's shared replicas (`<name>.shared`)
    memory: int = 0  # MiB of each device, from a memory resource its mapping reads (HAMi's)


def vendor_companions(
    unmapped: list[tuple[str, str]], found: Iterable[LegacyRequest], policy: Policy
) -> Finding | None:
    """Why extended resources of a GPU vendor's domain that no mapping covers (HAMi's
    nvidia.com/gpumem, gpucores, ...) keep the pod on the device plugin: they ask for a
    fraction, a property or a selection of the device a DRA claim cannot give, and moving
    only the GPUs would drop it. None when there are none, or when the policy's ignoreKeys
    names each."""
    domains = policy.vendor_domains | {lg.resource.split("/", 1)[0] for lg in found}
    hits: dict[str, list[str]] = {}
    for who, resource in unmapped:
        if resource.split("/", 1)[0] in domains and not policy.ignores(resource):
            hits.setdefault(who, []).append(resource)
    if not hits:
        return None
    named = "; ".join(f"{who} asks for {', '.join(rs)}" for who, rs in hits.items())
    them = "it" if sum(map(len, hits.values())) == 1 else "them"
    return Finding(Code.VENDOR_RESOURCE, named=named, them=them)


def is_gpu_resource(name: str) -> bool:
    return name.startswith(("nvidia.com/gpu", "nvidia.com/mig-"))


_NONE: Obj = {}  # a missing limits or requests map; read only


def _amounts(container: Obj) -> tuple[Obj, Obj, Any] | None:
    """limits, requests and the resource names of both, in order; None without resources."""
    resources = container.get("resources")
    if not isinstance(resources, dict):
        return None
    limits, requests = resources.get("limits"), resources.get("requests")
    limits = limits if isinstance(limits, dict) else _NONE
    requests = requests if isinstance(requests, dict) else _NONE
    names: Any = limits  # requests name the same resources as limits, as a rule
    if requests and not requests.keys() <= limits.keys():
        names = dict.fromkeys(itertools.chain(limits, requests))
    return limits, requests, names


def container_label(field: str, container: Obj) -> str:
    """How warnings name a container: `container 'main'`, `initContainer 'prep'`."""
    return f"{field[:-1]} {container.get('name')!r}"


def legacy_requests(
    field: str,
    container: Obj,
    policy: Policy,
    *,
    warn: list[Finding],
    unmapped: list[tuple[str, str]],
) -> list[LegacyRequest] | None:
    """The mapped legacy resources of one container, each checked as the translator needs
    it; None when the container cannot be translated, and so neither can its pod (the reason
    is appended to `warn`). Each extended resource no mapping covers is appended to
    `unmapped`, with the container's label."""
    read = _amounts(container)
    if read is None:
        return []
    limits, requests, names = read
    who = container_label(field, container)

    def say(code: Code, **fields: object) -> None:
        warn.append(Finding(code, who=who, resource=resource, **fields))

    found: list[LegacyRequest] = []
    for resource in names:
        if not isinstance(resource, str):
            continue
        hit = policy.mapping_for(resource)
        shared = resource.endswith(".shared")
        if hit is None or (hit[0].is_pattern and shared):
            if shared and is_gpu_resource(resource):
                say(Code.SHARED_REPLICAS)
                return None
            if "/" in resource:
                unmapped.append((who, resource))
            continue
        mapping, captured = hit
        if shared and not (mapping.sharing or mapping.takes_shares):
            say(Code.SHARED_REPLICAS)
            return None
        selectors = mapping.selectors
        if mapping.is_pattern:
            profile = mig_profile(captured)
            if profile is None:
                say(Code.NOT_A_MIG_PROFILE)
                return None
            selectors = tuple(s.replace("{profile}", profile) for s in selectors)
        if resource not in limits:
            say(Code.NO_LIMIT)
            return None
        count = parse_count(limits[resource])
        if count is None:
            say(Code.NOT_A_COUNT, count=limits[resource])
            return None
        if resource in requests and parse_count(requests[resource]) != count:
            say(Code.REQUEST_NOT_LIMIT, request=requests[resource], limit=limits[resource])
            return None
        if count > MAX_DEVICES_PER_CLAIM:
            say(Code.TOO_MANY_DEVICES, count=count, most=MAX_DEVICES_PER_CLAIM)
            return None
        found.append(LegacyRequest(resource, count, mapping, selectors, shared=shared))
    return found


def legacy_amounts(container: Obj, policy: Policy) -> dict[str, int]:
    """Devices one container asks for per mapped legacy resource, whether or not it can be
    translated: its limit (the request where a limit is missing); 0 when neither is a count."""
    read = _amounts(container)
    if read is None:
        return {}
    limits, requests, names = read
    found = {}
    for resource in names:
        if isinstance(resource, str) and policy.mapping_for(resource) is not None:
            amount = limits[resource] if resource in limits else requests[resource]
            found[resource] = parse_count(amount) or 0
    return found


def legacy_devices(spec: Obj, policy: Policy) -> dict[str, int]:
    """Devices one pod holds under the device plugin per mapped legacy resource: the app
    containers' and sidecars' sum, or the largest regular init container's when that is more
    (the device plugin hands an init container's devices on to the app containers)."""
    running: Counter[str] = Counter()
    init: Counter[str] = Counter()
    for field, _, container in containers(spec):
        amounts = legacy_amounts(container, policy)
        if is_regular_init(field, container):
            for resource, n in amounts.items():
                init[resource] = max(init[resource], n)
        else:
            running.update(amounts)
    needs = {r: max(running[r], init[r]) for r in sorted(running.keys() | init.keys())}
    return {r: n for r, n in needs.items() if n}


# ---- DRA requests ------------------------------------------------------------------------------


class DraRequest(NamedTuple):
    """One request of a claim spec; a `firstAvailable` choice is named `request/choice`."""

    name: str
    device_class: str
    devices: int  # ExactCount's count (1 when unset); 0 for AllocationMode All
    selectors: tuple[str, ...]  # CEL expressions


def _one(name: str, request: Obj) -> DraRequest | None:
    device_class = request.get("deviceClassName")
    if not isinstance(device_class, str):
        return None
    count = request.get("count", 1)
    if request.get("allocationMode") == "All":
        count = 0
    return DraRequest(
        name,
        device_class,
        count if isinstance(count, int) else 1,
        cel_expressions(request.get("selectors")),
    )


def dra_requests(claim_spec: Any) -> list[DraRequest]:
    """The requests of a ResourceClaimSpec, for v1 (`exactly`, `firstAvailable`) and
    v1beta1 (flat `deviceClassName`) alike; whatever is not a request is passed over."""
    devices = claim_spec.get("devices") if isinstance(claim_spec, dict) else None
    requests = devices.get("requests") if isinstance(devices, dict) else None
    found: list[DraRequest] = []
    for req in requests if isinstance(requests, list) else ():
        if not isinstance(req, dict):
            continue
        name = str(req.get("name", ""))
        exactly = req.get("exactly")
        if (one := _one(name, exactly if isinstance(exactly, dict) else req)) is not None:
            found.append(one)
        subs = req.get("firstAvailable")
        for sub in subs if isinstance(subs, list) else ():
            if (
                isinstance(sub, dict)
                and (one := _one(f"{name}/{sub.get('name', '')}", sub)) is not None
            ):
                found.append(one)
    return found

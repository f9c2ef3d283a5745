"""What serves GPU pods: the DRA devices ResourceSlices publish and no claim holds, by class,
product, MIG profile and sharing, and what the device plugin has left on the nodes. A pure
function of DeviceClasses, ResourceSlices, ResourceClaims, Nodes and Pods as the API returns
them, shared by `gpu2dra capacity` and doctor's capacity checks.

A device is free when no allocated claim names it (`status.allocation.devices.results`); one
that allows multiple allocations (DRA consumable capacity) is free for one more request as
long as its capacity left covers what the request takes of it. A device that consumes shared
counters (partitionable devices: DynamicMIG placements) is free only while its pool's counter
sets, less what the allocated devices consume, still cover what it takes (app/readers/counters).
Which devices a class and a
request select is CEL evaluated as the scheduler does (app/readers/cel).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from contextlib import suppress
from dataclasses import dataclass
from fractions import Fraction
from math import floor
from typing import Any

from app.core.kube import Obj
from app.core.policy import Policy
from app.core.quantity import parse_quantity
from app.core.resources import legacy_devices, parse_count
from app.readers.cel.devices import Device, class_selectors, select
from app.readers.counters import Spent, short, spent
from app.readers.demand import FINISHED, Shape

DeviceKey = tuple[str, str, str]  # driver, pool, device: how allocation results name one
NVIDIA = "gpu.nvidia.com"


@dataclass(frozen=True, slots=True)
class Allocated:
    """What allocated claims hold: devices, and the capacity taken of shared ones."""

    taken: frozenset[DeviceKey]
    consumed: Mapping[DeviceKey, Mapping[str, Fraction]]


def _amount(text: Any) -> Fraction:
    return parse_quantity(str(text)).value


def allocated(claims: Iterable[Obj]) -> Allocated:
    taken: set[DeviceKey] = set()
    consumed: dict[DeviceKey, dict[str, Fraction]] = {}
    for claim in claims:
        allocation = (claim.get("status") or {}).get("allocation") or {}
        for result in (allocation.get("devices") or {}).get("results") or []:
            key = (str(result.get("driver")), str(result.get("pool")), str(result.get("device")))
            taken.add(key)
            amounts = consumed.setdefault(key, {})
            for name, text in (result.get("consumedCapacity") or {}).items():
                with suppress(ValueError):
                    name = _unqualified(str(name), key[0])
                    amounts[name] = amounts.get(name, Fraction(0)) + _amount(text)
    return Allocated(frozenset(taken), consumed)


def _unqualified(name: str, driver: str) -> str:
    domain, slash, ident = name.rpartition("/")
    return ident if slash and domain == driver else name


def _capacity(device: Device) -> dict[str, tuple[Fraction, Any]]:
    """name -> (the device's value, its requestPolicy) for each capacity it publishes."""
    found = {}
    for name, spec in device.capacity.items():
        value = spec.get("value") if isinstance(spec, dict) else spec
        with suppress(ValueError):
            policy = spec.get("requestPolicy") if isinstance(spec, dict) else None
            found[_unqualified(str(name), device.driver)] = (_amount(value), policy)
    return found


def room(device: Device, shape: Shape, held: Allocated) -> int:
    """How many more requests of `shape` the device could serve: 0 or 1 for a device one
    claim holds whole; for a shared one, what its capacity left covers of what one request
    takes (what it asks, else the capacity's default)."""
    if not device.allow_multiple:
        return 0 if device.key in held.taken else 1
    asked = {_unqualified(k, device.driver): v for k, v in shape.capacity}
    used = held.consumed.get(device.key, {})
    fits: list[int] = []
    for name, (total, policy) in _capacity(device).items():
        default = policy.get("default") if isinstance(policy, dict) else None
        text = asked.get(name, default)
        with suppress(ValueError):
            takes = total if text is None else _amount(text)
            if takes > 0:
                fits.append(floor((total - used.get(name, Fraction(0))) / takes))
    return max(0, min(fits)) if fits else 1


@dataclass(frozen=True, slots=True)
class Devices:
    """The published devices each DeviceClass selects, what claims hold, and what the
    devices they hold consume of shared counters."""

    by_class: Mapping[str, tuple[Device, ...]]
    held: Allocated
    counters: Spent

    def spent(self, device: Device) -> bool:
        """The counters the device consumes are taken by other devices' allocations."""
        return bool(short(device, self.counters))

    def free_for(self, shape: Shape) -> int:
        """How many more requests of `shape` the devices could serve now."""
        chosen = select(self.by_class.get(shape.device_class, ()), shape.selectors).selected
        return sum(room(d, shape, self.held) for d in chosen if not self.spent(d))


def devices_by_class(
    devices: Iterable[Device], classes: Iterable[Obj], claims: Iterable[Obj]
) -> Devices:
    """The devices of each DeviceClass, as its selectors select them."""
    every = list(devices)
    by_class = {
        str(c["metadata"]["name"]): select(every, class_selectors(c)).selected for c in classes
    }
    held = allocated(claims)
    return Devices(by_class, held, spent(every, held.taken))


def _text(device: Device, name: str) -> str:
    domain = NVIDIA if device.driver == NVIDIA else device.driver
    for key in (name, f"{domain}/{name}"):
        value = device.attributes.get(key)
        if isinstance(value, dict) and isinstance(value.get("string"), str):
            return str(value["string"])
    return ""


@dataclass(frozen=True, slots=True, order=True)
class Pool:
    """The devices of one class, product, MIG profile and sharing: a row of what is served."""

    device_class: str
    product: str  # as GFD labels it (spaces as dashes); "" when the device says none
    profile: str  # the MIG profile; "" for whole GPUs
    shared: bool  # the devices allow multiple allocations (consumable capacity)
    published: int = 0
    free: int = 0  # no claim holds it (shared: no claim takes any of it), nor its counters
    shares: int = 0  # shared devices: the shares they publish
    shares_free: int = 0


def pools(devices: Devices, classes: Iterable[str]) -> list[Pool]:
    """What each of `classes` serves, by product, MIG profile and sharing."""
    rows: dict[tuple[str, str, str, bool], Counter[str]] = {}
    for name in classes:
        for device in devices.by_class.get(name, ()):
            product = _text(device, "productName").replace(" ", "-")
            key = (name, product, _text(device, "profile"), device.allow_multiple)
            row = rows.setdefault(key, Counter())
            row["published"] += 1
            row["free"] += device.key not in devices.held.taken and not devices.spent(device)
            if device.allow_multiple and (shares := _capacity(device).get("shares")):
                used = devices.held.consumed.get(device.key, {}).get("shares", Fraction(0))
                row["shares"] += floor(shares[0])
                left = 0 if devices.spent(device) else floor(shares[0] - used)
                row["shares_free"] += max(0, left)
    return sorted(
        Pool(
            *key,
            published=c["published"],
            free=c["free"],
            shares=c["shares"],
            shares_free=c["shares_free"],
        )
        for key, c in rows.items()
    )


# ---- the device plugin -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PluginCapacity:
    """One legacy resource on the device plugin: nodes' allocatable and what bound pods ask."""

    resource: str
    nodes: int  # nodes with some allocatable
    allocatable: int
    requested: int  # by pods bound to a node that have not finished

    @property
    def left(self) -> int:
        return max(0, self.allocatable - self.requested)


def plugin_capacity(
    nodes: Iterable[Obj], pods: Iterable[Obj], policy: Policy
) -> list[PluginCapacity]:
    """What the device plugin offers of each mapped resource, and what is left of it."""
    allocatable: Counter[str] = Counter()
    holders: Counter[str] = Counter()
    for node in nodes:
        for resource, value in ((node.get("status") or {}).get("allocatable") or {}).items():
            amount = parse_count(value) if policy.mapping_for(str(resource)) else None
            if amount:
                allocatable[str(resource)] += amount
                holders[str(resource)] += 1
    requested: Counter[str] = Counter()
    for pod in pods:
        spec = pod.get("spec") or {}
        if spec.get("nodeName") and (pod.get("status") or {}).get("phase") not in FINISHED:
            requested.update(legacy_devices(spec, policy))
    return [
        PluginCapacity(r, holders[r], allocatable[r], requested[r])
        for r in sorted(allocatable.keys() | requested.keys())
    ]

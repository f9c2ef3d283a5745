"""The DeviceClasses a cluster has: which exist, and which also serve an extended resource;
which of its drivers publish devices several claims share (consumable capacity), which publish
any device at all, and the node autoscalers that could add nodes with more."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, NamedTuple

from app.core.autoscalers import Autoscaler


@dataclass(frozen=True, slots=True)
class Catalog:
    """DeviceClass name -> its `spec.extendedResourceName` (None when unset)."""

    classes: Mapping[str, str | None]
    # DRA driver -> the capacities its devices with allowMultipleAllocations publish (KEP-5075
    # consumable capacity: `shares`, `memory`); None when unknown (no cluster: assumed).
    sharing: Mapping[str, frozenset[str]] | None = None
    # DRA drivers with a device in some ResourceSlice; None when unknown (no cluster: every
    # class is assumed to have devices, and nothing is said of capacity).
    published: frozenset[str] | None = None
    # DeviceClass -> the drivers its selectors name (`device.driver == "..."`); a class
    # absent or naming none has devices when any driver publishes one.
    drivers: Mapping[str, frozenset[str]] = field(default_factory=dict)
    # The node autoscalers seen, for a class without devices (capacity.py).
    autoscalers: tuple[Autoscaler, ...] = ()
    _serving: Mapping[str, tuple[str, ...]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        serving: dict[str, list[str]] = {}
        for name, ext in sorted(self.classes.items()):
            if ext is not None:
                serving.setdefault(ext, []).append(name)
        object.__setattr__(self, "_serving", {k: tuple(v) for k, v in serving.items()})

    @classmethod
    def of(cls, names: Iterable[str]) -> Catalog:
        return cls(MappingProxyType(dict.fromkeys(names)))

    @classmethod
    def from_objects(cls, objects: Iterable[Mapping[str, Any]]) -> Catalog:
        classes: dict[str, str | None] = {}
        drivers: dict[str, frozenset[str]] = {}
        for obj in objects:
            spec = obj.get("spec") or {}
            classes[obj["metadata"]["name"]] = spec.get("extendedResourceName")
            drivers[obj["metadata"]["name"]] = class_drivers(spec)
        return cls(MappingProxyType(classes), drivers=MappingProxyType(drivers))

    def seeing(
        self, slices: Iterable[Mapping[str, Any]], autoscalers: tuple[Autoscaler, ...] = ()
    ) -> Catalog:
        """This catalog as a cluster's ResourceSlices and node autoscalers make it: which
        drivers share devices and which publish any, as admission reads them."""
        facts = [slice_facts(s) for s in slices]
        return dataclasses.replace(
            self,
            sharing=sharing_of(f.sharing for f in facts),
            published=published_by(facts),
            autoscalers=autoscalers,
        )

    def shares(self, driver: str, capacity: str) -> bool:
        """Whether devices of `driver` can be shared by claims taking `capacity` of them."""
        return self.sharing is None or capacity in self.sharing.get(driver, ())

    def __contains__(self, name: object) -> bool:
        return name in self.classes

    def serving_extended_resource(self, resource: str) -> tuple[str, ...]:
        """Classes whose extendedResourceName is `resource` (KEP-5004 would serve it in-tree)."""
        return self._serving.get(resource, ())


# `device.driver == "gpu.nvidia.com"` as drivers' DeviceClasses write it: read, not evaluated
# (no CEL on the admission path); a selector that names its driver otherwise names none here.
_DRIVER_TEST = re.compile(r"""device\.driver\s*==\s*(?:"([^"]+)"|'([^']+)')""")


def class_drivers(spec: Mapping[str, Any]) -> frozenset[str]:
    """The drivers a DeviceClass's CEL selectors name with `device.driver == ...`."""
    found: set[str] = set()
    for selector in spec.get("selectors") or []:
        cel = selector.get("cel") if isinstance(selector, Mapping) else None
        expression = cel.get("expression") if isinstance(cel, Mapping) else None
        if isinstance(expression, str):
            found.update(a or b for a, b in _DRIVER_TEST.findall(expression))
    return frozenset(found)


def slice_driver(obj: Mapping[str, Any]) -> str:
    """The driver of a ResourceSlice that publishes at least one device; "" for one that
    publishes none (a pool's empty slice, or only shared counters)."""
    spec = obj.get("spec")
    if not isinstance(spec, Mapping) or not isinstance(spec.get("driver"), str):
        return ""
    devices = spec.get("devices")
    return spec["driver"] if isinstance(devices, list) and devices else ""


Sharing = tuple[str, frozenset[str]]  # one ResourceSlice: its driver, its shared capacities
NOT_SHARED: Sharing = ("", frozenset())


class SliceFacts(NamedTuple):
    """What the catalog keeps of one ResourceSlice."""

    sharing: Sharing
    publishes: str  # its driver when it publishes a device (slice_driver); "" when none


def slice_facts(obj: Mapping[str, Any]) -> SliceFacts:
    return SliceFacts(slice_sharing(obj), slice_driver(obj))


def published_by(slices: Iterable[SliceFacts]) -> frozenset[str]:
    """The drivers that publish a device in some slice."""
    return frozenset(s.publishes for s in slices if s.publishes)


def slice_sharing(obj: Mapping[str, Any]) -> Sharing:
    """What one ResourceSlice says of sharing: its driver and the capacities of its devices
    that allow multiple allocations (names in the driver's domain, unqualified)."""
    spec = obj.get("spec")
    if not isinstance(spec, Mapping) or not isinstance(spec.get("driver"), str):
        return NOT_SHARED
    driver = spec["driver"]
    found: set[str] = set()
    devices = spec.get("devices")
    for device in devices if isinstance(devices, list) else ():
        if isinstance(device, Mapping) and device.get("allowMultipleAllocations") is True:
            capacity = device.get("capacity")
            for name in capacity if isinstance(capacity, Mapping) else ():
                domain, slash, ident = str(name).rpartition("/")
                if not slash or domain == driver:
                    found.add(ident)
            found.add("")  # the device is shared, whatever it publishes
    return (driver, frozenset(found)) if found else NOT_SHARED


def sharing_of(slices: Iterable[Sharing]) -> dict[str, frozenset[str]]:
    """Driver -> the capacities any of its slices' shared devices publish."""
    merged: dict[str, set[str]] = {}
    for driver, capacities in slices:
        if driver:
            merged.setdefault(driver, set()).update(capacities)
    return {d: frozenset(c) for d, c in sorted(merged.items())}

"""The DeviceClasses a cluster has: which exist, and which also serve an extended resource."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any


@dataclass(frozen=True, slots=True)
class Catalog:
    """DeviceClass name -> its `spec.extendedResourceName` (None when unset)."""

    classes: Mapping[str, str | None]
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
        for obj in objects:
            spec = obj.get("spec") or {}
            classes[obj["metadata"]["name"]] = spec.get("extendedResourceName")
        return cls(MappingProxyType(classes))

    def __contains__(self, name: object) -> bool:
        return name in self.classes

    def serving_extended_resource(self, resource: str) -> tuple[str, ...]:
        """Classes whose extendedResourceName is `resource` (KEP-5004 would serve it in-tree)."""
        return self._serving.get(resource, ())

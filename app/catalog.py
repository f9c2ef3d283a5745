"""The DeviceClasses a cluster has: which exist, and which also serve an extended resource."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any


@dataclass(frozen=True, slots=True)
class Catalog:
    """DeviceClass name -> its `spec.extendedResourceName` (None when unset)."""

    classes: Mapping[str, str | None]

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

    def serving_extended_resource(self, resource: str) -> list[str]:
        """Classes whose extendedResourceName is `resource` (KEP-5004 would serve it in-tree)."""
        return sorted(name for name, ext in self.classes.items() if ext == resource)

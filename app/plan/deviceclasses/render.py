"""The DeviceClasses `deviceclasses` prints, one per MIG profile, as YAML."""

from __future__ import annotations

from collections.abc import Iterable

from app.core.nvidia.mig import device_class
from app.manifests import yamlwrite


def render(profiles: Iterable[str]) -> str:
    classes = [device_class(p) for p in sorted(set(profiles))]
    return yamlwrite.dump_all(classes) if classes else "# no MIG profile published\n"

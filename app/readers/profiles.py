"""The MIG profiles the NVIDIA DRA driver publishes, read from its devices' attributes: what
`gpu2dra deviceclasses` makes classes for and what `doctor`'s paths check finds unserved."""

from __future__ import annotations

from collections.abc import Iterable

from app.readers.cel.devices import Device

DRIVER = "gpu.nvidia.com"


def _string(device: Device, name: str) -> str | None:
    """A string attribute of the driver's, named plainly or with its domain."""
    value = device.attributes.get(name) or device.attributes.get(f"{DRIVER}/{name}")
    text = value.get("string") if isinstance(value, dict) else None
    return text if isinstance(text, str) else None


def published_profiles(devices: Iterable[Device]) -> list[str]:
    """The MIG profiles of the NVIDIA driver's devices, each once, sorted."""
    return sorted(
        {
            profile
            for d in devices
            if d.driver == DRIVER
            and _string(d, "type") == "mig"
            and (profile := _string(d, "profile"))
        }
    )

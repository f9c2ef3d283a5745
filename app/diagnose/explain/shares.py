"""What is left of a device that allows multiple allocations (DRA consumable capacity), as the
scheduler counts it: the capacity each claim's allocation consumed, against the device's, and
what one more request would consume (KEP-5075)."""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import suppress
from fractions import Fraction
from math import ceil
from typing import Any

from app.core.kube import Obj
from app.core.quantity import parse_quantity
from app.readers.cel.devices import Device

DeviceKey = tuple[str, str, str]  # driver, pool, device
Amounts = dict[str, Fraction]


def consumed_capacity(all_claims: list[Obj], *, but: str) -> dict[DeviceKey, Amounts]:
    """The capacity the allocations of every claim but `but` (namespace/name) consume, by
    device."""
    consumed: dict[DeviceKey, Amounts] = {}
    for claim in all_claims:
        meta = claim.get("metadata") or {}
        if f"{meta.get('namespace')}/{meta.get('name')}" == but:
            continue
        allocation = (claim.get("status") or {}).get("allocation") or {}
        for result in (allocation.get("devices") or {}).get("results") or []:
            key = (str(result.get("driver")), str(result.get("pool")), str(result.get("device")))
            amounts = consumed.setdefault(key, {})
            for name, text in (result.get("consumedCapacity") or {}).items():
                with suppress(ValueError):
                    amounts[name] = amounts.get(name, Fraction(0)) + _amount(text)
    return consumed


def capacity_requests(claim: Obj, request: str) -> Mapping[str, Any]:
    """`capacity.requests` of the claim's request named `request` ("name" or "name/sub")."""
    parent, _, sub = request.partition("/")
    for entry in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
        if entry.get("name") != parent:
            continue
        chosen = entry.get("exactly") or entry
        if sub:
            chosen = next(
                (s for s in entry.get("firstAvailable") or [] if s.get("name") == sub), {}
            )
        return (chosen.get("capacity") or {}).get("requests") or {}
    return {}


def shortfall(device: Device, wants: Mapping[str, Any], used: Amounts) -> str | None:
    """Why one more allocation of the device, asking `wants`, does not fit beside `used`;
    None when it fits."""
    for name, spec in device.capacity.items():
        if not isinstance(spec, dict) or "value" not in spec:
            continue
        try:
            total = _amount(spec["value"])
        except ValueError:
            continue
        needs = _consumes(total, spec.get("requestPolicy"), wants.get(name))
        if needs is None:
            continue
        taken = used.get(name, Fraction(0))
        if taken + needs > total:
            return (
                f"{_text(taken)} of its {_text(total)} {name} consumed by other claims, "
                f"this request needs {_text(needs)}"
            )
    return None


def _consumes(total: Fraction, policy: Any, asked: Any) -> Fraction | None:
    """What a request consumes of one capacity: what it asks, rounded up to the policy's
    valid values; the policy's default when it asks nothing; the whole capacity when it asks
    nothing and there is no default. None: unreadable, left to the scheduler."""
    try:
        policy = policy if isinstance(policy, dict) else {}
        if asked is None:
            default = policy.get("default")
            return total if default is None else _amount(default)
        amount = _amount(asked)
        if values := policy.get("validValues"):
            return min((v for v in map(_amount, values) if v >= amount), default=amount)
        if isinstance(span := policy.get("validRange"), dict):
            low = _amount(span.get("min", "0"))
            step = _amount(span["step"]) if span.get("step") else None
            if amount < low:
                return low
            return low + ceil((amount - low) / step) * step if step else amount
        return amount
    except (ValueError, TypeError, ZeroDivisionError):
        return None


def _amount(text: Any) -> Fraction:
    return parse_quantity(str(text)).value


def _text(value: Fraction) -> str:
    """Memory in Mi, one unit for whole GPUs (the driver writes 40Gi) and MIG devices
    (19968Mi); counts as they are."""
    mebibytes = value / 2**20
    if value >= 2**20 and mebibytes.denominator == 1:
        return f"{mebibytes.numerator}Mi"
    return str(value.numerator) if value.denominator == 1 else f"{float(value):g}"

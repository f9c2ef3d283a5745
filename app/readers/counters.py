"""Shared counters of partitionable devices (DRA, KEP-4815): a pool publishes counter sets
(`spec.sharedCounters` of one of its slices) and each device says what it takes of them
(`consumesCounters`). The scheduler allocates a device only if, for every counter it consumes,
what its counter set holds, less what the pool's allocated devices consume, covers it: with
one MIG placement allocated, another whose memory slices overlap it is not free.

A pure function of the devices (app/readers/cel/devices.py) and the allocated ones.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping
from contextlib import suppress
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from app.core.quantity import parse_quantity
from app.readers.cel.devices import Device

DeviceKey = tuple[str, str, str]  # driver, pool, device
CounterKey = tuple[str, str, str, str]  # driver, pool, counter set, counter


def _amount(spec: Any) -> Fraction | None:
    value = spec.get("value") if isinstance(spec, dict) else spec
    with suppress(ValueError):
        return parse_quantity(str(value)).value
    return None


def consumes(device: Device) -> Iterator[tuple[CounterKey, Fraction]]:
    """Each counter the device consumes, and how much of it."""
    for entry in device.consumes:
        counter_set = str(entry.get("counterSet", ""))
        for name, spec in (entry.get("counters") or {}).items():
            amount = _amount(spec)
            if amount is not None:
                yield (device.driver, device.pool, counter_set, str(name)), amount


@dataclass(frozen=True, slots=True)
class Spent:
    """What the allocated devices consume of each counter, and which devices consume it."""

    used: Mapping[CounterKey, Fraction]
    by: Mapping[CounterKey, tuple[DeviceKey, ...]]


def spent(devices: Iterable[Device], allocated: Collection[DeviceKey]) -> Spent:
    """The counters the `allocated` devices consume (a device counts once, however many
    claims share it)."""
    used: dict[CounterKey, Fraction] = {}
    by: dict[CounterKey, tuple[DeviceKey, ...]] = {}
    for device in devices:
        if device.key not in allocated:
            continue
        for key, amount in consumes(device):
            used[key] = used.get(key, Fraction(0)) + amount
            if amount > 0:
                by[key] = (*by.get(key, ()), device.key)
    return Spent(used, by)


def short(device: Device, counters: Spent) -> tuple[CounterKey, ...]:
    """The counters the device consumes that have not enough left for it; none for a device
    already allocated (its counters are spent on itself) or whose counter set is not
    published."""
    if any(device.key in holders for holders in counters.by.values()):
        return ()
    lacking = []
    for key, amount in consumes(device):
        total = _amount(device.counter_sets.get(key[2], {}).get(key[3]))
        if total is not None and amount > 0 and total - counters.used.get(key, 0) < amount:
            lacking.append(key)
    return tuple(lacking)

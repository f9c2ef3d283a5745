"""Shared GPUs as DRA consumable capacity (KEP-5075): pods that shared a GPU under the device
plugin (time-slicing or MPS replicas, HAMi's memory fractions) keep sharing one under DRA.

A device that publishes `allowMultipleAllocations: true` is allocated to several claims, each
taking part of its `capacity`: the NVIDIA driver's `--consumable-shares=N` publishes a
capacity `shares` of N per GPU (a claim takes 1 unless it asks for more) and makes `memory`
consumable. One device-plugin replica becomes a claim for one device taking the mapping's
`shares`; `nvidia.com/gpumem: M` (MiB per GPU, HAMi) becomes `memory: <M>Mi` of each device.

Within one request the allocator picks distinct devices (it resumes after the device it just
took), so `count: N` is N GPUs; `shares: N` of one device is one GPU. N time-sliced replicas
were either, as the device plugin found them free: neither keeps them, and such a pod is left.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from app.core.catalog import Catalog
from app.core.kube import Obj
from app.core.outcomes import Code, Finding
from app.core.resources import LegacyRequest, parse_count

SHARES = "shares"
MEMORY = "memory"


class Capacity(NamedTuple):
    """What one request takes of a shared device, and the selectors that find such devices."""

    requests: tuple[tuple[str, str], ...]  # capacity name -> quantity, sorted
    selectors: tuple[str, ...]


NONE = Capacity((), ())


def capacity(lg: LegacyRequest, shared: bool) -> Capacity:
    """The capacity the request takes: shares when it picks shared GPUs and its mapping takes
    them, memory when it asked HAMi for a memory fraction; NONE for a whole device."""
    consumable = lg.mapping.consumable
    if consumable is None:
        return NONE
    domain = f"device.capacity['{consumable.driver}']"
    requests, selectors = [], []
    if (shared or lg.shared) and consumable.shares:
        requests.append((SHARES, str(consumable.shares)))
        selectors.append(f"'{SHARES}' in {domain}")
    if lg.memory:
        requests.append((MEMORY, f"{lg.memory}Mi"))
        # Every GPU publishes its memory: only a shared one has it to give in parts.
        selectors.append(f"device.allowMultipleAllocations && '{MEMORY}' in {domain}")
    return Capacity(tuple(sorted(requests)), tuple(selectors)) if requests else NONE


def problems(used: Iterable[LegacyRequest], shared: bool, catalog: Catalog) -> list[Finding]:
    """Why the requests cannot move onto shared devices: N replicas, or a cluster whose
    drivers publish no device with the capacity it would take."""
    said: list[Finding] = []
    missing: dict[tuple[str, str], list[str]] = {}
    for lg in used:
        consumable = lg.mapping.consumable
        if consumable is None:
            continue
        takes = capacity(lg, shared)
        names = [name for name, _ in takes.requests]
        if SHARES in names and lg.devices > 1:
            said.append(Finding(Code.SHARED_COUNT, resource=lg.resource, count=lg.devices))
        for name in names:
            if not catalog.shares(consumable.driver, name):
                missing.setdefault((consumable.driver, name), []).append(lg.resource)
    for (driver, name), resources in sorted(missing.items()):
        said.append(
            Finding(
                Code.NOT_SHARING,
                driver=driver,
                capacity=name,
                resources=", ".join(sorted(set(resources))),
                flag="memory" if name == MEMORY else "<the device plugin's replicas>",
            )
        )
    return said


def note(used: Iterable[LegacyRequest], shared: bool) -> Finding | None:
    """What a translated pod's owner should know: its claims take part of shared devices."""
    taken = sorted(
        {
            f"{lg.resource} ({', '.join(f'{n}: {q}' for n, q in c.requests)} per device)"
            for lg in used
            if (c := capacity(lg, shared)).requests
        }
    )
    return Finding(Code.CONSUMABLE, taken="; ".join(taken)) if taken else None


def capacities(used: Iterable[LegacyRequest]) -> tuple[str, ...]:
    """The legacy resources the requests turn into capacity (a memory resource)."""
    return tuple(
        sorted({lg.mapping.consumable.memory for lg in used if lg.memory and lg.mapping.consumable})
    )


def with_memory(
    who: str,
    container: Obj,
    found: list[LegacyRequest],
    *,
    unmapped: list[tuple[str, str]],
    warn: list[Finding],
) -> list[LegacyRequest] | None:
    """The container's requests with the memory fraction its mapping reads (HAMi's
    `nvidia.com/gpumem`, MiB per GPU) taken in, and that resource no longer unmapped; None
    when the amount is not a whole, positive number of MiB (the pod is left)."""
    wanted = {
        lg.mapping.consumable.memory: i
        for i, lg in enumerate(found)
        if lg.mapping.consumable is not None and lg.mapping.consumable.memory and lg.devices
    }
    if not wanted or not any((who, r) in unmapped for r in wanted):
        return found
    resources = container["resources"]
    for resource, index in wanted.items():
        if (who, resource) not in unmapped:
            continue
        unmapped.remove((who, resource))
        limits, requests = resources.get("limits"), resources.get("requests")
        limits = limits if isinstance(limits, dict) else {}
        requests = requests if isinstance(requests, dict) else {}
        amount = limits.get(resource, requests.get(resource))
        mib = parse_count(amount)
        if not mib or (resource in requests and parse_count(requests[resource]) != mib):
            warn.append(Finding(Code.MEMORY_AMOUNT, who=who, resource=resource, amount=amount))
            return None
        found[index] = found[index]._replace(memory=mib)
    return found

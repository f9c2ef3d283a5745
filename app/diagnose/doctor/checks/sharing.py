"""The `sharing` check: which pools publish devices several claims share (consumable capacity,
KEP-5075) and what each shared device offers, against the mappings that move pods on shared
GPUs onto them (a mapping's `consumable`)."""

from __future__ import annotations

from typing import Any

from app.core.catalog import sharing_of, slice_sharing
from app.core.consumable import MEMORY, SHARES
from app.core.policy import Policy
from app.diagnose.doctor.checks.verdict import Verdict, unreadable
from app.diagnose.doctor.facts import Facts
from app.readers.client import ReadError

FIX = (
    "run the NVIDIA DRA driver with --consumable-shares=<the device plugin's replicas> (its "
    "ConsumableShares feature gate on; =memory for memory only); on Kubernetes 1.34 and 1.35 "
    "turn on the DRAConsumableCapacity feature gate"
)


def _capacity(value: Any) -> str:
    """`4 (default 1)`: a capacity's value and what a claim takes unless it asks."""
    if not isinstance(value, dict):
        return "?"
    policy = value.get("requestPolicy")
    default = policy.get("default") if isinstance(policy, dict) else None
    return f"{value.get('value')}" + (f" (default {default})" if default is not None else "")


def _pools(slices: list[Any]) -> list[str]:
    """A line per pool with shared devices: how many, and what the first one offers."""
    pools: dict[tuple[str, str], list[Any]] = {}
    totals: dict[tuple[str, str], int] = {}
    for obj in slices:
        spec = obj.get("spec") if isinstance(obj, dict) else None
        if not isinstance(spec, dict):
            continue
        pool = spec.get("pool")
        key = (str(spec.get("driver")), str(pool.get("name") if isinstance(pool, dict) else ""))
        devices = [d for d in spec.get("devices") or () if isinstance(d, dict)]
        totals[key] = totals.get(key, 0) + len(devices)
        shared = [d for d in devices if d.get("allowMultipleAllocations") is True]
        if shared:
            pools.setdefault(key, []).extend(shared)
    lines = []
    for (driver, pool), shared in sorted(pools.items()):
        capacity = shared[0].get("capacity")
        offers = ", ".join(
            f"{name} {_capacity(value)}"
            for name, value in sorted((capacity if isinstance(capacity, dict) else {}).items())
        )
        lines.append(
            f"{driver} pool {pool}: {len(shared)} of {totals[driver, pool]} device(s) shared"
            + (f"; {shared[0].get('name')} offers {offers}" if offers else "")
        )
    return lines


def check_sharing(facts: Facts, policy: Policy) -> Verdict:
    slices = facts.slices
    wanted = {m.resource: m.consumable for m in policy.mappings if m.consumable is not None}
    if isinstance(slices, ReadError):
        return unreadable(slices)
    sharing = sharing_of(slice_sharing(s) for s in slices if isinstance(s, dict))
    pools = _pools(slices)
    if not wanted:
        said = f"{len(pools)} pool(s) share devices" if pools else "no pool shares devices"
        return Verdict(
            "PASS",
            f"{said}; no mapping moves pods on shared GPUs onto them (policy: consumable unset, "
            "such pods stay on the device plugin)",
            details=tuple(pools),
        )
    missing = []
    for resource, consumable in sorted(wanted.items()):
        published = sharing.get(consumable.driver, frozenset())
        needs = ([SHARES] if consumable.shares else []) + ([MEMORY] if consumable.memory else [])
        for capacity in needs:
            if capacity not in published:
                missing.append(
                    f"{resource}: no device of driver {consumable.driver} is shared with a "
                    f"consumable `{capacity}`; its pods on shared GPUs stay on the device plugin"
                )
    if missing:
        return Verdict(
            "WARN",
            f"{len(pools)} pool(s) share devices, not as the policy's consumable mappings need",
            FIX,
            tuple(missing + pools),
        )
    return Verdict(
        "PASS",
        f"{len(pools)} pool(s) share devices with what the consumable mappings take "
        f"({', '.join(sorted(wanted))})",
        details=tuple(pools),
    )

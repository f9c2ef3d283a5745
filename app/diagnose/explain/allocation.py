"""Why a request of a claim has devices or not: each device of its class against the request's
selectors, as the scheduler evaluates them, and whether another claim holds it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from app.core.kube import Obj
from app.core.resources import DraRequest
from app.diagnose.explain.shares import Amounts, DeviceKey, shortfall
from app.diagnose.explain.step import Step
from app.readers.cel.devices import Device, SelectorError, class_selectors, matches

MAX_DEVICE_LINES = 16
# What the scheduler says of a pod whose claims it cannot allocate on any node.
CANNOT_ALLOCATE = "cannot allocate all claims"


def allocated_to(all_claims: list[Obj]) -> dict[tuple[str, str, str], str]:
    owners = {}
    for claim in all_claims:
        meta = claim.get("metadata") or {}
        allocation = (claim.get("status") or {}).get("allocation") or {}
        for r in (allocation.get("devices") or {}).get("results") or []:
            key = (str(r.get("driver")), str(r.get("pool")), str(r.get("device")))
            owners[key] = f"{meta.get('namespace')}/{meta.get('name')}"
    return owners


def analyse_request(
    request: DraRequest,
    *,
    claim: str,
    classes: Mapping[str, Obj],
    devices: list[Device],
    owners: Mapping[tuple[str, str, str], str],
    wants: Mapping[str, Any] | None = None,
    consumed: Mapping[DeviceKey, Amounts] | None = None,
    refused: str | None = None,
) -> Step:
    """Why a request of an unallocated claim has no devices: each device of its class, whether
    it matches the request's selectors, and whether another claim holds it, or, for a device
    that allows multiple allocations, what is left of its capacity for what the request
    `wants` beside what other claims `consumed`. `refused`: the scheduler's reason when it
    refused the pod."""
    name, class_name, need = request.name, request.device_class, request.devices
    wants_text = f"{need} x {class_name}" if need else f"all {class_name}"
    device_class = classes.get(class_name)
    if device_class is None:
        return Step(
            "FAIL", f"request {name} asks for {wants_text}: DeviceClass {class_name} does not exist"
        )
    lines, usable, errors = [], Counter[str](), 0
    in_class = matching = taken = shared = full = 0
    exprs = request.selectors
    for device in devices:
        where = f"{device.node or device.pool}/{device.name}"
        try:
            if not all(matches(e, device) for e in class_selectors(device_class)):
                continue
        except SelectorError as err:
            errors += 1
            lines.append(f"{where}: DeviceClass selector fails: {err}")
            continue
        in_class += 1
        verdict = _match(exprs, device)
        if verdict is not None:
            if verdict.startswith("selector"):
                errors += 1
            lines.append(f"{where}: {verdict}")
            continue
        matching += 1
        owner = owners.get(device.key)
        if owner is not None and owner != claim and not device.allow_multiple:
            taken += 1
            lines.append(f"{where}: matches, but allocated to claim {owner}")
            continue
        if device.allow_multiple:
            short = shortfall(device, wants or {}, (consumed or {}).get(device.key, {}))
            if short is not None:
                taken, full = taken + 1, full + 1
                lines.append(f"{where}: matches and is shared, but {short}")
                continue
            shared += 1
        usable[device.node] += 1
        room = "shared, with room" if device.allow_multiple else "free"
        lines.append(f"{where}: matches and is {room}")
    anywhere = usable.pop("", 0)  # devices not bound to a node go with any node
    best_node, best = max(usable.items(), key=lambda kv: kv[1], default=("", 0))
    best += anywhere
    counts = (
        f"{in_class} device(s) in the class, {matching} match the selectors, {taken} of those "
        f"are allocated to other claims"
    )
    if len(lines) > MAX_DEVICE_LINES:
        lines = [*lines[:MAX_DEVICE_LINES], f"... and {len(lines) - MAX_DEVICE_LINES} more"]
    if errors:
        return Step(
            "FAIL",
            f"request {name} asks for {wants_text}: a selector fails on {errors} device(s); the "
            "scheduler aborts allocation with a CEL runtime error",
            tuple(lines),
        )
    if need and best >= need and shared and refused and CANNOT_ALLOCATE in refused:
        return Step(
            "WARN",
            f"request {name} asks for {wants_text}: {counts}; {best} on node {best_node or '-'} "
            f"have room, yet the scheduler refused the pod ({CANNOT_ALLOCATE}): it can count "
            "a claim it is allocating twice on a shared device, and then tries the pod again "
            "only after 5 minutes (kube-scheduler --pod-max-in-unschedulable-pods-duration)",
            (*lines, "docs/concepts/sharing.md#a-pod-refused-the-last-share"),
        )
    if need and best >= need:
        return Step(
            "info",
            f"request {name} asks for {wants_text}: {counts}; {best} free on node "
            f"{best_node or '-'} is enough: see the scheduler's events",
            tuple(lines),
        )
    if not in_class:
        why = "no device of the class is published (no driver, or no such devices)"
    elif not need:
        why = "allocationMode All"
    elif not matching:
        why = "no device matches the request's selectors"
    elif matching < need:
        why = f"only {matching} device(s) match the request's selectors"
    elif matching - taken < need:
        why = "capacity exhausted: the matching devices are allocated to other claims"
        if full:
            why += ", or their shared capacity is consumed"
    else:
        why = f"no single node has {need} free matching device(s) (at most {best})"
    return Step("FAIL", f"request {name} asks for {wants_text}: {why}; {counts}", tuple(lines))


def _match(exprs: tuple[str, ...], device: Device) -> str | None:
    """None when every selector matches; else what does not."""
    for number, expr in enumerate(exprs, 1):
        try:
            if not matches(expr, device):
                return f"does not match selector #{number}: {expr}"
        except SelectorError as err:
            return f"selector #{number} fails: {err}"
    return None

"""Why a request of a claim has devices or not: each device of its class against the request's
selectors, as the scheduler evaluates them, and whether another claim holds it or the shared
counters it consumes (partitionable devices: DynamicMIG placements)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from app.core.kube import Obj
from app.core.resources import DraRequest
from app.diagnose.explain.shares import Amounts, DeviceKey, shortfall
from app.diagnose.explain.step import Step
from app.readers.cel.devices import Device, SelectorError, class_selectors, matches
from app.readers.counters import Spent, spent
from app.readers.counters import short as counters_short

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
    asks = f"request {name} asks for " + (f"{need} x {class_name}" if need else f"all {class_name}")
    device_class = classes.get(class_name)
    if device_class is None:
        return Step("FAIL", f"{asks}: DeviceClass {class_name} does not exist")
    others = {key for key, owner in owners.items() if owner != claim}
    survey = _Survey(claim, owners, wants or {}, consumed or {}, spent(devices, others))
    for device in devices:
        survey.look(device, device_class, request.selectors)
    best_node, best = survey.best()
    counts = (
        f"{survey.in_class} device(s) in the class, {survey.matching} match the selectors, "
        f"{survey.taken} of those are allocated to other claims"
        + (" or their counters spent" if survey.drained else "")
    )
    lines = survey.lines
    if len(lines) > MAX_DEVICE_LINES:
        lines = [*lines[:MAX_DEVICE_LINES], f"... and {len(lines) - MAX_DEVICE_LINES} more"]
    if survey.errors:
        return Step(
            "FAIL",
            f"{asks}: a selector fails on {survey.errors} device(s); the scheduler aborts "
            "allocation with a CEL runtime error",
            tuple(lines),
        )
    if need and best >= need and survey.shared and refused and CANNOT_ALLOCATE in refused:
        return Step(
            "WARN",
            f"{asks}: {counts}; {best} on node {best_node or '-'} have room, yet the scheduler "
            f"refused the pod ({CANNOT_ALLOCATE}): it can count a claim it is allocating twice "
            "on a shared device, and then tries the pod again only after 5 minutes "
            "(kube-scheduler --pod-max-in-unschedulable-pods-duration)",
            (*lines, "docs/concepts/sharing.md#a-pod-refused-the-last-share"),
        )
    if need and best >= need:
        return Step(
            "info",
            f"{asks}: {counts}; {best} free on node {best_node or '-'} is enough: see the "
            "scheduler's events",
            tuple(lines),
        )
    return Step("FAIL", f"{asks}: {survey.why(need, best)}; {counts}", tuple(lines))


@dataclass
class _Survey:
    """The devices of a class as one request sees them, counted as they are looked at."""

    claim: str
    owners: Mapping[tuple[str, str, str], str]
    wants: Mapping[str, Any]
    consumed: Mapping[DeviceKey, Amounts]
    counters: Spent
    lines: list[str] = field(default_factory=list)
    usable: Counter[str] = field(default_factory=Counter)
    in_class: int = 0
    matching: int = 0
    taken: int = 0  # matching, but held by other claims (or their shared capacity used up)
    full: int = 0  # of those, shared devices with no room left
    drained: int = 0  # of those, devices whose shared counters other devices' allocations take
    shared: int = 0  # usable devices that allow multiple allocations
    errors: int = 0

    def look(self, device: Device, device_class: Obj, selectors: tuple[str, ...]) -> None:
        where = f"{device.node or device.pool}/{device.name}"
        try:
            if not all(matches(e, device) for e in class_selectors(device_class)):
                return
        except SelectorError as err:
            self.errors += 1
            self.lines.append(f"{where}: DeviceClass selector fails: {err}")
            return
        self.in_class += 1
        verdict = _match(selectors, device)
        if verdict is not None:
            if verdict.startswith("selector"):
                self.errors += 1
            self.lines.append(f"{where}: {verdict}")
            return
        self.matching += 1
        owner = self.owners.get(device.key)
        if owner is not None and owner != self.claim and not device.allow_multiple:
            self.taken += 1
            self.lines.append(f"{where}: matches, but allocated to claim {owner}")
            return
        if lacking := counters_short(device, self.counters):
            self.taken, self.drained = self.taken + 1, self.drained + 1
            held = self._held(lacking)
            self.lines.append(f"{where}: matches, but its counters are spent: {held}")
            return
        if device.allow_multiple:
            short = shortfall(device, self.wants, self.consumed.get(device.key, {}))
            if short is not None:
                self.taken, self.full = self.taken + 1, self.full + 1
                self.lines.append(f"{where}: matches and is shared, but {short}")
                return
            self.shared += 1
        self.usable[device.node] += 1
        room = "shared, with room" if device.allow_multiple else "free"
        self.lines.append(f"{where}: matches and is {room}")

    def _held(self, lacking: tuple[tuple[str, str, str, str], ...]) -> str:
        """Which claims take the counters a device lacks: `memory-slice-3 taken by claim ns/x`."""
        said = []
        for key in lacking[:3]:
            claims = sorted({self.owners.get(d, "?") for d in self.counters.by.get(key, ())})
            said.append(f"{key[3]} taken by claim {', '.join(claims) or '?'}")
        more = f" (and {len(lacking) - 3} more)" if len(lacking) > 3 else ""
        return "; ".join(said) + more

    def best(self) -> tuple[str, int]:
        """The node with the most usable devices, and how many it can use (devices not bound
        to a node go with any node)."""
        usable = Counter(self.usable)
        anywhere = usable.pop("", 0)
        node, most = max(usable.items(), key=lambda kv: kv[1], default=("", 0))
        return node, most + anywhere

    def why(self, need: int, best: int) -> str:
        """Why fewer than `need` devices are usable on any one node."""
        if not self.in_class:
            return "no device of the class is published (no driver, or no such devices)"
        if not need:
            return "allocationMode All"
        if not self.matching:
            return "no device matches the request's selectors"
        if self.matching < need:
            return f"only {self.matching} device(s) match the request's selectors"
        if self.matching - self.taken < need:
            shared = ", or their shared capacity is consumed" if self.full else ""
            if self.drained:
                shared += ", or the shared counters they consume are taken by other devices"
            return f"capacity exhausted: the matching devices are allocated to other claims{shared}"
        return f"no single node has {need} free matching device(s) (at most {best})"


def _match(exprs: tuple[str, ...], device: Device) -> str | None:
    """None when every selector matches; else what does not."""
    for number, expr in enumerate(exprs, 1):
        try:
            if not matches(expr, device):
                return f"does not match selector #{number}: {expr}"
        except SelectorError as err:
            return f"selector #{number} fails: {err}"
    return None

"""Init containers and the claims they reuse: the device plugin hands a regular init
container's devices on to the app containers, so an init container reuses an app container's
claim of the same shape where one covers it (docs/concepts/translation.md#rule-init-containers),
and the pod is warned when its claims hold more devices than the device plugin gave it."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from app.core.kube import Obj
from app.core.outcomes import Code, Finding
from app.core.resources import LegacyRequest, is_regular_init

# The containers with mapped requests, and those requests, by (field, index).
Legacy = dict[tuple[str, int], tuple[Obj, list[LegacyRequest]]]


def more_devices(
    legacy: Legacy, claims: list[Claim], own_init: dict[str, list[str]]
) -> list[Finding]:
    """A warning per resource of which the claims hold more devices than the device plugin
    gave the same containers: an init container whose devices no app container could
    inherit. An init container that is alone in asking (a model download step, say) costs
    nothing more: the device plugin reserved its devices for the whole pod too."""
    running: Counter[str] = Counter()
    init: Counter[str] = Counter()
    for (field, _), (container, found) in legacy.items():
        for lg in found:
            if is_regular_init(field, container):
                init[lg.resource] = max(init[lg.resource], lg.devices)
            else:
                running[lg.resource] += lg.devices
    claimed: Counter[str] = Counter()
    for claim in claims:
        claimed[claim.resource] += claim.devices
    said = []
    for resource, names in own_init.items():
        before = max(running[resource], init[resource])
        if claimed[resource] > before:
            said.append(
                Finding(
                    Code.MORE_DEVICES,
                    names=", ".join(map(repr, names)),
                    resource=resource,
                    claimed=claimed[resource],
                    before=before,
                )
            )
    return said


@dataclass(slots=True)
class Claim:
    name: str
    template: Obj  # the ResourceClaimTemplate it is made from
    resource: str  # the legacy resource it stands for
    device_class: str
    devices: int

    @property
    def template_name(self) -> str:
        return self.template["metadata"]["name"]  # type: ignore[no-any-return]


# What an init container can reuse of an app container's claims: the same resource (the device
# plugin hands devices on within one resource only), DeviceClass, selectors, config and the
# capacity it takes of a shared device.
Shape = tuple[str, str, tuple[str, ...], str, tuple[tuple[str, str], ...]]


def cover(need: int, by_count: dict[int, list[Claim]], exclude: list[str]) -> list[Claim] | None:
    """App claims an init container can reuse for `need` devices: the smallest single claim
    that covers it (the first of its count), else the largest ones until they do; None if all
    of them fall short. `by_count` holds the app claims of one shape by count, in pod order:
    at most 32 counts, so a pod with thousands of containers costs no more per container."""
    for count in sorted(c for c in by_count if c >= need):
        for claim in by_count[count]:
            if claim.name not in exclude:
                return [claim]
    chosen: list[Claim] = []
    total = 0
    for count in sorted(by_count, reverse=True):
        for claim in by_count[count]:
            if claim.name in exclude:
                continue
            chosen.append(claim)
            total += count
            if total >= need:
                return chosen
    return None

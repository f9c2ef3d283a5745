"""ResourceQuota and translation: a translated pod must never let its namespace escape a GPU
quota.

A legacy quota (`requests.nvidia.com/gpu: 4`) counts pods' extended-resource requests. A
translated pod asks for none: its devices are counted by ResourceClaims, under
`<class>.deviceclass.resource.k8s.io/devices`. Only where the API server runs KEP-5004
(gate DRAExtendedResource) and the class carries `extendedResourceName: <resource>` are
claims of that class also counted under `requests.<resource>`. The gate's state cannot be
read; the field can: with the gate off the API server drops it, so a class that shows it
is served by a cluster that counts it.

A claim on a shared device (consumable capacity) counts its devices like any other: one
time-sliced replica was one `nvidia.com/gpu` and is one device. What it takes of the device's
capacity no quota counts, so a legacy quota on a resource that becomes capacity (HAMi's
`requests.nvidia.com/gpumem`) cannot be kept on the DRA side: such pods stay.

The DRA-side quota that `gpu2dra quota` prints to guard a class is app/plan/quota/mirror.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from app.core.catalog import Catalog
from app.core.kube import Obj
from app.core.outcomes import Code, Finding
from app.core.policy import Policy

DEVICES_SUFFIX = ".deviceclass.resource.k8s.io/devices"
# Both spellings say "limit this resource"; the API server counts only `requests.` for an
# extended resource (a `limits.` key is accepted and never used), yet the intent is plain.
LEGACY_PREFIXES = ("requests.", "limits.")

Use = tuple[str, str]  # (legacy resource, DeviceClass) a translation turns it into


class Quota(NamedTuple):
    """One ResourceQuota of a namespace, as far as gpu2dra reads it."""

    name: str
    hard: Mapping[str, Any]  # spec.hard: resource -> quantity
    scoped: bool = False  # spec.scopes or spec.scopeSelector: it counts only some pods

    @classmethod
    def of(cls, obj: Obj) -> Quota:
        spec = obj.get("spec") or {}
        hard = spec.get("hard")
        scoped = bool(spec.get("scopes") or spec.get("scopeSelector"))
        return cls(
            str(obj["metadata"]["name"]), dict(hard) if isinstance(hard, dict) else {}, scoped
        )


def devices_key(device_class: str) -> str:
    """`gpu.nvidia.com.deviceclass.resource.k8s.io/devices`: claims' devices of one class."""
    return device_class + DEVICES_SUFFIX


def legacy_resource(key: str) -> str | None:
    """`requests.nvidia.com/gpu` -> `nvidia.com/gpu`; None for any other quota key."""
    for prefix in LEGACY_PREFIXES:
        if key.startswith(prefix):
            return key[len(prefix) :]
    return None


def legacy_use(key: str, policy: Policy) -> Use | None:
    """(legacy resource, DeviceClass) of a quota key that limits a resource the policy maps
    (`requests.nvidia.com/gpu` -> `nvidia.com/gpu`, `gpu.nvidia.com`); None for any other key."""
    resource = legacy_resource(key)
    hit = None if resource is None else policy.mapping_for(resource)
    if resource is None or hit is None:
        return None
    return resource, hit[0].device_class


def counted_as_legacy(device_class: str, resource: str, catalog: Catalog) -> bool:
    """Claims of `device_class` count against `requests.<resource>` (KEP-5004 is served)."""
    return catalog.classes.get(device_class) == resource


class Unguarded(NamedTuple):
    """A legacy quota a translation would lift: nothing limits the class it turns into."""

    resource: str
    device_class: str  # "" for a resource that becomes consumable capacity: nothing counts it
    limits: tuple[tuple[str, str], ...]  # (quota name, key) that limit the resource


def unguarded(
    uses: Iterable[Use],
    quotas: Iterable[Quota],
    catalog: Catalog,
    capacities: Iterable[str] = (),
) -> tuple[Unguarded, ...]:
    """What translating `uses` would lift in a namespace with `quotas`; () when nothing.

    A resource limited by a legacy quota may be translated only when some quota of the
    namespace limits its class's devices too, or the class's claims count against it; a
    resource that becomes consumable capacity (`capacities`) never: no quota counts that."""
    quotas = tuple(quotas)
    if not quotas:
        return ()
    keys = {key for q in quotas for key in q.hard}
    found = []
    for resource in sorted(set(capacities)):
        if limits := _limits(resource, quotas):
            found.append(Unguarded(resource, "", limits))
    for resource, device_class in sorted(set(uses)):
        limits = _limits(resource, quotas)
        if not limits or devices_key(device_class) in keys:
            continue
        if counted_as_legacy(device_class, resource, catalog):
            continue
        found.append(Unguarded(resource, device_class, limits))
    return tuple(found)


def _limits(resource: str, quotas: Iterable[Quota]) -> tuple[tuple[str, str], ...]:
    """(quota name, key) of each legacy quota key that limits `resource`."""
    return tuple(
        (q.name, prefix + resource)
        for q in quotas
        for prefix in LEGACY_PREFIXES
        if prefix + resource in q.hard
    )


def capacity_resources(policy: Policy) -> frozenset[str]:
    """The legacy resources the policy turns into consumable capacity (HAMi's gpumem)."""
    return frozenset(
        m.consumable.memory for m in policy.mappings if m.consumable and m.consumable.memory
    )


def namespace_uses(quotas: Iterable[Quota], policy: Policy) -> tuple[Use, ...]:
    """(resource, class) of every mapped legacy resource the quotas limit."""
    uses = {use for q in quotas for key in q.hard if (use := legacy_use(key, policy))}
    return tuple(sorted(uses))


def fix_line(namespace: str) -> str:
    return f"gpu2dra quota -n {namespace} | kubectl apply -f -"


def unguarded_text(found: Iterable[Unguarded]) -> str:
    """`ResourceQuota gpus limits requests.nvidia.com/gpu and nothing limits <key>`."""
    parts = []
    for u in found:
        named = ", ".join(f"ResourceQuota {name} limits {key}" for name, key in u.limits)
        if not u.device_class:
            parts.append(f"{named}, which becomes DRA consumable capacity no quota counts")
            continue
        parts.append(f"{named} and no quota limits {devices_key(u.device_class)}")
    return "; ".join(parts)


def quota_warning(namespace: str, found: Iterable[Unguarded]) -> Finding:
    """The warning of a pod left on the device plugin so that it stays under its quota."""
    return Finding(Code.QUOTA, found=unguarded_text(found), fix=fix_line(namespace))

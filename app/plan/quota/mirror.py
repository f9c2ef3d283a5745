"""The DRA-side ResourceQuota that mirrors a legacy one: per DeviceClass, the devices its
legacy resources' quota allowed. Pure; what `gpu2dra quota` prints (render.py), and what the
admission guard (app/core/quota.py) then finds guarding the class."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection
from typing import NamedTuple

from app.core.kube import MANAGED_BY, Obj
from app.core.policy import Policy
from app.core.quota import Quota, devices_key, legacy_use
from app.core.resources import parse_count

QUOTA_PREFIX = "gpu2dra-dra-"
MIRRORS = "gpu2dra.io/mirrors"  # annotation: the legacy quota a generated one stands beside


class Mirror(NamedTuple):
    quota: Obj  # the ResourceQuota to apply
    notes: tuple[str, ...]  # what a reader should know, printed as YAML comments


def is_mirror(quota: Quota) -> bool:
    return quota.name.startswith(QUOTA_PREFIX)


def mirror(
    namespace: str, quota: Quota, policy: Policy, limited: Collection[str] = ()
) -> Mirror | None:
    """The ResourceQuota that limits DRA devices as `quota` limits legacy resources: per
    class, the sum of its resources' limits (the smaller of requests. and limits. when both
    are set); None when the quota limits no mapped resource, or the DRA side is limited
    already (in `quota`, or by a key in `limited`: the namespace's other quotas')."""
    amounts: dict[str, dict[str, int]] = defaultdict(dict)  # class -> resource -> devices
    notes: list[str] = []
    for key, value in quota.hard.items():
        use = legacy_use(key, policy)
        if use is None:
            continue
        resource, device_class = use
        if devices_key(device_class) in quota.hard or devices_key(device_class) in limited:
            continue
        count = parse_count(value)
        if count is None:
            notes.append(f"{key}: {value!r} is not a whole number of devices; left out")
            continue
        known = amounts[device_class].get(resource)
        amounts[device_class][resource] = count if known is None else min(known, count)
        if key.startswith("limits."):
            notes.append(
                f"{key}: the API server counts only requests. for an extended resource; "
                "the DRA side enforces this limit"
            )
    if not any(amounts.values()):
        return None
    hard: dict[str, str] = {}
    for device_class, per in sorted(amounts.items()):
        if not per:
            continue
        hard[devices_key(device_class)] = str(sum(per.values()))
        if len(per) > 1:
            split = ", ".join(f"{r} {n}" for r, n in sorted(per.items()))
            notes.append(
                f"{device_class}: the sum of {split} is kept; the split between them is "
                "not (one DeviceClass serves them all)"
            )
    if quota.scoped:
        notes.append(f"{quota.name} has scopes; claims have none, so this quota counts every claim")
    name = (QUOTA_PREFIX + quota.name)[:253].rstrip("-.")
    obj = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": dict(MANAGED_BY),
            "annotations": {MIRRORS: quota.name},
        },
        "spec": {"hard": hard},
    }
    return Mirror(obj, tuple(dict.fromkeys(notes)))

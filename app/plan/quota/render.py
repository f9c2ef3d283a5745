"""The DRA-side ResourceQuotas `quota` prints, a pure function of the legacy quotas and the
policy: multi-document YAML, a comment above each quota saying what it mirrors."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

import yaml

from app.core.policy import Policy
from app.core.quota import Quota, capacity_resources, legacy_resource, legacy_use
from app.plan.quota.mirror import is_mirror, mirror

HEADER = (
    "# DRA-side ResourceQuotas from gpu2dra: each limits the devices of translated pods'\n"
    "# claims as the legacy quota it is named after limits nvidia.com/gpu-style requests.\n"
)


def render(quotas: Iterable[tuple[str, Quota]], policy: Policy) -> str:
    """Multi-document YAML for `kubectl apply -f -`, a comment above each quota."""
    by_namespace: dict[str, list[Quota]] = defaultdict(list)
    for namespace, quota in quotas:
        by_namespace[namespace].append(quota)
    docs = []
    capacities = capacity_resources(policy)
    for namespace in sorted(by_namespace):
        found = by_namespace[namespace]
        for quota in sorted(found, key=lambda q: q.name):
            if is_mirror(quota):
                continue
            docs.extend(_unmirrored(namespace, quota, capacities))
            # A class another quota limits is left alone; gpu2dra's own are printed again.
            others = {k for o in found if o is not quota and not is_mirror(o) for k in o.hard}
            made = mirror(namespace, quota, policy, others)
            if made is None:
                continue
            legacy = ", ".join(
                f"{k}: {v}" for k, v in sorted(quota.hard.items()) if legacy_use(k, policy)
            )
            lines = [f"# {namespace}/{quota.name} limits {legacy}"]
            lines += [f"# note: {n}" for n in made.notes]
            docs.append("\n".join(lines) + "\n" + yaml.safe_dump(made.quota, sort_keys=False))
    if not docs:
        return HEADER + "# no legacy GPU quota to mirror: nothing to apply\n"
    return HEADER + "".join(f"---\n{d}" for d in docs)


def _unmirrored(namespace: str, quota: Quota, capacities: frozenset[str]) -> list[str]:
    """A comment for each key that limits a resource gpu2dra turns into consumable capacity:
    no DRA-side quota counts capacity, so pods asking for it stay under this one."""
    keys = sorted(k for k in quota.hard if legacy_resource(k) in capacities)
    return [
        f"# {namespace}/{quota.name} limits {k}: {quota.hard[k]}; no DRA-side quota counts "
        "consumable capacity, so pods that ask for it stay on the device plugin under it\n"
        for k in keys
    ]

"""The doctor check on ResourceQuota, a pure function of what was read: a translated pod must
not escape its namespace's GPU quota. Kueue's ClusterQueues: checks/kueue.py."""

from __future__ import annotations

from app.core.catalog import Catalog
from app.core.policy import Policy
from app.core.quota import Quota, fix_line, namespace_uses, unguarded, unguarded_text
from app.core.scope import NEVER_CHANGED, namespace_mode
from app.diagnose.doctor.checks.verdict import Verdict, unreadable
from app.diagnose.doctor.facts import Facts
from app.readers.client import ReadError


def check_quota(facts: Facts, policy: Policy) -> Verdict:
    """FAIL where gpu2dra translates (enabled or audit) and a legacy GPU quota has no DRA side."""
    namespaces, quotas, classes = facts.namespaces, facts.quotas, facts.device_classes
    if isinstance(namespaces, ReadError):
        return unreadable(namespaces)
    if isinstance(quotas, ReadError):
        return unreadable(quotas)
    # Unreadable classes: no class is known to count against a legacy quota (KEP-5004).
    catalog = Catalog.of(()) if isinstance(classes, ReadError) else Catalog.from_objects(classes)
    by_namespace: dict[str, list[Quota]] = {}
    for obj in quotas:
        by_namespace.setdefault(str(obj["metadata"].get("namespace")), []).append(Quota.of(obj))
    translating, lifted = 0, []
    for ns in namespaces:
        ns_name = ns["metadata"]["name"]
        if namespace_mode(ns, policy) in (NEVER_CHANGED, "disabled"):
            continue
        if (ns.get("status") or {}).get("phase") == "Terminating":
            continue  # no pod can be created there any more
        translating += 1
        found = by_namespace.get(ns_name, [])
        if gaps := unguarded(namespace_uses(found, policy), found, catalog):
            lifted.append((ns_name, unguarded_text(gaps)))
    if lifted:
        names = ", ".join(ns for ns, _ in lifted)
        fix = (
            fix_line(lifted[0][0]) if len(lifted) == 1 else "gpu2dra quota -A | kubectl apply -f -"
        )
        return Verdict(
            "FAIL",
            f"{len(lifted)} namespace(s) gpu2dra translates in limit GPUs only on the legacy "
            f"side ({names}): gpu2dra leaves their GPU pods on the device plugin",
            fix,
            tuple(f"{ns}: {why}" for ns, why in lifted),
        )
    return Verdict(
        "PASS",
        f"{translating} namespace(s) gpu2dra translates in: no legacy GPU quota without its "
        "DRA side",
    )

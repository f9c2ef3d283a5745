"""The doctor checks on GPU accounting, each a pure function of what was read: ResourceQuota
(a translated pod must not escape its namespace's GPU quota) and Kueue (its quota must know
the DeviceClasses translated pods ask for)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import yaml

from app.core.catalog import Catalog
from app.core.kube import Obj
from app.core.policy import Policy
from app.core.quota import Quota, describe, fix_line, namespace_uses, unguarded
from app.core.scope import NEVER_CHANGED, namespace_mode
from app.troubleshoot.checks.check import Check, unreadable
from app.troubleshoot.checks.cluster import mapped_classes
from app.troubleshoot.client import Listed, ReadError

KUEUE_NAMESPACE, KUEUE_CONFIG = "kueue-system", "kueue-manager-config"
KUEUE_KEY = "controller_manager_config.yaml"


def check_quota(namespaces: Listed, quotas: Listed, classes: Listed, policy: Policy) -> Check:
    """FAIL where gpu2dra translates (enabled or audit) and a legacy GPU quota has no DRA side."""
    name = "quota"
    if isinstance(namespaces, ReadError):
        return unreadable(name, namespaces)
    if isinstance(quotas, ReadError):
        return unreadable(name, quotas)
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
            lifted.append((ns_name, describe(gaps)))
    if lifted:
        names = ", ".join(ns for ns, _ in lifted)
        fix = (
            fix_line(lifted[0][0]) if len(lifted) == 1 else "gpu2dra quota -A | kubectl apply -f -"
        )
        return Check(
            name,
            "FAIL",
            f"{len(lifted)} namespace(s) gpu2dra translates in limit GPUs only on the legacy "
            f"side ({names}): gpu2dra leaves their GPU pods on the device plugin",
            fix,
            tuple(f"{ns}: {why}" for ns, why in lifted),
        )
    return Check(
        name,
        "PASS",
        f"{translating} namespace(s) gpu2dra translates in: no legacy GPU quota without its "
        "DRA side",
    )


def kueue_configuration(configmap: Obj) -> Obj | None:
    """The `Configuration` in Kueue's ConfigMap (its usual key first); None if none parses."""
    data = configmap.get("data") or {}
    for key in sorted(data, key=lambda k: k != KUEUE_KEY):
        try:
            doc = yaml.safe_load(data[key])
        except yaml.YAMLError:
            continue
        if isinstance(doc, dict) and doc.get("kind") == "Configuration":
            return doc
    return None


def kueue_mapped(configuration: Obj) -> dict[str, str]:
    """DeviceClass -> the Kueue resource name its claims count as (deviceClassMappings)."""
    resources: Any = configuration.get("resources") or {}
    found: dict[str, str] = {}
    for mapping in (
        resources.get("deviceClassMappings") or [] if isinstance(resources, dict) else []
    ):
        if isinstance(mapping, dict):
            for device_class in mapping.get("deviceClassNames") or []:
                found[str(device_class)] = str(mapping.get("name"))
    return found


def check_kueue(configmap: Obj | ReadError | None, policy: Policy) -> Check:
    """WARN when Kueue runs and cannot count a class gpu2dra translates to."""
    name = "kueue"
    where = f"ConfigMap {KUEUE_NAMESPACE}/{KUEUE_CONFIG}"
    if configmap is None:
        return Check(name, "PASS", f"Kueue not installed (no {where})")
    if isinstance(configmap, ReadError):
        return unreadable(name, configmap)
    configuration = kueue_configuration(configmap)
    if configuration is None:
        return Check(name, "WARN", f"{where} holds no Kueue Configuration", "check Kueue's install")
    mapped = kueue_mapped(configuration)
    needed: Sequence[str] = sorted(mapped_classes(policy))
    missing = [c for c in needed if c not in mapped]
    if missing:
        example = ", ".join(f"{{name: <quota name>, deviceClassNames: [{c}]}}" for c in missing)
        return Check(
            name,
            "WARN",
            f"Kueue is installed and its resources.deviceClassMappings has no entry for "
            f"{', '.join(missing)}: pods gpu2dra translates are inadmissible in Kueue's "
            'plain-pod integration ("DeviceClass ... is not mapped"); Job-style integrations '
            "keep counting nvidia.com/gpu from the pod template",
            f"add to {KUEUE_KEY} in {where}: resources: {{deviceClassMappings: [{example}]}}, "
            "give the name a nominalQuota in the ClusterQueues, and restart Kueue (it reads "
            "the mappings at start-up)",
        )
    shown = ", ".join(f"{c} as {mapped[c]}" for c in needed)
    return Check(name, "PASS", f"Kueue counts {shown}")

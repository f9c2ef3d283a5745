"""The doctor check on priority and preemption: the scheduler does not preempt for DRA claims
on Kubernetes 1.34-1.37, so GPU pods of preempting PriorityClasses either stay on the device
plugin (policy preemptingPods: leave) or lose preemption (translate)."""

from __future__ import annotations

from collections import defaultdict

from app.core.kube import Obj
from app.core.outcomes import NO_PREEMPTION
from app.core.policy import Policy
from app.core.resources import legacy_devices
from app.core.scope import NEVER_CHANGED, namespace_mode
from app.core.templates import TEMPLATE_PREFIX
from app.diagnose.doctor.checks.verdict import Verdict, unreadable
from app.diagnose.doctor.facts import Facts
from app.readers.client import Listed, ReadError

SHOWN = 5  # pods named per class


def _preempting(classes: list[Obj]) -> dict[str, int]:
    """Preempting PriorityClasses by name, with their value."""
    return {
        str(c["metadata"]["name"]): int(c.get("value") or 0)
        for c in classes
        if c.get("preemptionPolicy", "PreemptLowerPriority") != "Never"
    }


def _is_gpu_pod(pod: Obj, policy: Policy) -> bool:
    spec = pod.get("spec") or {}
    claims = spec.get("resourceClaims") or []
    ours = any(
        str(c.get("resourceClaimTemplateName", "")).startswith(TEMPLATE_PREFIX) for c in claims
    )
    return ours or bool(legacy_devices(spec, policy))


def _serves_legacy_gpus(nodes: Listed, policy: Policy) -> bool | None:
    """Some node offers a mapped resource through the device plugin; None: not known."""
    if isinstance(nodes, ReadError):
        return None
    for node in nodes:
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        if any(policy.mapping_for(r) is not None and allocatable[r] != "0" for r in allocatable):
            return True
    return False


def _gpu_pods_by_class(
    pods: list[Obj], translating: set[str], preempting: dict[str, int], policy: Policy
) -> dict[str, list[str]]:
    """Preempting class -> its GPU pods (namespace/name) in the namespaces gpu2dra
    translates in, that may preempt."""
    used: dict[str, list[str]] = defaultdict(list)
    for pod in pods:
        meta, spec = pod["metadata"], pod.get("spec") or {}
        cls = spec.get("priorityClassName")
        if (
            meta.get("namespace") in translating
            and cls in preempting
            and spec.get("preemptionPolicy") != "Never"
            and _is_gpu_pod(pod, policy)
        ):
            used[cls].append(f"{meta.get('namespace')}/{meta.get('name')}")
    return used


def check_preemption(facts: Facts, policy: Policy) -> Verdict:
    namespaces, classes, pods = facts.namespaces, facts.priority_classes, facts.pods
    for listed in (namespaces, classes, pods):
        if isinstance(listed, ReadError):
            return unreadable(listed)
    assert not isinstance(namespaces, ReadError) and not isinstance(classes, ReadError)
    assert not isinstance(pods, ReadError)
    translating = {
        ns["metadata"]["name"]
        for ns in namespaces
        if namespace_mode(ns, policy) not in (NEVER_CHANGED, "disabled")
    }
    preempting = _preempting(classes)
    used = _gpu_pods_by_class(pods, translating, preempting, policy)
    if not used:
        return Verdict(
            "PASS",
            f"no GPU pod of a preempting PriorityClass in the {len(translating)} namespace(s) "
            "gpu2dra translates in",
        )
    details = tuple(
        f"- {cls} ({preempting[cls]}): {len(found)} pod(s): {', '.join(found[:SHOWN])}"
        + (", ..." if len(found) > SHOWN else "")
        for cls, found in sorted(used.items())
    )
    names = ", ".join(sorted(used))
    count = sum(map(len, used.values()))
    if policy.preempting_pods == "translate":
        return Verdict(
            "WARN",
            f"{count} GPU pod(s) of preempting PriorityClasses ({names}) are translated, and "
            f"{NO_PREEMPTION}",
            "to keep preemption, set the policy's preemptingPods: leave while a device-plugin "
            "pool remains, or let Kueue's preemption (which evicts workloads) do it",
            details,
        )
    if _serves_legacy_gpus(facts.nodes, policy) is False:
        return Verdict(
            "FAIL",
            f"{count} GPU pod(s) of preempting PriorityClasses ({names}) are left on the device "
            "plugin (preemptingPods: leave), and no node offers GPUs through it: they cannot "
            "schedule",
            "keep a device-plugin node pool for them, or set the policy's preemptingPods: "
            f"translate, where {NO_PREEMPTION}",
            details,
        )
    return Verdict(
        "PASS",
        f"{count} GPU pod(s) of preempting PriorityClasses ({names}) stay on the device plugin, "
        "where they still preempt (preemptingPods: leave)",
        details=details,
    )

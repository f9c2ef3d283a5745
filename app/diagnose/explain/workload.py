"""A pod Kueue holds, as `explain` reads it: Kueue's admission gate on the pod, the Workload
the pod integration made of it, and why that Workload is not admitted yet."""

from __future__ import annotations

from collections.abc import Iterable

from app.core.kube import Obj

# The scheduling gate the pod integration sets until the pod's Workload is admitted.
ADMISSION_GATE = "kueue.x-k8s.io/admission"
WORKLOAD_VERSIONS = ("v1beta2", "v1beta1")


def admission_gated(spec: Obj) -> bool:
    """Whether Kueue's admission gate holds the pod of `spec` back from the scheduler."""
    gates = spec.get("schedulingGates") or []
    return any(isinstance(g, dict) and g.get("name") == ADMISSION_GATE for g in gates)


def workload_of(pod: Obj, workloads: Iterable[Obj]) -> Obj | None:
    """The Workload that the pod integration made of `pod`: the one the pod owns."""
    uid = pod["metadata"].get("uid")
    for workload in workloads:
        owners = (workload.get("metadata") or {}).get("ownerReferences") or []
        if any(isinstance(o, dict) and o.get("uid") == uid for o in owners):
            return workload
    return None


# A Workload's conditions, in the order that says best why it is not admitted.
_WAITING = ("QuotaReserved", "Admitted", "PodsReady")


def waiting_for(workload: Obj) -> str:
    """Why a Workload is not admitted, in Kueue's words (its conditions' messages)."""
    conditions = [
        c for c in (workload.get("status") or {}).get("conditions") or [] if isinstance(c, dict)
    ]
    if any(c.get("type") == "Finished" and c.get("status") == "True" for c in conditions):
        return "finished"
    for kind in _WAITING:
        for condition in conditions:
            if condition.get("type") == kind and condition.get("status") == "False":
                return str(condition.get("message") or condition.get("reason") or kind)
    if any(c.get("type") == "Admitted" and c.get("status") == "True" for c in conditions):
        return "admitted: Kueue is about to lift the gate"
    return "not yet considered for admission"

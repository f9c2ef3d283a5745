"""Priority and preemption: what a pod loses when its GPUs come from DRA claims.

On Kubernetes 1.34 to 1.37 the scheduler's DynamicResources plugin has no preemption
(`PreFilterExtensions()` returns nil; KEP-5690 is not merged): a pod whose devices come from
claims neither preempts another pod for them nor is preempted to free them. Device-plugin
GPUs are extended resources, which preemption does free.
"""

from __future__ import annotations

from collections.abc import Mapping

from app.core.kube import Obj
from app.core.outcomes import Code, Finding


def preempting_class(spec: Obj) -> str | None:
    """The pod's priority class when it can preempt: a priorityClassName whose
    preemptionPolicy is not Never. The Priority admission plugin runs before the webhooks
    and copies the class's preemptionPolicy into the pod; offline, where it has not run, a
    named class counts as preempting, as a PriorityClass does by default."""
    name = spec.get("priorityClassName")
    if not isinstance(name, str) or not name or spec.get("preemptionPolicy") == "Never":
        return None
    return name


def preemption_warning(
    name: str, translated: bool, served: Mapping[str, tuple[str, ...]] | None = None
) -> Finding:
    """What the warning says of a pod of priority class `name` that can preempt; `served`:
    the DeviceClasses that serve each of its resources in-tree, when some serve all of them
    (the scheduler can then give the pod it leaves DRA devices, where it does not preempt)."""
    if translated:
        return Finding(Code.PREEMPTION_LOST, name=name)
    if served:
        classes = ", ".join(dict.fromkeys(c for found in served.values() for c in found))
        return Finding(
            Code.PREEMPTING_IN_TREE, name=name, classes=classes, resources=", ".join(served)
        )
    return Finding(Code.PREEMPTING, name=name)

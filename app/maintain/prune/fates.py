"""What becomes of each of gpu2dra's ResourceClaimTemplates, a pure function of what was
listed: kept while a live pod names it, or a workload's pod template does (a Deployment at 0
replicas, a CronJob between runs), or while it is too young to tell; else deleted."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import KW_ONLY, dataclass
from datetime import datetime, timedelta
from typing import Literal

from app.core.kube import Obj
from app.core.templates import is_managed, is_reserved_name

Action = Literal["delete", "keep"]
# The kinds whose pod template a controller makes pods from, as (kind, object): a list's
# items carry no kind of their own.
Workload = tuple[str, Obj]
WORKLOAD_KINDS = ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "CronJob")


@dataclass(frozen=True, slots=True)
class Fate:
    namespace: str
    name: str
    action: Action
    why: str
    _: KW_ONLY
    uid: str = ""
    resource_version: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def is_gpu2dras(template: Obj) -> bool:
    return is_managed(template) and is_reserved_name((template.get("metadata") or {}).get("name"))


def users(pods: Iterable[Obj]) -> dict[tuple[str, str], list[str]]:
    """(namespace, template) -> the live pods that name it."""
    found: dict[tuple[str, str], list[str]] = {}
    for pod in pods:
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        for claim in spec.get("resourceClaims") or ():
            if isinstance(claim, dict) and (name := claim.get("resourceClaimTemplateName")):
                key = (str(meta.get("namespace", "")), str(name))
                found.setdefault(key, []).append(str(meta.get("name", "")))
    return found


def _pod_spec(kind: str, workload: Obj) -> Obj:
    spec = workload.get("spec") or {}
    if kind == "CronJob":
        spec = (spec.get("jobTemplate") or {}).get("spec") or {}
    return ((spec.get("template") or {}).get("spec")) or {}


def named_by(workloads: Iterable[Workload]) -> dict[tuple[str, str], list[str]]:
    """(namespace, template) -> the workloads ("Deployment train") whose pod template names it:
    their next pods need it, whether or not any pod runs now."""
    found: dict[tuple[str, str], list[str]] = {}
    for kind, workload in workloads:
        meta = workload.get("metadata") or {}
        for claim in _pod_spec(kind, workload).get("resourceClaims") or ():
            if isinstance(claim, dict) and (name := claim.get("resourceClaimTemplateName")):
                key = (str(meta.get("namespace", "")), str(name))
                found.setdefault(key, []).append(f"{kind} {meta.get('name', '')}")
    return found


def named(by: Sequence[str]) -> str:
    return (
        "named by the pod template of "
        + ", ".join(sorted(by)[:3])
        + (f" and {len(by) - 3} more" if len(by) > 3 else "")
    )


def _created(template: Obj) -> datetime | None:
    stamp = (template.get("metadata") or {}).get("creationTimestamp")
    try:
        return datetime.fromisoformat(str(stamp))
    except ValueError:
        return None


def plan(
    templates: Iterable[Obj],
    pods: Iterable[Obj],
    now: datetime,
    younger: timedelta,
    *,
    workloads: Iterable[Workload] = (),
) -> list[Fate]:
    """What to do with each of gpu2dra's templates: a pure function of what was listed."""
    used, planned = users(pods), named_by(workloads)
    fates = []
    for template in templates:
        if not is_gpu2dras(template):
            continue
        meta = template["metadata"]
        namespace, name = str(meta.get("namespace", "")), str(meta["name"])
        ids = {
            "uid": str(meta.get("uid", "")),
            "resource_version": str(meta.get("resourceVersion", "")),
        }
        if by := used.get((namespace, name)):
            shown = ", ".join(sorted(by)[:3]) + (f" and {len(by) - 3} more" if len(by) > 3 else "")
            fates.append(Fate(namespace, name, "keep", f"used by pod {shown}", **ids))
            continue
        if by := planned.get((namespace, name)):
            fates.append(Fate(namespace, name, "keep", named(by), **ids))
            continue
        created = _created(template)
        if created is None or now - created < younger:
            age = "of unknown age" if created is None else f"made {_ago(now - created)} ago"
            why = f"unused, but {age}: a pod being admitted may be about to use it"
            fates.append(Fate(namespace, name, "keep", why, **ids))
            continue
        fates.append(Fate(namespace, name, "delete", "no live pod uses it", **ids))
    return sorted(fates, key=lambda f: (f.namespace, f.name))


def _ago(age: timedelta) -> str:
    seconds = max(0, int(age.total_seconds()))
    return f"{seconds // 60}m" if seconds >= 60 else f"{seconds}s"

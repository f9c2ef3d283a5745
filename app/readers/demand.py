"""What GPU pods ask of DRA, by shape: a pure function of pods, workloads, claims and templates
as the API returns them, shared by `gpu2dra capacity` and doctor's capacity checks.

A shape is one device request as the translator writes it (app/core/translate.py): its
DeviceClass, its CEL selectors (a GFD product, a MIG profile) and the consumable capacity it
takes of each device (shares, memory). A pod on the device plugin asks what its translation
would ask; a pod already translated asks what its claims (or their templates) say and holds
it once they are allocated. A workload at the top of its pods' owners (Deployment,
StatefulSet, ReplicaSet, Job, CronJob, DaemonSet) asks its replicas' worth; it needs the more
of that and of what its pods ask now, less what they already hold.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from app.core.catalog import Catalog
from app.core.failclosed import yunikorn_mark
from app.core.kube import Obj, cel_expressions
from app.core.policy import Policy
from app.core.resources import asks_extended_resources, legacy_devices
from app.core.translate import translate

State = Literal["running", "pending"]
Key = tuple[str, str]  # namespace, name

_PRODUCT = re.compile(r"""\.productName\.replace\(' ', '-'\) == '([^'\\]*)'$""")
_PROFILE = re.compile(r"""\.profile == '([^'\\]*)'$""")


@dataclass(frozen=True, slots=True, order=True)
class Shape:
    """One device request: what a device must be to serve it, and what it takes of one."""

    device_class: str
    selectors: tuple[str, ...] = ()
    capacity: tuple[tuple[str, str], ...] = ()  # consumable capacity taken of each device

    def _found(self, pattern: re.Pattern[str]) -> str:
        return next((m[1] for s in self.selectors if (m := pattern.search(s))), "")

    @property
    def product(self) -> str:
        """The GFD product its selectors name (NVIDIA-A100-SXM4-80GB); "" when none."""
        return self._found(_PRODUCT)

    @property
    def profile(self) -> str:
        """The MIG profile its selectors name (1g.10gb); "" when none."""
        return self._found(_PROFILE)

    @property
    def shown(self) -> str:
        """`gpu.nvidia.com devices of product X, MIG profile Y, taking shares 1 of each`."""
        told = [f"product {self.product}"] if self.product else []
        told += [f"MIG profile {self.profile}"] if self.profile else []
        other = [s for s in self.selectors if not (_PRODUCT.search(s) or _PROFILE.search(s))]
        text = f"{self.device_class} devices" + (f" of {', '.join(told)}" if told else "")
        if self.capacity:
            text += ", taking " + ", ".join(f"{k} {v}" for k, v in self.capacity) + " of each"
        return text + (f" where {' && '.join(other)}" if other else "")


Asks = tuple[tuple[Shape, int], ...]  # each shape, and how many of it


def _shape(request: Obj) -> tuple[Shape, int] | None:
    if not isinstance(request.get("deviceClassName"), str):
        return None
    count = request.get("count", 1)
    if request.get("allocationMode") == "All" or not isinstance(count, int):
        return None  # no count to plan with
    capacity = (request.get("capacity") or {}).get("requests") or {}
    taken = tuple(sorted((str(k), str(v)) for k, v in capacity.items()))
    selectors = cel_expressions(request.get("selectors"))
    return Shape(request["deviceClassName"], selectors, taken), count


def claim_asks(claim_spec: Any) -> Asks:
    """The shapes a ResourceClaimSpec asks for: each `exactly` request, and the first choice
    of each `firstAvailable` one (the scheduler tries it first)."""
    devices = claim_spec.get("devices") if isinstance(claim_spec, dict) else None
    requests = devices.get("requests") if isinstance(devices, dict) else None
    found: Counter[Shape] = Counter()
    for req in requests if isinstance(requests, list) else ():
        if not isinstance(req, dict):
            continue
        first = (req.get("firstAvailable") or [None])[0]
        chosen = req.get("exactly") or first
        if isinstance(chosen, dict) and (one := _shape(chosen)) is not None:
            found[one[0]] += one[1]
    return tuple(sorted(found.items()))


def _sum(parts: Iterable[Asks]) -> Asks:
    total: Counter[Shape] = Counter()
    for part in parts:
        for shape, count in part:
            total[shape] += count
    return tuple(sorted(total.items()))


@dataclass(frozen=True, slots=True)
class Translated:
    """What one pod (or pod template) would ask of DRA once translated."""

    asks: Asks
    legacy: tuple[tuple[str, int], ...]  # what it asks of the device plugin now
    left: str = ""  # why gpu2dra would leave it on the device plugin: an outcome code


def translated(spec: Obj, metadata: Any, policy: Policy, catalog: Catalog) -> Translated | None:
    """The shapes a pod spec's translation asks for; None when it asks for no GPU.
    `metadata`: the pod's or pod template's, for its annotations and YuniKorn's marks."""
    if not asks_extended_resources(spec):
        return None
    legacy = tuple(legacy_devices(spec, policy).items())
    if not legacy:
        return None
    meta = metadata if isinstance(metadata, dict) else {}
    result = translate(spec, policy, catalog, meta.get("annotations"), yunikorn=yunikorn_mark(meta))
    if result.in_tree is not None:
        return Translated((), legacy, "in-tree")
    if not result.templates:
        codes = [w.code for w in result.warnings if w.code.kind == "left"]
        return Translated((), legacy, codes[0].value if codes else "left")
    templates = {t["metadata"]["name"]: t for t in result.templates}
    claims = result.spec.get("resourceClaims") or []
    asks = (
        claim_asks(templates[c["resourceClaimTemplateName"]]["spec"]["spec"])
        for c in claims
        if c.get("resourceClaimTemplateName") in templates
    )
    return Translated(_sum(asks), legacy)


# ---- pods --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PodAsk:
    """One live GPU pod: what it asks of DRA (or would, translated), and where it stands."""

    namespace: str
    name: str
    workload: str  # the controller at the top of its owners, "Kind/name"; "" for a bare pod
    state: State  # running: bound to a node (it holds what it asks); pending: not yet
    asks: Asks
    on_dra: bool  # it asks for claims already (translated when it was created)
    legacy: tuple[tuple[str, int], ...] = ()  # what it asks of the device plugin
    left: str = ""  # why gpu2dra would leave it on the device plugin (an outcome code)

    @property
    def held(self) -> bool:
        """It holds DRA devices now: translated and bound (its claims allocated)."""
        return self.on_dra and self.state == "running"


def _controller(obj: Obj) -> Obj | None:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("controller"):
            return ref
    return None


def top_owner(obj: Obj, by_uid: Mapping[str, Obj]) -> str:
    """ "Kind/name" of the controller at the top of an object's owners, as far as they were
    read (a ReplicaSet's Deployment, a Job's CronJob); "" when it has no controller."""
    found, seen = "", set()
    ref = _controller(obj)
    while ref is not None and str(ref.get("uid")) not in seen:
        seen.add(str(ref.get("uid")))
        found = f"{ref.get('kind')}/{ref.get('name')}"
        owner = by_uid.get(str(ref.get("uid")))
        ref = _controller(owner) if owner is not None else None
    return found


def _claim_spec(
    pod: Obj, claim: Obj, claims: Mapping[Key, Obj], templates: Mapping[Key, Obj]
) -> Any:
    """The spec one of a pod's claims asks by: its ResourceClaim's, or its template's before
    the claim is made."""
    namespace = str(pod["metadata"].get("namespace", ""))
    name = claim.get("resourceClaimName")
    if not isinstance(name, str):
        statuses = (pod.get("status") or {}).get("resourceClaimStatuses") or []
        made = [s.get("resourceClaimName") for s in statuses if s.get("name") == claim.get("name")]
        name = made[0] if made and isinstance(made[0], str) else None
    if name is not None and (namespace, name) in claims:
        return claims[namespace, name].get("spec")
    template = templates.get((namespace, str(claim.get("resourceClaimTemplateName"))))
    return ((template or {}).get("spec") or {}).get("spec")


def dra_asks(pod: Obj, claims: Mapping[Key, Obj], templates: Mapping[Key, Obj]) -> Asks:
    """What a pod's claims ask for."""
    entries = (pod.get("spec") or {}).get("resourceClaims") or []
    return _sum(
        claim_asks(_claim_spec(pod, c, claims, templates)) for c in entries if isinstance(c, dict)
    )


FINISHED = ("Succeeded", "Failed")


@dataclass(frozen=True, slots=True)
class Known:
    """What a pod's asks are read against: the policy, the catalog its translation takes,
    the claims and templates (by namespace and name) and every owner read (by uid)."""

    policy: Policy
    catalog: Catalog
    claims: Mapping[Key, Obj]
    templates: Mapping[Key, Obj]
    by_uid: Mapping[str, Obj]

    @classmethod
    def of(
        cls,
        policy: Policy,
        catalog: Catalog,
        *,
        claims: Iterable[Obj] = (),
        templates: Iterable[Obj] = (),
        owners: Iterable[Obj] = (),
    ) -> Known:
        return cls(
            policy,
            catalog,
            {_key(c): c for c in claims},
            {_key(t): t for t in templates},
            {str(o["metadata"].get("uid")): o for o in owners},
        )

    @property
    def mapped(self) -> frozenset[str]:
        """The DeviceClasses the policy maps a legacy resource to."""
        return frozenset(m.device_class for m in self.policy.mappings)


def _key(obj: Obj) -> Key:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace", "")), str(meta.get("name", ""))


def going(obj: Obj) -> bool:
    """A pod or namespace being deleted: what it asks is no demand (a pod's replacement asks
    for itself; devices still held count as taken where the claims say so)."""
    meta = obj.get("metadata") or {}
    return (
        bool(meta.get("deletionTimestamp"))
        or (obj.get("status") or {}).get("phase") == "Terminating"
    )


def pod_ask(pod: Obj, known: Known) -> PodAsk | None:
    """What a live pod asks; None when it asks for no GPU, has finished or is going."""
    spec, meta = pod.get("spec") or {}, pod["metadata"]
    if (pod.get("status") or {}).get("phase") in FINISHED or going(pod):
        return None
    state: State = "running" if spec.get("nodeName") else "pending"
    where = str(meta.get("namespace", "")), str(meta.get("name", ""))
    workload = top_owner(pod, known.by_uid)
    claimed = dra_asks(pod, known.claims, known.templates)
    claimed = tuple((s, n) for s, n in claimed if s.device_class in known.mapped)
    if claimed:
        return PodAsk(*where, workload, state, claimed, on_dra=True)
    found = translated(spec, meta, known.policy, known.catalog)
    if found is None:
        return None
    return PodAsk(
        *where, workload, state, found.asks, on_dra=False, legacy=found.legacy, left=found.left
    )


# ---- workloads ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WorkloadAsk:
    """A controller at the top of its pods' owners, and what each of its replicas asks."""

    namespace: str
    key: str  # "Kind/name"
    replicas: int
    each: Translated


WORKLOAD_KINDS = ("Deployment", "StatefulSet", "ReplicaSet", "DaemonSet", "Job", "CronJob")


def _pod_template(kind: str, obj: Obj) -> Obj:
    spec = obj.get("spec") or {}
    if kind == "CronJob":
        spec = (spec.get("jobTemplate") or {}).get("spec") or {}
    template = spec.get("template")
    return template if isinstance(template, dict) else {}


def _finished(job: Obj) -> bool:
    conditions = (job.get("status") or {}).get("conditions") or []
    return any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True" for c in conditions
    )


def replicas_of(kind: str, obj: Obj) -> int:
    """The pods a workload keeps: its replicas (1 when unset), a running Job's parallelism,
    one run of a CronJob that is not suspended, the nodes a DaemonSet is scheduled to."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    if kind == "DaemonSet":
        return int(status.get("desiredNumberScheduled") or 0)
    if kind == "CronJob":
        if spec.get("suspend") is True:
            return 0
        spec = (spec.get("jobTemplate") or {}).get("spec") or {}
    elif kind == "Job" and (_finished(obj) or spec.get("suspend") is True):
        return 0
    key = "parallelism" if kind in ("Job", "CronJob") else "replicas"
    value = spec.get(key, 1)
    return value if isinstance(value, int) and value >= 0 else 1


def workload_ask(kind: str, obj: Obj, known: Known) -> WorkloadAsk | None:
    """What a workload's replicas ask; None when it is owned by another controller (its
    owner is the workload) or its pods ask for no GPU."""
    if _controller(obj) is not None:
        return None
    template = _pod_template(kind, obj)
    spec = template.get("spec")
    if not isinstance(spec, dict):
        return None
    each = translated(spec, template.get("metadata"), known.policy, known.catalog)
    if each is None:
        return None
    namespace, name = _key(obj)
    return WorkloadAsk(namespace, f"{kind}/{name}", replicas_of(kind, obj), each)


# ---- needs -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Need:
    """What a namespace asks of one shape, in devices (allocations of a shared device)."""

    shape: Shape
    running: int = 0  # what its bound pods ask (translated: hold)
    pending: int = 0  # what its pods not yet bound ask
    replicas: int = 0  # what its workloads' replicas ask
    held: int = 0  # what its translated, bound pods hold already
    new: int = 0  # what it needs besides: per workload, its replicas or pods, less held


def needs(pods: Iterable[PodAsk], workloads: Iterable[WorkloadAsk]) -> list[Need]:
    """Each shape's need, summed over the workloads (and bare pods) of what is given: a
    workload needs the more of its replicas' asks and its pods', less what they hold. What
    gpu2dra would leave on the device plugin asks for nothing here."""
    parts: dict[tuple[str, Shape], Counter[str]] = {}
    for pod in pods:
        who = pod.workload or f"Pod/{pod.name}"
        for shape, count in pod.asks:
            part = parts.setdefault((who, shape), Counter())
            part[pod.state] += count
            part["held"] += count if pod.held else 0
    for workload in workloads:
        for shape, count in workload.each.asks:
            part = parts.setdefault((workload.key, shape), Counter())
            part["replicas"] += count * workload.replicas
    summed: dict[Shape, Counter[str]] = {}
    for (_, shape), part in parts.items():
        total = summed.setdefault(shape, Counter())
        total.update(part)
        whole = max(part["replicas"], part["running"] + part["pending"])
        total["new"] += max(0, whole - part["held"])
    return [
        Need(shape, **{k: v for k, v in total.items() if k in Need.__dataclass_fields__})
        for shape, total in sorted(summed.items())
    ]

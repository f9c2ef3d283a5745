"""What the namespaces gpu2dra translates or audits ask of DRA, against what serves it: a pure
function of what was read (`Inputs`). Per namespace and shape (app/readers/demand.py), what
its pods and workloads ask and what is free of it (app/readers/supply.py); the devices
published by class, product, MIG profile and sharing; the device plugin's capacity left; the
node autoscalers and whether each can add DRA nodes; and what it means, in sentences."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from app.core import autoscalers
from app.core.catalog import Catalog, sharing_of, slice_sharing
from app.core.kube import Obj
from app.core.policy import Policy
from app.core.scope import namespace_mode
from app.readers.cel.devices import devices_of
from app.readers.client import Listed, ReadError, cannot_read
from app.readers.demand import (
    WORKLOAD_KINDS,
    Known,
    Need,
    PodAsk,
    Shape,
    going,
    needs,
    pod_ask,
    workload_ask,
)
from app.readers.supply import (
    Devices,
    PluginCapacity,
    Pool,
    devices_by_class,
    plugin_capacity,
    pools,
)

PLANNED = ("enabled", "audit")  # the modes whose namespaces are planned for


@dataclass(frozen=True, slots=True)
class Inputs:
    namespaces: Listed
    device_classes: Listed
    slices: Listed
    claims: Listed
    templates: Listed
    nodes: Listed
    pods: Listed
    workloads: Mapping[str, Listed] = field(default_factory=dict)  # Kind -> its objects


@dataclass(frozen=True, slots=True)
class ShapeNeed:
    """A namespace's need of one shape, against what is free of it now."""

    shape: str  # as a sentence says it
    device_class: str
    product: str
    profile: str
    capacity: dict[str, str]
    selectors: list[str]
    running: int
    pending: int
    replicas: int
    held: int
    needs: int  # besides what it holds
    free: int | None  # None: unknown (slices, claims or classes unreadable)

    @property
    def short(self) -> int:
        return 0 if self.free is None else max(0, self.needs - self.free)


@dataclass(frozen=True, slots=True)
class NamespacePlan:
    name: str
    mode: str
    needs: list[ShapeNeed]
    staying: dict[str, int]  # outcome code -> pods gpu2dra would leave on the device plugin
    frees: dict[str, int]  # legacy resource -> what its bound pods that move free


@dataclass(frozen=True, slots=True)
class AutoscalerRow:
    shown: str
    kind: str
    adds_dra_nodes: bool
    said: str


@dataclass(frozen=True, slots=True)
class Report:
    namespaces: list[NamespacePlan]
    pools: list[Pool]
    plugin: list[PluginCapacity]
    autoscalers: list[AutoscalerRow]
    sentences: list[str]
    unreadable: list[str]


def _read(listed: Listed, what: str, unreadable: list[str]) -> list[Obj]:
    if isinstance(listed, ReadError):
        unreadable.append(cannot_read(listed, what))
        return []
    return listed


def catalog_of(classes: Listed, slices: Listed, policy: Policy) -> Catalog:
    """The catalog pods are translated with, as `report` builds it: the cluster's classes
    and sharing. What is published is left unknown, so that a pod with no device yet still
    says what it would ask."""
    if isinstance(classes, ReadError):
        catalog = Catalog.of(policy.device_classes)
    else:
        catalog = Catalog.from_objects(classes)
    if not isinstance(slices, ReadError):
        catalog = replace(catalog, sharing=sharing_of(slice_sharing(s) for s in slices))
    return catalog


def planned(namespaces: Iterable[Obj], policy: Policy) -> dict[str, str]:
    """name -> mode of the namespaces gpu2dra translates (enabled) or audits."""
    found = {
        str(n["metadata"]["name"]): namespace_mode(n, policy) for n in namespaces if not going(n)
    }
    return {name: str(mode) for name, mode in sorted(found.items()) if mode in PLANNED}


def _shape_need(need: Need, free: int | None) -> ShapeNeed:
    s: Shape = need.shape
    return ShapeNeed(
        shape=s.shown,
        device_class=s.device_class,
        product=s.product,
        profile=s.profile,
        capacity=dict(s.capacity),
        selectors=list(s.selectors),
        running=need.running,
        pending=need.pending,
        replicas=need.replicas,
        held=need.held,
        needs=need.new,
        free=free,
    )


def namespace_plan(
    name: str,
    mode: str,
    asks: list[PodAsk],
    known: Known,
    *,
    workloads: list[tuple[str, Obj]],
    devices: Devices | None,
) -> NamespacePlan:
    """One namespace: each shape it needs against what is free, the pods that stay on the
    device plugin, and what its moving pods free there."""
    moving = [a for a in asks if not a.left]
    found = [w for kind, obj in workloads if (w := workload_ask(kind, obj, known)) is not None]
    shaped = needs(moving, [w for w in found if not w.each.left])
    rows = [_shape_need(n, None if devices is None else devices.free_for(n.shape)) for n in shaped]
    staying = Counter(a.left for a in asks if a.left)
    frees: Counter[str] = Counter()
    for a in moving:
        if a.state == "running" and not a.on_dra:
            frees.update(dict(a.legacy))
    return NamespacePlan(
        name, mode, rows, dict(sorted(staying.items())), dict(sorted(frees.items()))
    )


def autoscaler_rows(deployments: Iterable[Obj], nodes: Iterable[Obj]) -> list[AutoscalerRow]:
    return [
        AutoscalerRow(a.shown, a.kind, a.adds_dra_nodes, a.said)
        for a in autoscalers.read(deployments, nodes)
    ]


@dataclass(frozen=True, slots=True)
class _Read:
    """The inputs as lists, what could not be read named once."""

    known: Known
    devices: Devices | None  # None: what is free is unknown
    pods: list[Obj]
    nodes: list[Obj]
    workloads: dict[str, list[Obj]]


def _lists(inputs: Inputs, policy: Policy, unreadable: list[str]) -> _Read:
    classes = _read(inputs.device_classes, "deviceclasses", unreadable)
    slices = _read(inputs.slices, "resourceslices", unreadable)
    claims = _read(inputs.claims, "resourceclaims", unreadable)
    dra = (inputs.device_classes, inputs.slices, inputs.claims)
    devices = None
    if not any(isinstance(x, ReadError) for x in dra):
        devices = devices_by_class(devices_of(slices), classes, claims)
    workloads = {
        k: _read(inputs.workloads.get(k, []), f"{k.lower()}s", unreadable) for k in WORKLOAD_KINDS
    }
    known = Known.of(
        policy,
        catalog_of(inputs.device_classes, inputs.slices, policy),
        claims=claims,
        templates=_read(inputs.templates, "resourceclaimtemplates", unreadable),
        owners=[o for listed in workloads.values() for o in listed],
    )
    pods = _read(inputs.pods, "pods", unreadable)
    return _Read(known, devices, pods, _read(inputs.nodes, "nodes", unreadable), workloads)


def analyse(inputs: Inputs, policy: Policy) -> Report:
    unreadable: list[str] = []
    namespaces = planned(_read(inputs.namespaces, "namespaces", unreadable), policy)
    read = _lists(inputs, policy, unreadable)
    asks = [
        a
        for p in read.pods
        if p["metadata"].get("namespace") in namespaces and (a := pod_ask(p, read.known))
    ]
    plans = [
        namespace_plan(
            name,
            mode,
            [a for a in asks if a.namespace == name],
            read.known,
            workloads=[
                (kind, o)
                for kind, listed in read.workloads.items()
                for o in listed
                if o["metadata"].get("namespace") == name
            ],
            devices=read.devices,
        )
        for name, mode in namespaces.items()
    ]
    rows = autoscaler_rows(read.workloads["Deployment"], read.nodes)
    return Report(
        namespaces=plans,
        pools=[] if read.devices is None else pools(read.devices, sorted(read.known.mapped)),
        plugin=plugin_capacity(read.nodes, read.pods, policy),
        autoscalers=rows,
        sentences=sentences(plans, rows),
        unreadable=unreadable,
    )


def _says(plan: NamespacePlan) -> str:
    return f"enabling {plan.name}" if plan.mode == "audit" else f"{plan.name} (enabled)"


def sentences(plans: list[NamespacePlan], rows: list[AutoscalerRow]) -> list[str]:
    """What the numbers mean: each namespace's shortfall or fit, the namespaces together,
    and whether an autoscaler could add what is missing."""
    said = []
    for plan in plans:
        if not plan.needs:
            said.append(f"{_says(plan)} asks for no DRA device")
        for row in plan.needs:
            said.append(_one(_says(plan), row))
    said += _together(plans)
    short = any(row.short for plan in plans for row in plan.needs)
    if short and not any(r.adds_dra_nodes for r in rows):
        said.append(
            "no node autoscaler found can add DRA nodes: add nodes that run the DRA driver "
            "(gpu.nvidia.com) before enabling, or gpu2dra leaves pods whose classes have no "
            "device on the device plugin (policy noDraCapacity)"
        )
    return said


def _one(who: str, row: ShapeNeed) -> str:
    if row.free is None:
        return f"{who} needs {row.needs} {row.shape}; what is free could not be read"
    if row.short:
        return f"{who} needs {row.short} more {row.shape} ({row.needs} needed, {row.free} free)"
    if not row.needs:
        return f"{who} needs no more {row.shape}: its pods hold {row.held}"
    return f"{who} fits: {row.needs} needed of {row.shape}, {row.free} free"


def _together(plans: list[NamespacePlan]) -> list[str]:
    """Shapes that several namespaces need, whose sum is more than is free."""
    by_shape: dict[str, list[tuple[str, ShapeNeed]]] = {}
    for plan in plans:
        for row in plan.needs:
            if row.needs:
                by_shape.setdefault(row.shape, []).append((plan.name, row))
    said = []
    for shape, found in sorted(by_shape.items()):
        total, free = sum(r.needs for _, r in found), found[0][1].free
        if len(found) > 1 and free is not None and total > free:
            names = ", ".join(n for n, _ in found)
            said.append(
                f"together, {names} need {total - free} more {shape} ({total} needed, {free} free)"
            )
    return said

"""Which device-plugin nodes to convert to the DRA driver, from the capacity view: what the
enabled and audit namespaces still lack on DRA (app/plan/capacity), covered by nodes of the
product and MIG profile each shortfall asks for, preferring nodes whose GPU pods would move
with them; and what each conversion costs the pods that stay on the device plugin. Pure."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from app.core.conversion import describe, state_of
from app.core.kube import Obj
from app.core.policy import Policy
from app.core.resources import legacy_devices
from app.core.scope import namespace_mode
from app.plan.capacity.analyse import Report

PRODUCT_LABEL = "nvidia.com/gpu.product"  # GPU Feature Discovery's
MIG_LABEL = "nvidia.com/mig.config"  # the GPU Operator's MIG manager's
GPU = "nvidia.com/gpu"
FINISHED = ("Succeeded", "Failed")


@dataclass(frozen=True, slots=True)
class PluginNode:
    """A node whose GPUs the device plugin offers."""

    name: str
    product: str
    mig: str  # the MIG layout it is labelled with, "" when none
    offers: dict[str, int]  # legacy resource -> allocatable
    moving: int  # its GPU pods in enabled namespaces: translated when recreated
    staying: Counter[str]  # legacy devices its other GPU pods hold
    converting: str = ""  # where a conversion in progress stands


@dataclass(frozen=True, slots=True)
class Pick:
    node: PluginNode
    covers: str  # the shape it is picked for


@dataclass(slots=True)
class Plan:
    picks: list[Pick] = field(default_factory=list)
    converting: list[PluginNode] = field(default_factory=list)
    uncovered: list[str] = field(default_factory=list)  # shortfalls no node can cover
    plugin_after: dict[str, tuple[int, int]] = field(default_factory=dict)  # left, stay needs
    sentences: list[str] = field(default_factory=list)


def _resource_for(profile: str) -> str:
    return f"nvidia.com/mig-{profile}" if profile else GPU


def plugin_nodes(
    nodes: Iterable[Obj], pods: Iterable[Obj], namespaces: Iterable[Obj], policy: Policy
) -> list[PluginNode]:
    modes = {str(n["metadata"]["name"]): namespace_mode(n, policy) for n in namespaces}
    on: dict[str, list[tuple[str, dict[str, int]]]] = {}
    for pod in pods:
        spec = pod.get("spec") or {}
        if not spec.get("nodeName") or (pod.get("status") or {}).get("phase") in FINISHED:
            continue
        if legacy := legacy_devices(spec, policy):
            namespace = str(pod["metadata"].get("namespace"))
            on.setdefault(str(spec["nodeName"]), []).append((namespace, legacy))
    found = []
    for node in nodes:
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        offers = {}
        for resource, value in allocatable.items():
            mapped = policy.mapping_for(str(resource)) is not None
            if mapped and str(value).isdigit() and int(str(value)):
                offers[str(resource)] = int(str(value))
        if not offers:
            continue
        meta = node["metadata"]
        labels = meta.get("labels") or {}
        staying: Counter[str] = Counter()
        moving = 0
        for namespace, legacy in on.get(str(meta["name"]), []):
            if modes.get(namespace) == "enabled":
                moving += 1
            else:
                staying.update(legacy)
        state = state_of(node)
        found.append(
            PluginNode(
                name=str(meta["name"]),
                product=str(labels.get(PRODUCT_LABEL, "")),
                mig=str(labels.get(MIG_LABEL, "")),
                offers=offers,
                moving=moving,
                staying=staying,
                converting=describe(state) if state else "",
            )
        )
    return sorted(found, key=lambda n: n.name)


def _matches(node: PluginNode, product: str, profile: str) -> bool:
    if product and node.product != product:
        return False
    return node.offers.get(_resource_for(profile), 0) > 0


def plan(report: Report, candidates: list[PluginNode], pods: Iterable[Obj], policy: Policy) -> Plan:
    """Pick nodes for each shortfall of the report, then say what the device plugin keeps."""
    result = Plan(converting=[n for n in candidates if n.converting])
    free = [n for n in candidates if not n.converting]
    short: Counter[tuple[str, str, str]] = Counter()
    for namespace in report.namespaces:
        for row in namespace.needs:
            if row.short:
                short[(row.shape, row.product, row.profile)] += row.short
    for (shape, product, profile), missing in sorted(short.items()):
        resource = _resource_for(profile)
        # Nodes whose pods would move with them first, then those fewest pods must leave.
        fitting = sorted(
            (n for n in free if _matches(n, product, profile)),
            key=lambda n: (sum(n.staying.values()), -n.moving, n.name),
        )
        for node in fitting:
            if missing <= 0:
                break
            result.picks.append(Pick(node, shape))
            free.remove(node)
            missing -= node.offers[resource]
        if missing > 0:
            result.uncovered.append(f"{missing} {shape}")
    picked = {p.node.name for p in result.picks}
    # Each node that stays on the device plugin: its allocatable less what its pods hold.
    offers = {
        n.name: Counter(n.offers) for n in candidates if n.name not in picked and not n.converting
    }
    for pod in pods:
        spec = pod.get("spec") or {}
        on = offers.get(str(spec.get("nodeName")))
        if on is not None and (pod.get("status") or {}).get("phase") not in FINISHED:
            on.subtract(legacy_devices(spec, policy))
    left: Counter[str] = Counter()
    for on in offers.values():
        left.update({r: n for r, n in on.items() if n > 0})
    staying: Counter[str] = Counter()
    for pick in result.picks:
        staying.update(pick.node.staying)
    result.plugin_after = {r: (left[r], staying[r]) for r in sorted(left.keys() | staying.keys())}
    result.sentences = _sentences(result)
    return result


def _sentences(result: Plan) -> list[str]:
    said = []
    by_shape: dict[str, list[str]] = {}
    for pick in result.picks:
        by_shape.setdefault(pick.covers, []).append(pick.node.name)
    for shape, names in by_shape.items():
        said.append(f"convert {', '.join(names)} for {shape}")
    if not result.picks and not result.uncovered:
        said.append("nothing to convert: DRA has what the enabled and audit namespaces need")
    for what in result.uncovered:
        said.append(f"still short of {what}: no device-plugin node of that product and profile")
    for resource, (left, needs) in result.plugin_after.items():
        if needs and left < needs:
            said.append(
                f"the pods that stay on the device plugin need {needs} {resource} elsewhere and "
                f"{max(0, left)} would be left: convert fewer nodes, or enable their namespaces"
            )
        elif needs:
            said.append(
                f"the pods that stay on the device plugin find {needs} {resource} of "
                f"the {left} left on other nodes"
            )
    for node in result.converting:
        said.append(f"{node.name} is {node.converting}")
    return said

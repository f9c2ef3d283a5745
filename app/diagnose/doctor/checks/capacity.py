"""The doctor checks on capacity: the node autoscalers and whether one can add DRA nodes where
an enabled namespace's classes have no device (`autoscaling`), and whether what enabled and
audit namespaces' pods ask fits in the free DRA devices of its shape (`capacity`). Demand and
supply are those of `gpu2dra capacity` (app/readers/demand.py and supply.py); doctor counts
pods only, where the command also counts the workloads' replicas."""

from __future__ import annotations

from typing import NamedTuple

from app.core import autoscalers
from app.core.capacity import has_devices
from app.core.catalog import Catalog
from app.core.kube import Obj
from app.core.policy import Policy
from app.core.scope import namespace_mode
from app.diagnose.doctor.checks.verdict import Verdict, unreadable
from app.diagnose.doctor.facts import Facts
from app.readers.cel.devices import devices_of
from app.readers.client import ReadError
from app.readers.demand import Known, PodAsk, going, needs, pod_ask
from app.readers.supply import devices_by_class

PLANNED = ("enabled", "audit")


def _catalog(classes: list[Obj], slices: list[Obj]) -> Catalog:
    """The cluster's classes, what its slices share and publish: as the webhook sees it."""
    return Catalog.from_objects(classes).seeing(slices)


class _Lists(NamedTuple):
    namespaces: list[Obj]
    pods: list[Obj]
    classes: list[Obj]
    slices: list[Obj]
    claims: list[Obj]


def _lists(facts: Facts) -> _Lists | ReadError:
    """What the checks read, as lists; the first part that could not be read."""
    found = []
    for part in (facts.namespaces, facts.pods, facts.device_classes, facts.slices, facts.claims):
        if isinstance(part, ReadError):
            return part
        found.append(part)
    return _Lists(*found)


def _asks(read: _Lists, facts: Facts, policy: Policy, modes: tuple[str, ...]) -> list[PodAsk]:
    """What the GPU pods of namespaces in `modes` ask of DRA (not those gpu2dra leaves)."""
    scope = {
        n["metadata"]["name"]
        for n in read.namespaces
        if namespace_mode(n, policy) in modes and not going(n)
    }
    known = Known.of(
        policy,
        Catalog.from_objects(read.classes),
        claims=read.claims,
        owners=[] if isinstance(facts.deployments, ReadError) else facts.deployments,
    )
    found = (pod_ask(p, known) for p in read.pods if p["metadata"].get("namespace") in scope)
    return [a for a in found if a is not None and not a.left]


def check_autoscaling(facts: Facts, policy: Policy) -> Verdict:
    if isinstance(facts.deployments, ReadError):
        return unreadable(facts.deployments)
    nodes = [] if isinstance(facts.nodes, ReadError) else facts.nodes
    found = autoscalers.read(facts.deployments, nodes)
    details = tuple(
        f"{a.shown}: {'can' if a.adds_dra_nodes else 'cannot'} add DRA nodes: {a.reason}"
        for a in found
    )
    able = [a for a in found if a.adds_dra_nodes]
    summary = f"{len(found)} node autoscaler(s), {len(able)} of them can add DRA nodes"
    read = _lists(facts)
    if isinstance(read, ReadError):
        return Verdict("PASS", summary + " (the classes in use could not be read)", details=details)
    asks = _asks(read, facts, policy, ("enabled",))
    catalog = _catalog(read.classes, read.slices)
    classes = sorted({s.device_class for a in asks for s, _ in a.asks})
    empty = [c for c in classes if has_devices(catalog, c) is False]
    if empty and not able:
        namespaces = sorted(
            {a.namespace for a in asks for s, _ in a.asks if s.device_class in empty}
        )
        return Verdict(
            "WARN",
            f"no device of {', '.join(empty)} is published, which enabled namespaces "
            f"{', '.join(namespaces)} ask for, and no node autoscaler can add one ({summary})",
            "run the DRA driver on GPU nodes; gpu2dra leaves such pods on the device plugin "
            "(policy noDraCapacity); docs/concepts/capacity.md#node-autoscalers",
            details,
        )
    return Verdict("PASS", summary, details=details)


def check_capacity(facts: Facts, policy: Policy) -> Verdict:
    read = _lists(facts)
    if isinstance(read, ReadError):
        return unreadable(read)
    asks = _asks(read, facts, policy, PLANNED)
    devices = devices_by_class(devices_of(read.slices), read.classes, read.claims)
    short, lines = [], []
    for namespace in sorted({a.namespace for a in asks}):
        for need in needs([a for a in asks if a.namespace == namespace], []):
            free = devices.free_for(need.shape)
            line = f"{namespace}: {need.new} needed of {need.shape.shown}, {free} free"
            lines.append(line)
            if need.new > free:
                short.append(f"{namespace} needs {need.new - free} more {need.shape.shown}")
    if short:
        return Verdict(
            "WARN",
            "; ".join(short),
            "add DRA nodes, or enable fewer namespaces; gpu2dra capacity shows each shape",
            tuple(lines),
        )
    if not lines:
        return Verdict("PASS", "no GPU pod in an enabled or audit namespace asks for DRA devices")
    return Verdict(
        "PASS",
        "what enabled and audit namespaces' pods ask fits in free DRA devices",
        details=tuple(lines),
    )

"""The doctor checks on the cluster's DRA side: the Kubernetes version and its
resource.k8s.io API, the DeviceClasses the policy maps to, the devices ResourceSlices publish,
and nodes that offer the same GPUs through the device plugin and DRA at once."""

from __future__ import annotations

from collections import Counter, defaultdict

from app.core.conversion import describe, state_of
from app.core.kube import RESOURCE_GROUP, Obj
from app.core.policy import Policy
from app.diagnose.doctor.checks.verdict import Verdict, unreadable
from app.diagnose.doctor.facts import Facts
from app.readers.cel.devices import Device, Selection, class_selectors, devices_of, select
from app.readers.client import Listed, ReadError

MIN_MINOR = 34  # resource.k8s.io/v1 is served from Kubernetes 1.34


def check_kubernetes(facts: Facts, policy: Policy) -> Verdict:
    version, served = facts.version, facts.resource_versions
    if isinstance(version, ReadError):
        return unreadable(version)
    git = str(version.get("gitVersion", "?"))
    try:
        minor = int(str(version.get("minor", "")).rstrip("+"))
        major = int(version.get("major", 0))
    except ValueError:
        return Verdict("WARN", f"{git}: cannot tell the minor version")
    if isinstance(served, ReadError):
        return unreadable(served)
    betas = [v for v in served if v != "v1"]
    also = f" (also served: {', '.join(betas)})" if betas else " (no beta version served)"
    if (major, minor) < (1, MIN_MINOR):
        return Verdict(
            "FAIL",
            f"{git}: DRA resource.k8s.io/v1 needs Kubernetes 1.{MIN_MINOR} or later",
            f"upgrade the control plane to 1.{MIN_MINOR}+",
        )
    if "v1" not in served:
        return Verdict(
            "FAIL",
            f"{git}: {RESOURCE_GROUP}/v1 is not served"
            + (
                f" (served: {', '.join(served)})"
                if served
                else f" (no {RESOURCE_GROUP} version is)"
            ),
            f"enable the API with --runtime-config={RESOURCE_GROUP}/v1=true",
        )
    return Verdict("PASS", f"{git}; {RESOURCE_GROUP}/v1 served{also}")


def mapped_classes(policy: Policy) -> dict[str, list[str]]:
    """DeviceClass -> the legacy resources the policy maps to it."""
    found: dict[str, list[str]] = defaultdict(list)
    for mapping in policy.mappings:
        found[mapping.device_class].append(mapping.resource)
    return dict(found)


def check_deviceclasses(facts: Facts, policy: Policy) -> Verdict:
    classes = facts.device_classes
    if isinstance(classes, ReadError):
        return unreadable(classes)
    names = sorted(c["metadata"]["name"] for c in classes)
    needed = mapped_classes(policy)
    missing = [c for c in needed if c not in names]
    listed = f"{len(names)} DeviceClass(es): {', '.join(names) or 'none'}"
    if missing:
        what = "; ".join(f"{c} (for {', '.join(needed[c])})" for c in missing)
        return Verdict(
            "FAIL",
            f"{listed}; missing {what}: those pods are left on the device plugin",
            "install the NVIDIA DRA driver (its chart creates gpu.nvidia.com and mig.nvidia.com), "
            "or change the policy's mappings",
        )
    return Verdict("PASS", f"{listed}; every mapped class exists")


def _selected(devices: list[Device], classes: Listed, policy: Policy) -> dict[str, Selection]:
    """What each mapped DeviceClass that exists selects."""
    if isinstance(classes, ReadError):
        return {}
    by_name = {c["metadata"]["name"]: c for c in classes}
    return {
        name: select(devices, class_selectors(by_name[name]))
        for name in mapped_classes(policy)
        if name in by_name
    }


def check_resourceslices(facts: Facts, policy: Policy) -> Verdict:
    slices, classes = facts.slices, facts.device_classes
    if isinstance(slices, ReadError):
        return unreadable(slices)
    devices = devices_of(slices)
    if not devices:
        return Verdict(
            "FAIL",
            "no ResourceSlice publishes a device: no DRA driver runs, so translated pods stay "
            "Pending",
            "install the NVIDIA DRA driver's kubelet plugin on the GPU nodes",
        )
    selected = _selected(devices, classes, policy)
    per_node: dict[tuple[str, str], list[Device]] = defaultdict(list)
    for d in devices:
        per_node[d.driver, d.node].append(d)
    details = []
    for (driver, node), devs in sorted(per_node.items()):
        counts = ", ".join(
            f"{c}: {sum(1 for d in s.selected if d in devs)}" for c, s in selected.items()
        )
        where = f"node {node}" if node else "no single node"
        details.append(
            f"{driver} on {where}: {len(devs)} device(s)" + (f" ({counts})" if counts else "")
        )
    pools = len({(d.driver, d.pool) for d in devices})
    totals = ", ".join(f"{c} selects {len(s.selected)}" for c, s in selected.items())
    summary = f"{len(devices)} device(s) in {pools} pool(s)" + (f"; {totals}" if totals else "")
    errors = [
        f"DeviceClass {c} on {d.ref}: {message}"
        for c, s in selected.items()
        for d, message in s.errors
    ]
    if selected and not any(s.selected for s in selected.values()):
        return Verdict(
            "FAIL",
            f"{summary}: no device belongs to a DeviceClass gpu2dra maps to",
            "check that the NVIDIA DRA driver publishes the GPUs (driver gpu.nvidia.com)",
            tuple(details + errors),
        )
    if errors:
        return Verdict(
            "WARN",
            f"{summary}; a DeviceClass selector fails on {len(errors)} device(s): the scheduler "
            "aborts allocation on such errors",
            "fix the DeviceClass selector (guard optional attributes with has() or `in`)",
            tuple(details + errors),
        )
    empty = [c for c, s in selected.items() if not s.selected]
    if empty:
        need = mapped_classes(policy)
        what = "; ".join(f"{c} (for {', '.join(need[c])})" for c in empty)
        return Verdict(
            "WARN",
            f"{summary}; no device for {what}: such pods would stay Pending once translated",
            "publish such devices (e.g. MIG partitions), or drop the mapping from the policy",
            tuple(details),
        )
    return Verdict("PASS", summary, details=tuple(details))


def _legacy_amounts(node: Obj, policy: Policy) -> dict[str, str]:
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    return {
        r: str(v)
        for r, v in allocatable.items()
        if policy.mapping_for(r) is not None and str(v) not in ("0", "")
    }


def check_coexistence(facts: Facts, policy: Policy) -> Verdict:
    nodes, slices, classes = facts.nodes, facts.slices, facts.device_classes
    if isinstance(nodes, ReadError):
        return unreadable(nodes)
    if isinstance(slices, ReadError):
        return unreadable(slices)
    selected = _selected(devices_of(slices), classes, policy)
    dra: Counter[str] = Counter(
        d.node for s in selected.values() for d in set(s.selected) if d.node
    )
    plugin = {n["metadata"]["name"]: _legacy_amounts(n, policy) for n in nodes}
    plugin = {n: amounts for n, amounts in plugin.items() if amounts}
    both = sorted(set(plugin) & set(dra))
    if both:
        details = tuple(
            f"node {n}: {', '.join(f'{r}={v}' for r, v in plugin[n].items())} in allocatable "
            f"and {dra[n]} DRA device(s)"
            for n in both
        )
        return Verdict(
            "FAIL",
            f"{len(both)} node(s) offer the same GPUs twice, through the device plugin and "
            f"through DRA: {', '.join(both)}",
            "run one of them per node: remove the device plugin from DRA nodes (GPU Operator: "
            "label nvidia.com/gpu.deploy.device-plugin=false)",
            details,
        )
    return Verdict(
        "PASS",
        f"no node offers GPUs both ways ({len(plugin)} through the device plugin, "
        f"{len(dra)} through DRA)",
    )


def check_conversions(facts: Facts, policy: Policy) -> Verdict:
    """Nodes `gpu2dra nodes convert` left mid-way (the state it keeps on each node): cordoned,
    their GPUs offered by neither stack, or by both, until it is finished or reverted."""
    nodes = facts.nodes
    if isinstance(nodes, ReadError):
        return unreadable(nodes)
    found = [(n["metadata"]["name"], s) for n in nodes if (s := state_of(n)) is not None]
    if not found:
        return Verdict("PASS", "no node is mid-conversion (gpu2dra nodes convert)")
    return Verdict(
        "WARN",
        f"{len(found)} node(s) mid-conversion, cordoned: {', '.join(n for n, _ in found)}",
        "resume with `gpu2dra nodes convert NODE --apply` (the same preset), or go back with "
        "`--revert` (docs/operations/node-pools.md)",
        tuple(f"node {name}: {describe(state)}" for name, state in found),
    )

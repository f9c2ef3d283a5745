"""Which path serves each mapped resource on this cluster: the device plugin, gpu2dra, the
in-tree extended-resource path (KEP-5004), or several of them for different namespaces."""

from __future__ import annotations

from collections import defaultdict

from app.core.catalog import Catalog
from app.core.mapping import ResourceMapping
from app.core.nvidia.mig import plugin_resource
from app.core.policy import Policy
from app.core.scope import namespace_mode
from app.diagnose.doctor.checks.verdict import Verdict, unreadable
from app.diagnose.doctor.facts import Facts
from app.readers.cel.devices import devices_of
from app.readers.client import ReadError
from app.readers.profiles import published_profiles

FIX_MIG = "gpu2dra deviceclasses | kubectl apply -f -"


def _native(mapping: ResourceMapping, catalog: Catalog) -> dict[str, tuple[str, ...]]:
    """The resources of a mapping that DeviceClasses serve in-tree, and those classes."""
    if not mapping.is_pattern:
        found = catalog.serving_extended_resource(mapping.resource)
        return {mapping.resource: found} if found else {}
    serving: dict[str, list[str]] = defaultdict(list)
    for name, ext in sorted(catalog.classes.items()):
        if ext and ext.startswith(mapping.resource[:-1]):
            serving[ext].append(name)
    return {r: tuple(c) for r, c in sorted(serving.items())}


def check_paths(facts: Facts, policy: Policy) -> Verdict:
    classes, namespaces, slices = facts.device_classes, facts.namespaces, facts.slices
    for listed in (classes, namespaces):
        if isinstance(listed, ReadError):
            return unreadable(listed)
    assert not isinstance(classes, ReadError) and not isinstance(namespaces, ReadError)
    catalog = Catalog.from_objects(classes)
    translating = sum(1 for ns in namespaces if namespace_mode(ns, policy) == "enabled")
    lines, doubles = [], []
    for mapping in policy.mappings:
        native = _native(mapping, catalog)
        rest = "elsewhere" if translating else "everywhere"
        paths = []
        if translating:
            deferred = (
                " (pods that gain nothing from it go in-tree)"
                if native and (mapping.in_tree == "defer")
                else ""
            )
            paths.append(f"gpu2dra in {translating} enabled namespace(s){deferred}")
        if native:
            found = "; ".join(f"{r} by {', '.join(c)}" for r, c in native.items())
            paths.append(f"in-tree {rest} ({found}: DeviceClass extendedResourceName)")
            doubles += [f"{r}: {', '.join(c)}" for r, c in native.items() if len(c) > 1]
        else:
            paths.append(
                f"the device plugin {rest} (no DeviceClass names it in extendedResourceName)"
            )
        lines.append(f"{mapping.resource}: {'; '.join(paths)}")
    in_tree_on = any(ext for ext in catalog.classes.values())
    missing = []
    if in_tree_on and not isinstance(slices, ReadError):
        served = {ext for ext in catalog.classes.values() if ext}
        missing = [
            p for p in published_profiles(devices_of(slices)) if plugin_resource(p) not in served
        ]
    if doubles:
        return Verdict(
            "WARN",
            f"one name, several DeviceClasses ({'; '.join(doubles)}): the scheduler uses the "
            "newest, the others serve nothing in-tree",
            "keep extendedResourceName on one class per resource",
            tuple(lines),
        )
    if missing:
        return Verdict(
            "WARN",
            f"MIG profiles published without a class to serve them in-tree: "
            f"{', '.join(missing)}: legacy nvidia.com/mig-* pods gpu2dra leaves alone stay "
            "Pending on DRA nodes",
            FIX_MIG,
            tuple(lines),
        )
    summary = "; ".join(lines) if len(lines) < 2 else f"{len(lines)} mapped resource(s)"
    return Verdict("PASS", summary, details=tuple(lines))

"""Beside the in-tree extended-resource path (KEP-5004, GA in 1.37): when to leave a pod to it.

A DeviceClass whose `spec.extendedResourceName` is `nvidia.com/gpu` lets the scheduler serve
`nvidia.com/gpu: N` from DRA devices itself, with a claim per pod that it makes at binding.
The API server keeps that field only where the feature is on, so a class that carries it is
proof enough that the cluster serves the resource natively.

Both paths never serve one pod: a pod gpu2dra translates no longer asks for the extended
resource, so the scheduler makes no claim for it; a pod gpu2dra leaves alone asks for it as
before, and only the scheduler serves it. What remains is the choice, per mapping: translate
(gpu2dra's claims, today's behaviour), or defer to the in-tree path where translating would
add nothing the pod needs.
"""

from __future__ import annotations

from collections.abc import Iterable

from app.core.catalog import Catalog
from app.core.kube import Obj
from app.core.resources import LegacyRequest, is_regular_init

Found = tuple[str, Obj, list[LegacyRequest]]  # field, container, its legacy requests


def native_classes(resources: Iterable[str], catalog: Catalog) -> dict[str, tuple[str, ...]]:
    """Resource -> the DeviceClasses that serve it in-tree; only the resources some serve."""
    found = {r: catalog.serving_extended_resource(r) for r in resources}
    return {r: classes for r, classes in sorted(found.items()) if classes}


def defer_reason(found: list[Found], adds: bool, catalog: Catalog) -> str | None:
    """Why the in-tree path serves this pod as well as gpu2dra would, or None when gpu2dra
    should translate it: a mapping that says `translate`, a resource no class serves,
    translation that `adds` what the in-tree path cannot (device selectors from GFD node terms,
    which it keeps as node terms that DRA nodes need not satisfy; a MIG slice; sharing), or a
    regular init container asking for devices (the in-tree path gives it devices of its own
    beside the app containers', kubernetes/kubernetes#134880)."""
    requests = [(field, c, lg) for field, c, lgs in found for lg in lgs if lg.devices]
    if not requests or any(lg.mapping.in_tree != "defer" for _, _, lg in requests):
        return None
    served = native_classes({lg.resource for _, _, lg in requests}, catalog)
    if len(served) < len({lg.resource for _, _, lg in requests}):
        return None
    if adds or any(is_regular_init(field, c) for field, c, _ in requests):
        return None
    return "; ".join(
        f"{resource} is served in-tree by DeviceClass {', '.join(classes)}"
        for resource, classes in served.items()
    )

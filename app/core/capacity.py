"""Whether a translated pod has somewhere to run: fail closed on DRA capacity.

A pod on the device plugin gets a node wherever `nvidia.com/gpu` is free, or one an autoscaler
adds for it. Translated, it asks for claims: it runs only where a ResourceSlice publishes a
device its DeviceClass selects, or on a node an autoscaler adds with such devices (most
cannot: autoscalers.py). Two things are judged here, from what the catalog knows:

- the classes the pod's claims use: a class has devices when a driver it names (or, naming
  none, any driver) publishes one in some ResourceSlice; read at driver level, never by
  evaluating the class's CEL, so a class that selects some of a driver's devices (whole GPUs
  where the driver publishes only MIG devices) counts as having them;
- node terms that pin the pod to a cloud node pool or instance type: such pools are most
  often device-plugin pools, sized from `nvidia.com/gpu` requests, and nothing in what
  gpu2dra watches says a pool publishes DRA devices.

What the catalog does not know (`published` is None: offline, no cluster) is assumed to run,
and only the pool terms are noted. Rules and sources: docs/concepts/capacity.md.
"""

from __future__ import annotations

from collections.abc import Iterable

from app.core.catalog import Catalog
from app.core.kube import Obj
from app.core.nvidia.gfd import Requirement, node_requirements
from app.core.outcomes import Code, Finding
from app.core.policy import LeaveOrTranslate

# Node labels that name a cloud node pool, node group or instance type (GKE, EKS and its
# Karpenter, AKS, the well-known instance-type label); a key ending in `-` is a prefix.
POOL_LABELS = (
    "cloud.google.com/gke-accelerator",
    "cloud.google.com/gke-nodepool",
    "node.kubernetes.io/instance-type",
    "beta.kubernetes.io/instance-type",
    "karpenter.sh/nodepool",
    "karpenter.k8s.aws/instance-gpu-",
    "eks.amazonaws.com/nodegroup",
    "kubernetes.azure.com/agentpool",
)
# Operators that keep a pod to nodes carrying the label; NotIn and DoesNotExist only keep it
# off some nodes.
_PINNING = ("In", "Exists", "Gt", "Lt")


def is_pool_label(key: str) -> bool:
    return any(key.startswith(k) if k.endswith("-") else key == k for k in POOL_LABELS)


def _term(req: Requirement) -> str:
    key, op, values = req
    if op == "In" and len(values) == 1:
        return f"{key}={values[0]}"
    return f"{key} ({' '.join([op, ','.join(values)]).strip()})"


def pool_terms(spec: Obj) -> tuple[str, ...]:
    """The pod's node terms (nodeSelector, required node affinity) that pin it to a cloud
    node pool or instance type, each as `key=value` or `key (Op values)`."""
    found = [_term(r) for r in node_requirements(spec) if r[1] in _PINNING and is_pool_label(r[0])]
    return tuple(dict.fromkeys(found))


def has_devices(catalog: Catalog, device_class: str) -> bool | None:
    """Whether a ResourceSlice publishes a device of a driver `device_class` names; None when
    the catalog does not know what is published."""
    if catalog.published is None:
        return None
    named = catalog.drivers.get(device_class) or frozenset()
    return bool(named & catalog.published) if named else bool(catalog.published)


def _autoscaling(catalog: Catalog) -> str:
    """What the warning says of the node autoscalers: each, with why it cannot add DRA nodes."""
    if not catalog.autoscalers:
        return (
            "no node autoscaler found (one that can: a Cluster Autoscaler with the clusterapi "
            "provider, 1.37.0 or later, or a GKE node pool labelled "
            "cloud.google.com/gke-nvidia-gpu-dra-driver=true)"
        )
    return "; ".join(a.said for a in catalog.autoscalers)


def unserved(classes: Iterable[str], catalog: Catalog, then: LeaveOrTranslate) -> Finding | None:
    """Why claims of `classes` would find no device and no autoscaler to add one; None when
    they can run, or when the catalog does not know."""
    empty = [c for c in sorted(set(classes)) if has_devices(catalog, c) is False]
    if not empty or any(a.adds_dra_nodes for a in catalog.autoscalers):
        return None
    drivers = sorted({d for c in empty for d in catalog.drivers.get(c) or ()})
    said = {
        "classes": ", ".join(empty),
        "drivers": f"driver {', '.join(drivers)}" if drivers else "any driver",
        "autoscaling": _autoscaling(catalog),
    }
    code = Code.NO_DRA_DEVICES if then == "leave" else Code.NO_DRA_DEVICES_TRANSLATED
    return Finding(code, **said)


def knows_cluster(catalog: Catalog) -> bool:
    """Whether the catalog was read from a cluster (its slices say what is shared or
    published), not assumed offline from the policy's deviceClasses."""
    return catalog.published is not None or catalog.sharing is not None


def pinned(spec: Obj, catalog: Catalog, then: LeaveOrTranslate) -> Finding | None:
    """Why the pod's node terms may leave its claims no device: they pin it to a cloud pool
    that nothing says publishes DRA devices. Offline (a manifest reviewed before it is
    applied) it is only said."""
    terms = pool_terms(spec)
    if not terms:
        return None
    said = {"terms": "; ".join(terms), "it": "it" if len(terms) == 1 else "they"}
    if then == "leave" and knows_cluster(catalog):
        return Finding(Code.CLOUD_POOL, **said)
    return Finding(Code.CLOUD_POOL_TRANSLATED, **said)

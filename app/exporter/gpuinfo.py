"""Which pod holds which GPU, from what DRA records: a pod's claims (its spec and status), the
claims' allocation results and the ResourceSlices' device attributes. Pure: the exporter keeps
what `pod_gpus`, `claim_devices` and `slice_devices` extract in its watch caches, and each
scrape joins them with `rows`.

A row is one device a container of a pod holds, labelled so that one PromQL `on(UUID)` joins
it with dcgm-exporter's series: `UUID` is the physical GPU's UUID, as DCGM labels every metric
of the GPU (a MIG device's parent GPU; the MIG device's own UUID is in `mig_uuid`, its profile
in `GPU_I_PROFILE`, as DCGM labels a MIG instance's metrics).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from app.core.kube import MANAGED_BY, Obj
from app.core.templates import TEMPLATE_PREFIX

# The annotation the scheduler puts on the claim it makes for the in-tree path (KEP-5004).
EXTENDED_CLAIM = "resource.kubernetes.io/extended-resource-claim"
_MANAGED_KEY, _MANAGED_VALUE = next(iter(MANAGED_BY.items()))
FINISHED = frozenset(("Succeeded", "Failed"))


class Use(NamedTuple):
    """A container's reference to a claim: the whole claim (request "") or one request."""

    container: str  # "" when the pod holds the claim and no container names it
    claim: str
    request: str
    gpu2dra: bool = False  # made from one of gpu2dra's templates (gpu2dra-*)


@dataclass(frozen=True, slots=True)
class PodGpus:
    """What the cache keeps of a pod bound to a node and not finished, that uses claims."""

    namespace: str
    name: str
    uid: str
    node: str
    uses: tuple[Use, ...]


class Result(NamedTuple):
    """One device of a claim's allocation, with the DeviceClass its request asked for."""

    request: str  # as allocated: "<request>" or "<request>/<subrequest>" (firstAvailable)
    driver: str
    pool: str
    device: str
    device_class: str


@dataclass(frozen=True, slots=True)
class ClaimDevices:
    """What the cache keeps of a claim: how it was made and what it was allocated."""

    # "in-tree" (made by the scheduler), "gpu2dra" (labelled as gpu2dra's), else "dra"; a claim
    # the pod made from a gpu2dra-* template is gpu2dra's whatever its labels (a template's
    # object labels do not reach its claims)
    path: str
    results: tuple[Result, ...]


class Identity(NamedTuple):
    """What a ResourceSlice publishes to tell the device apart on its node."""

    uuid: str  # the physical GPU: the device's `uuid`, or a MIG device's `parentUUID`
    mig_uuid: str  # a MIG device's own `uuid`; "" for a whole GPU
    mig_profile: str


@dataclass(frozen=True, slots=True)
class SliceDevices:
    """What the cache keeps of a ResourceSlice: its pool and each device's identity."""

    driver: str
    pool: str
    generation: int
    devices: Mapping[str, Identity]


class Row(NamedTuple):
    """One series of gpu2dra_pod_gpu_info: a device a container of a pod holds."""

    namespace: str
    pod: str
    pod_uid: str
    container: str
    node: str
    path: str
    claim: str
    request: str
    device_class: str
    driver: str
    pool: str
    device: str
    # dcgm-exporter's labels, spelt as it spells them: the GPU's UUID, and for a MIG device
    # its profile (`1g.5gb`), so that `on(UUID, GPU_I_PROFILE)` tells MIG devices apart.
    UUID: str
    mig_uuid: str
    GPU_I_PROFILE: str


LABELS: tuple[str, ...] = Row._fields


def _dict(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def pod_gpus(pod: Obj) -> PodGpus | None:
    """The claims a pod's containers use, by the claims' names; None for a pod that holds no
    device now: not bound to a node, finished, or without claims."""
    meta, spec, status = (
        _dict(pod.get("metadata")),
        _dict(pod.get("spec")),
        _dict(pod.get("status")),
    )
    node = spec.get("nodeName")
    if not node or status.get("phase") in FINISHED:
        return None
    # A pod claim's name -> the ResourceClaim: named in the spec, or made from a template
    # (status.resourceClaimStatuses, written by the resourceclaim controller).
    names: dict[str, str] = {}
    for entry in _list(status.get("resourceClaimStatuses")):
        if isinstance(entry, dict) and entry.get("name") and entry.get("resourceClaimName"):
            names[str(entry["name"])] = str(entry["resourceClaimName"])
    ours: set[str] = set()  # the pod claims made from gpu2dra's templates
    for entry in _list(spec.get("resourceClaims")):
        if not isinstance(entry, dict) or not entry.get("name"):
            continue
        if entry.get("resourceClaimName"):
            names[str(entry["name"])] = str(entry["resourceClaimName"])
        if str(entry.get("resourceClaimTemplateName", "")).startswith(TEMPLATE_PREFIX):
            ours.add(str(entry["name"]))
    uses: list[Use] = []
    referenced: set[str] = set()
    for container in (*_list(spec.get("initContainers")), *_list(spec.get("containers"))):
        if not isinstance(container, dict):
            continue
        for ref in _list(_dict(container.get("resources")).get("claims")):
            if isinstance(ref, dict) and (claim := names.get(name := str(ref.get("name")))):
                referenced.add(name)
                request = str(ref.get("request", ""))
                uses.append(Use(str(container.get("name", "")), claim, request, name in ours))
    uses.extend(
        Use("", claim, "", name in ours) for name, claim in names.items() if name not in referenced
    )
    # The in-tree path: the claim the scheduler made, and which container got which request.
    extended = _dict(status.get("extendedResourceClaimStatus"))
    if claim := extended.get("resourceClaimName"):
        for mapping in _list(extended.get("requestMappings")):
            if isinstance(mapping, dict) and mapping.get("requestName"):
                container = str(mapping.get("containerName", ""))
                uses.append(Use(container, str(claim), str(mapping["requestName"])))
    if not uses:
        return None
    return PodGpus(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        node=str(node),
        uses=tuple(dict.fromkeys(uses)),
    )


def _classes(claim: Obj) -> dict[str, str]:
    """Each request's DeviceClass, by the name an allocation result gives it."""
    found: dict[str, str] = {}
    requests = _dict(_dict(_dict(claim.get("spec")).get("devices"))).get("requests")
    for request in _list(requests):
        if not isinstance(request, dict):
            continue
        name = str(request.get("name", ""))
        if exactly := _dict(request.get("exactly")):
            found[name] = str(exactly.get("deviceClassName", ""))
        for sub in _list(request.get("firstAvailable")):
            if isinstance(sub, dict):
                found[f"{name}/{sub.get('name', '')}"] = str(sub.get("deviceClassName", ""))
    return found


def claim_devices(claim: Obj) -> ClaimDevices:
    meta = _dict(claim.get("metadata"))
    if _dict(meta.get("annotations")).get(EXTENDED_CLAIM) == "true":
        path = "in-tree"
    elif _dict(meta.get("labels")).get(_MANAGED_KEY) == _MANAGED_VALUE:
        path = "gpu2dra"
    else:
        path = "dra"
    classes = _classes(claim)
    allocation = _dict(_dict(claim.get("status")).get("allocation"))
    results = tuple(
        Result(
            request=str(r.get("request", "")),
            driver=str(r.get("driver", "")),
            pool=str(r.get("pool", "")),
            device=str(r.get("device", "")),
            device_class=classes.get(str(r.get("request", "")), ""),
        )
        for r in _list(_dict(allocation.get("devices")).get("results"))
        if isinstance(r, dict)
    )
    return ClaimDevices(path, results)


def _attribute(attributes: Obj, driver: str, name: str) -> str:
    """A string attribute, named unqualified (the driver's domain) or `<driver>/<name>`."""
    value = _dict(attributes.get(name) or attributes.get(f"{driver}/{name}"))
    return str(value.get("string", ""))


def slice_devices(obj: Obj) -> SliceDevices:
    spec = _dict(obj.get("spec"))
    driver, pool = str(spec.get("driver", "")), _dict(spec.get("pool"))
    devices: dict[str, Identity] = {}
    for device in _list(spec.get("devices")):
        if not isinstance(device, dict):
            continue
        attributes = _dict(device.get("attributes"))
        own, parent = (
            _attribute(attributes, driver, "uuid"),
            _attribute(attributes, driver, "parentUUID"),
        )
        devices[str(device.get("name", ""))] = (
            Identity(parent, own, _attribute(attributes, driver, "profile"))
            if parent
            else Identity(own, "", "")
        )
    generation = pool.get("generation")
    return SliceDevices(
        driver, str(pool.get("name", "")), generation if isinstance(generation, int) else 0, devices
    )


def device_index(slices: Iterable[SliceDevices]) -> dict[tuple[str, str, str], Identity]:
    """(driver, pool, device) -> identity, from each pool's newest generation (a pool being
    republished has slices of two)."""
    newest: dict[tuple[str, str], int] = {}
    slices = list(slices)
    for s in slices:
        key = (s.driver, s.pool)
        newest[key] = max(newest.get(key, s.generation), s.generation)
    index: dict[tuple[str, str, str], Identity] = {}
    for s in slices:
        if s.generation == newest[s.driver, s.pool]:
            for name, identity in s.devices.items():
                index[s.driver, s.pool, name] = identity
    return index


_UNKNOWN = Identity("", "", "")


def rows(
    pods: Iterable[PodGpus],
    claims: Mapping[tuple[str, str], ClaimDevices],
    devices: Mapping[tuple[str, str, str], Identity],
    drivers: Collection[str],
) -> list[Row]:
    """One row per container and allocated device of the drivers named, in the order of the
    pods; a device no slice publishes any more keeps its row, with empty identity."""
    found: dict[Row, None] = {}
    for pod in pods:
        for use in pod.uses:
            claim = claims.get((pod.namespace, use.claim))
            if claim is None:
                continue
            for r in claim.results:
                if r.driver not in drivers:
                    continue
                if use.request and use.request not in (r.request, r.request.split("/")[0]):
                    continue
                identity = devices.get((r.driver, r.pool, r.device), _UNKNOWN)
                # Positional, in LABELS order: a row is built for every device at every
                # scrape, where keyword arguments would cost half as much again.
                row = Row(
                    pod.namespace,
                    pod.name,
                    pod.uid,
                    use.container,
                    pod.node,
                    "gpu2dra" if use.gpu2dra else claim.path,
                    use.claim,
                    r.request,
                    r.device_class,
                    r.driver,
                    r.pool,
                    r.device,
                    *identity,
                )
                found[row] = None
    return list(found)

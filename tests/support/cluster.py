"""Fake NVIDIA GPU capacity and polling helpers for the end-to-end tests.

The objects mimic what the NVIDIA DRA driver (gpu.nvidia.com) publishes: its two DeviceClasses,
one ResourceSlice pool per node with full GPUs (gpu-<minor>) and static MIG devices
(gpu-<minor>-mig-<profile without dots, RFC 1123>-<GI profile id>-<placement start>) with the
capacities the driver publishes. A MIG-enabled GPU publishes only its MIG devices, as the
driver does. Nodes are plain Node objects made to look
Ready: there is no kubelet, so pods get scheduled and bound but never run.

Everything here takes a kubernetes.client.ApiClient and works with plain dicts.
"""

from __future__ import annotations

import datetime
import re
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from kubernetes import client
from kubernetes.client.exceptions import ApiException

GPU_DRIVER = "gpu.nvidia.com"
RESOURCE_GROUP = "resource.k8s.io"
RESOURCE_VERSION = "v1"
DRIVER_VERSION = "580.82.7"  # semver as the driver publishes it (580.82.07 without leading 0)
CUDA_DRIVER_VERSION = "13.0.0"

T = TypeVar("T")
Obj = dict[str, Any]


@dataclass(frozen=True)
class GpuProduct:
    name: str  # NVML GetName(), spaces kept
    architecture: str
    memory_mib: int  # NVML's total, what the driver publishes in bytes and GFD labels in MiB
    compute_capability: str  # semver, e.g. "8.0.0"
    multiprocessors: int
    brand: str = "Nvidia"


A100_SXM4_40GB = GpuProduct("NVIDIA A100-SXM4-40GB", "Ampere", 40960, "8.0.0", 108)
A100_SXM4_80GB = GpuProduct("NVIDIA A100-SXM4-80GB", "Ampere", 81920, "8.0.0", 108)
H100_80GB_HBM3 = GpuProduct("NVIDIA H100 80GB HBM3", "Hopper", 81559, "9.0.0", 132)

# nvidia-smi GPU instance profile IDs by slice count ("+me" variants: 20, double-memory 1g: 15).
_GI_PROFILE_IDS = {1: 19, 2: 14, 3: 9, 4: 5, 7: 0}
# A100/H100 placements: allowed start slots and memory slots used (of 8), by compute slices.
_MIG_STARTS = {1: range(7), 2: (0, 2, 4), 3: (0, 4), 4: (0,), 7: (0,)}
_MIG_SLOTS = {1: 1, 2: 2, 3: 4, 4: 4, 7: 8}
_MIG_PROFILE = re.compile(r"^(?:\d+c\.)?(\d+)g\.(\d+)gb(\+me)?$")
# A100 decoders by compute slices; a `+me` profile gets one decoder, JPEG and OFA engine.
_MIG_DECODERS = {1: 0, 2: 1, 3: 2, 4: 2, 7: 5}


def _rfc1123(name: str) -> str:
    """The driver's toRFC1123Compliant: lower case, anything else but [a-z0-9-.] a dash."""
    return re.sub(r"[^a-z0-9-.]", "-", name.lower()).strip("-").removesuffix(".")


# -- DeviceClasses -----------------------------------------------------------------------------


def device_class(name: str, device_type: str) -> Obj:
    """A DeviceClass like the driver's chart: driver gpu.nvidia.com, attribute type."""
    expression = (
        f"device.driver == '{GPU_DRIVER}' && "
        f"device.attributes['{GPU_DRIVER}'].type == '{device_type}'"
    )
    return {
        "apiVersion": f"{RESOURCE_GROUP}/{RESOURCE_VERSION}",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


def create_nvidia_device_classes(api: client.ApiClient) -> None:
    """gpu.nvidia.com (type gpu) and mig.nvidia.com (type mig); fine if they already exist."""
    for body in (device_class("gpu.nvidia.com", "gpu"), device_class("mig.nvidia.com", "mig")):
        _create_cluster_object(api, "deviceclasses", body, exist_ok=True)


# -- Nodes -------------------------------------------------------------------------------------


def create_node(
    api: client.ApiClient,
    name: str,
    *,
    labels: Mapping[str, str] | None = None,
    cpu: str = "64",
    memory: str = "512Gi",
    pods: str = "110",
    extended: Mapping[str, str] | None = None,
) -> Obj:
    """Create a Node and make it schedulable without a kubelet; `extended` resources (such
    as the device plugin's nvidia.com/gpu) are added to its capacity and allocatable.

    The status (Ready condition, capacity/allocatable) can only be set through the status
    subresource. The TaintNodesByCondition admission plugin adds a not-ready:NoSchedule taint
    at creation, which normally the node-lifecycle controller lifts; it is off, so drop it here.
    """
    core = client.CoreV1Api(api)
    node_labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", **(labels or {})}
    body = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": node_labels}}
    core.create_node(client.V1Node.model_validate(body))
    now = _now()
    resources = {"cpu": cpu, "memory": memory, "pods": pods, **(extended or {})}
    status = {
        "capacity": resources,
        "allocatable": resources,
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "KubeletReady",
                "message": "fake node for end-to-end tests",
                "lastHeartbeatTime": now,
                "lastTransitionTime": now,
            }
        ],
        "addresses": [{"type": "Hostname", "address": name}],
    }
    core.patch_node_status(name, {"status": status})
    node = core.patch_node(name, {"spec": {"taints": None}})
    return _to_dict(api, node)


def delete_node(api: client.ApiClient, name: str) -> None:
    """Delete the node's gpu.nvidia.com ResourceSlices and the Node."""
    custom = client.CustomObjectsApi(api)
    slices = custom.list_cluster_custom_object(
        RESOURCE_GROUP,
        RESOURCE_VERSION,
        "resourceslices",
        field_selector=f"spec.nodeName={name},spec.driver={GPU_DRIVER}",
    )
    for item in slices["items"]:
        try:
            custom.delete_cluster_custom_object(
                RESOURCE_GROUP, RESOURCE_VERSION, "resourceslices", item["metadata"]["name"]
            )
        except ApiException as error:
            if error.status != 404:
                raise
    _ignore_not_found(lambda: client.CoreV1Api(api).delete_node(name))


# -- ResourceSlices ----------------------------------------------------------------------------


def gpu_devices(
    node_name: str,
    product: GpuProduct = A100_SXM4_40GB,
    gpus: int = 1,
    mig: Mapping[int, Sequence[str]] | None = None,
    memory: bool = True,
) -> list[Obj]:
    """The devices of one node: gpu-0 .. gpu-<gpus-1>, except that a GPU listed in mig
    (minor -> MIG profiles such as ["3g.20gb", "1g.5gb"]) publishes only those MIG devices.
    `memory=False`: the whole GPUs have no memory capacity (the driver leaves it out when
    NVML does not report it)."""
    mig = mig or {}
    unknown = sorted(set(mig) - set(range(gpus)))
    if unknown:
        raise ValueError(f"mig layout names GPUs {unknown}, node has {gpus}")
    devices: list[Obj] = []
    for minor in range(gpus):
        gpu_uuid = f"GPU-{uuid.uuid5(uuid.NAMESPACE_URL, f'{node_name}/gpu-{minor}')}"
        common = {
            "productName": {"string": product.name},
            "brand": {"string": product.brand},
            "architecture": {"string": product.architecture},
            "cudaComputeCapability": {"version": product.compute_capability},
            "driverVersion": {"version": DRIVER_VERSION},
            "cudaDriverVersion": {"version": CUDA_DRIVER_VERSION},
            "resource.kubernetes.io/pciBusID": {"string": f"0000:{0x10 + minor:02x}:00.0"},
        }
        if minor not in mig:
            devices.append(
                {
                    "name": f"gpu-{minor}",
                    "attributes": {
                        "type": {"string": "gpu"},
                        "uuid": {"string": gpu_uuid},
                        **common,
                    },
                    "capacity": (
                        {"memory": {"value": str(product.memory_mib * 2**20)}} if memory else {}
                    ),
                }
            )
            continue
        layout = [_parse_mig_profile(p, product) for p in mig[minor]]
        starts = _place_mig([slices for slices, *_ in layout])
        if starts is None:
            raise ValueError(f"MIG profiles {list(mig[minor])} do not fit on one GPU")
        for (slices, memory_gb, gi_profile_id, profile), placement in zip(
            layout, starts, strict=True
        ):
            pname = _rfc1123(profile.replace(".", ""))
            name = f"gpu-{minor}-mig-{pname}-{gi_profile_id}-{placement}"
            media = profile.endswith("+me")
            devices.append(
                {
                    "name": name,
                    "attributes": {
                        "type": {"string": "mig"},
                        "profile": {"string": profile},
                        "parentUUID": {"string": gpu_uuid},
                        "uuid": {"string": f"MIG-{uuid.uuid5(uuid.NAMESPACE_URL, name)}"},
                        **common,
                    },
                    "capacity": {
                        # MIG memory is a bit under the nominal size: 1g.5gb has 4864 MiB,
                        # published in bytes (NVML's MemorySizeMB is MiB).
                        "memory": {"value": str(memory_gb * 1024 * 95 // 100 * 2**20)},
                        "multiprocessors": {"value": str(product.multiprocessors // 7 * slices)},
                        "copyEngines": {"value": str(slices)},
                        "decoders": {"value": str(max(_MIG_DECODERS[slices], int(media)))},
                        "encoders": {"value": "0"},
                        "jpegEngines": {"value": str(int(slices == 7 or media))},
                        "ofaEngines": {"value": str(int(slices == 7 or media))},
                        **{
                            f"memorySlice{i}": {"value": "1"}
                            for i in range(placement, placement + _MIG_SLOTS[slices])
                        },
                    },
                }
            )
    return devices


def consumable_shares(devices: Sequence[Obj], option: str) -> list[Obj]:
    """The devices as the NVIDIA driver publishes them with `--consumable-shares=<option>`
    (cmd/gpu-kubelet-plugin/consumable_shares.go): each allows multiple allocations; with
    a memory capacity, `memory` becomes consumable in 1Mi steps (default 0, or the whole GPU
    for `memory`), and a number N adds `shares` N (default 1, from 1 to N in steps of 1)."""
    out = []
    for device in devices:
        device = {**device, "allowMultipleAllocations": True}
        capacity = dict(device.get("capacity") or {})
        if "memory" in capacity:
            mib = int(capacity["memory"]["value"]) // 2**20
            whole = f"{mib}Mi"
            default = whole if option == "memory" else "0"
            low = "1Mi" if option == "memory" else "0"
            capacity["memory"] = {
                "value": whole,
                "requestPolicy": {
                    "default": default,
                    "validRange": {"min": low, "max": whole, "step": "1Mi"},
                },
            }
            if option.isdigit():
                capacity["shares"] = {
                    "value": option,
                    "requestPolicy": {
                        "default": "1",
                        "validRange": {"min": "1", "max": option, "step": "1"},
                    },
                }
        device["capacity"] = capacity
        out.append(device)
    return out


def gpu_resource_slice(
    node_name: str,
    devices: Sequence[Obj],
    *,
    owner: Obj | None = None,
) -> Obj:
    """One ResourceSlice holding the whole pool of a node, as the driver publishes it."""
    metadata: Obj = {"generateName": f"{node_name}-{GPU_DRIVER}-"}
    if owner is not None:
        metadata["ownerReferences"] = [
            {
                "apiVersion": "v1",
                "kind": "Node",
                "name": owner["metadata"]["name"],
                "uid": owner["metadata"]["uid"],
                "controller": True,
            }
        ]
    return {
        "apiVersion": f"{RESOURCE_GROUP}/{RESOURCE_VERSION}",
        "kind": "ResourceSlice",
        "metadata": metadata,
        "spec": {
            "driver": GPU_DRIVER,
            "nodeName": node_name,
            "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
            "devices": list(devices),
        },
    }


def create_gpu_node(
    api: client.ApiClient,
    name: str,
    *,
    product: GpuProduct = A100_SXM4_40GB,
    gpus: int = 1,
    mig: Mapping[int, Sequence[str]] | None = None,
    labels: Mapping[str, str] | None = None,
    consumable: str | None = None,
    extended: Mapping[str, str] | None = None,
) -> tuple[Obj, Obj]:
    """A Ready Node plus its gpu.nvidia.com ResourceSlice; returns (node, slice). With
    `consumable`, its devices are shared as the driver's --consumable-shares=<consumable>
    shares them; `extended`: what the device plugin advertises there too."""
    node = create_node(api, name, labels=labels, extended=extended)
    devices = gpu_devices(name, product, gpus, mig)
    if consumable is not None:
        devices = consumable_shares(devices, consumable)
    body = gpu_resource_slice(name, devices, owner=node)
    return node, _create_cluster_object(api, "resourceslices", body)


# The device every e2e cluster publishes on a node that does not exist: gpu2dra translates a
# pod only where some ResourceSlice publishes a device its class selects (app/core/capacity.py),
# and tests about other rules need a cluster that has DRA devices somewhere, as a migrating
# one does. No pod can land there, so nothing is allocated from it.
ELSEWHERE = "gpu2dra-e2e-elsewhere"


def publish_elsewhere(api: client.ApiClient) -> Obj:
    body = gpu_resource_slice(ELSEWHERE, gpu_devices(ELSEWHERE, A100_SXM4_40GB, 1, None))
    body["metadata"] = {"name": ELSEWHERE}
    return _create_cluster_object(api, "resourceslices", body, exist_ok=True)


def unpublish_elsewhere(api: client.ApiClient) -> None:
    delete = client.ResourceV1Api(api).delete_resource_slice
    _ignore_not_found(lambda: delete(ELSEWHERE))


# -- Namespaces, pods, claims ------------------------------------------------------------------


def create_namespace(api: client.ApiClient, prefix: str = "e2e-") -> str:
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"generateName": prefix}}
    created = client.CoreV1Api(api).create_namespace(client.V1Namespace.model_validate(body))
    assert created.metadata is not None
    name: str = created.metadata.name
    return name


def delete_namespace(api: client.ApiClient, name: str) -> None:
    """Delete a namespace without waiting. Pods bound to a kubelet-less node would stay
    Terminating forever with a grace period, so they are force-deleted first."""
    core = client.CoreV1Api(api)
    _ignore_not_found(lambda: core.delete_collection_namespaced_pod(name, grace_period_seconds=0))
    _ignore_not_found(lambda: core.delete_namespace(name))


def wait_for_default_service_account(
    api: client.ApiClient, namespace: str, timeout: float = 60
) -> None:
    """The ServiceAccount admission plugin rejects pods until the controller-manager has
    created the namespace's default ServiceAccount."""
    core = client.CoreV1Api(api)

    def exists() -> bool | None:
        try:
            core.read_namespaced_service_account("default", namespace)
        except ApiException as error:
            if error.status == 404:
                return None
            raise
        return True

    wait_for(exists, timeout, f"ServiceAccount {namespace}/default")


def wait_for_pod_scheduled(
    api: client.ApiClient, namespace: str, name: str, timeout: float = 60
) -> Obj:
    """Wait until the scheduler has bound the pod (spec.nodeName set); returns the pod."""
    core = client.CoreV1Api(api)
    last: Obj = {}

    def bound() -> Obj | None:
        nonlocal last
        last = _to_dict(api, core.read_namespaced_pod(name, namespace))
        return last if last["spec"].get("nodeName") else None

    def describe() -> str:
        conditions = last.get("status", {}).get("conditions", [])
        scheduled = [c for c in conditions if c.get("type") == "PodScheduled"]
        detail = scheduled[0].get("message", "") if scheduled else "no PodScheduled condition"
        return f"pod {namespace}/{name} to be scheduled ({detail})"

    return wait_for(bound, timeout, describe)


def pod_resource_claims(api: client.ApiClient, pod: Obj) -> list[Obj]:
    """The ResourceClaims a pod uses: named in spec.resourceClaims, generated from templates
    (status.resourceClaimStatuses) or made by the scheduler for extended resources."""
    namespace = pod["metadata"]["namespace"]
    status = pod.get("status", {})
    names = [
        c["resourceClaimName"]
        for c in pod["spec"].get("resourceClaims", [])
        if c.get("resourceClaimName")
    ]
    names += [
        c["resourceClaimName"]
        for c in status.get("resourceClaimStatuses", [])
        if c.get("resourceClaimName")
    ]
    extended = status.get("extendedResourceClaimStatus") or {}
    if extended.get("resourceClaimName"):
        names.append(extended["resourceClaimName"])
    custom = client.CustomObjectsApi(api)
    return [
        cast(
            Obj,
            custom.get_namespaced_custom_object(
                RESOURCE_GROUP, RESOURCE_VERSION, namespace, "resourceclaims", claim
            ),
        )
        for claim in names
    ]


def allocated_devices(api: client.ApiClient, pod: Obj) -> list[Obj]:
    """status.allocation.devices.results of all the pod's claims:
    [{"request": ..., "driver": ..., "pool": ..., "device": ...}, ...]."""
    results: list[Obj] = []
    for claim in pod_resource_claims(api, pod):
        allocation = claim.get("status", {}).get("allocation") or {}
        results += allocation.get("devices", {}).get("results", [])
    return results


def wait_for(probe: Callable[[], T | None], timeout: float, what: str | Callable[[], str]) -> T:
    """Call probe until it returns something other than None (or False)."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value is not None and value is not False:
            return value
        if time.monotonic() >= deadline:
            description = what() if callable(what) else what
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {description}")
        time.sleep(0.2)


# -- internals ---------------------------------------------------------------------------------


def _parse_mig_profile(profile: str, product: GpuProduct) -> tuple[int, int, int, str]:
    """(slices, memory GB, GI profile id, profile) of a profile like "1g.10gb" or "1g.5gb+me"."""
    match = _MIG_PROFILE.match(profile)
    if not match or int(match[1]) not in _GI_PROFILE_IDS:
        raise ValueError(f"not a MIG profile: {profile!r}")
    slices, memory_gb = int(match[1]), int(match[2])
    gi_profile_id = _GI_PROFILE_IDS[slices]
    if match[3]:
        gi_profile_id = 20
    elif slices == 1 and memory_gb > product.memory_mib // 1024 // 8:
        gi_profile_id = 15  # 1g with two memory slices (1g.10gb on a 40 GB A100)
    return slices, memory_gb, gi_profile_id, profile


def _place_mig(sizes: Sequence[int], used: frozenset[int] = frozenset()) -> list[int] | None:
    """Placement starts for MIG instances of the given slice counts, in order, or None."""
    if not sizes:
        return []
    size, rest = sizes[0], sizes[1:]
    for start in _MIG_STARTS[size]:
        slots = frozenset(range(start, start + _MIG_SLOTS[size]))
        if slots & used or max(slots) > 7:
            continue
        placed = _place_mig(rest, used | slots)
        if placed is not None:
            return [start, *placed]
    return None


def _create_cluster_object(
    api: client.ApiClient, plural: str, body: Obj, *, exist_ok: bool = False
) -> Obj:
    custom = client.CustomObjectsApi(api)
    try:
        created = custom.create_cluster_custom_object(
            RESOURCE_GROUP, RESOURCE_VERSION, plural, body
        )
    except ApiException as error:
        if not (exist_ok and error.status == 409):
            raise
        created = custom.get_cluster_custom_object(
            RESOURCE_GROUP, RESOURCE_VERSION, plural, body["metadata"]["name"]
        )
    return cast(Obj, created)


def _ignore_not_found(call: Callable[[], object]) -> None:
    try:
        call()
    except ApiException as error:
        if error.status != 404:
            raise


def _to_dict(api: client.ApiClient, model: object) -> Obj:
    """A client model as the API's JSON (camelCase keys), like a webhook sees it."""
    return cast(Obj, api.sanitize_for_serialization(model))


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- Pods, nodes and templates of the scenarios -------------------------------------------------


def gpu_pod(name: str, resources: Obj, **spec: Any) -> Obj:
    """A one-container pod asking for `resources` as limits."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "containers": [
                {"name": "main", "image": "cuda:12", "resources": {"limits": resources}}
            ],
            **spec,
        },
    }


def add_gpu_node(api: client.ApiClient, names: list[str], **kwargs: Any) -> str:
    """create_gpu_node under a fresh name, recorded in `names` (the gpu_nodes fixture)."""
    name = f"gpu-{uuid.uuid4().hex[:6]}"
    create_gpu_node(api, name, **kwargs)
    names.append(name)
    return name


def add_device_plugin_node(api: client.ApiClient, names: list[str], gpus: int) -> str:
    """A node whose GPUs only the device plugin offers: nvidia.com/gpu in allocatable and no
    ResourceSlice; recorded in `names` (the gpu_nodes fixture)."""
    name = f"plugin-{uuid.uuid4().hex[:6]}"
    create_node(api, name, extended={"nvidia.com/gpu": str(gpus)})
    names.append(name)
    return name


def label(api: client.ApiClient, namespace: str, mode: str | None) -> None:
    """Set (or, with None, remove) the namespace's gpu2dra.io/migration label."""
    client.CoreV1Api(api).patch_namespace(
        namespace, {"metadata": {"labels": {"gpu2dra.io/migration": mode}}}
    )


def read_pod(api: client.ApiClient, namespace: str, name: str) -> Obj:
    return _to_dict(api, client.CoreV1Api(api).read_namespaced_pod(name, namespace))


def templates_in(api: client.ApiClient, namespace: str) -> list[Obj]:
    listed = client.CustomObjectsApi(api).list_namespaced_custom_object(
        RESOURCE_GROUP, RESOURCE_VERSION, namespace, "resourceclaimtemplates"
    )
    return cast(list[Obj], listed["items"])

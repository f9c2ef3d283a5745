"""Fake NVIDIA GPU capacity and polling helpers for the end-to-end tests.

The devices are NVIDIA's DRA driver's (gpu.nvidia.com) own: what the inventory built from its
kubelet plugin (tests/driver) printed for the layout, checked in as a golden file under
tests/driver/golden/ (tests/driver/layouts.json names each layout's arguments;
tests/e2e/test_driver_inventory.py checks that the driver still prints it). A MIG-enabled GPU
publishes only its MIG devices, as the driver does. Only what belongs to the machine is the
suite's: the UUIDs, derived from the node's name so that no two nodes share a GPU. Nodes are
plain Node objects made to look Ready: there is no kubelet, so pods get scheduled and bound
but never run.

Everything here takes a kubernetes.client.ApiClient and works with plain dicts.
"""

from __future__ import annotations

import datetime
import functools
import json
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from app.core.quantity import parse_quantity

GPU_DRIVER = "gpu.nvidia.com"
RESOURCE_GROUP = "resource.k8s.io"
RESOURCE_VERSION = "v1"
DRIVER_VERSION = "580.82.7"  # semver as the driver publishes it (580.82.07 without leading 0)
CUDA_DRIVER_VERSION = "13.0.0"

T = TypeVar("T")
Obj = dict[str, Any]


@dataclass(frozen=True)
class GpuProduct:
    name: str  # NVML GetName(), spaces kept: the devices' productName
    architecture: str
    memory_mib: int  # NVML's total, what the driver publishes and GFD labels in MiB
    compute_capability: str  # semver, e.g. "8.0.0"
    multiprocessors: int
    brand: str = "Nvidia"
    # The inventory's --product whose devices these are (tests/driver/inventory/mocknvml.go);
    # a product of a test's own name (dataclasses.replace of one below) publishes the devices
    # of its inventory product under that name.
    inventory: str = "A100-SXM4-40GB"


# What the driver publishes for each (tests/unit/test_driver_devices.py checks these against
# the golden files). The H100's memory is go-nvml's mock's (80 GiB), not a real H100 80GB
# HBM3's 81559 MiB: no real H100 has been dumped yet (docs/development/testing.md).
A100_SXM4_40GB = GpuProduct("NVIDIA A100-SXM4-40GB", "Ampere", 40960, "8.0.0", 108)
A100_SXM4_80GB = GpuProduct(
    "NVIDIA A100-SXM4-80GB", "Ampere", 81920, "8.0.0", 108, inventory="A100-SXM4-80GB"
)
H100_80GB_HBM3 = GpuProduct(
    "NVIDIA H100 80GB HBM3", "Hopper", 81920, "9.0.0", 132, inventory="H100-SXM5-80GB"
)
H200_141GB = GpuProduct("NVIDIA H200", "Hopper", 143771, "9.0.0", 132, inventory="H200-SXM5-141GB")

DRIVER_DIR = Path(__file__).resolve().parents[2] / "tests" / "driver"
GOLDEN_DIR = DRIVER_DIR / "golden"


# -- DeviceClasses -----------------------------------------------------------------------------


def driver_device_classes() -> list[Obj]:
    """The DeviceClasses NVIDIA's driver chart installs (tests/driver/golden/deviceclasses.yaml):
    gpu.nvidia.com with `extendedResourceName: nvidia.com/gpu`, mig.nvidia.com and
    vfio.gpu.nvidia.com. An API server without DRAExtendedResource (1.34, 1.35) drops the field."""
    text = (GOLDEN_DIR / "deviceclasses.yaml").read_text()
    return [doc for doc in yaml.safe_load_all(text) if doc]


def device_class(name: str, device_type: str | None = None) -> Obj:
    """The driver chart's class `name`; with `device_type`, a class of that name selecting
    that type as the chart's do, with no extendedResourceName."""
    if device_type is None:
        return next(c for c in driver_device_classes() if c["metadata"]["name"] == name)
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
    """The driver chart's DeviceClasses; fine if they already exist."""
    for body in driver_device_classes():
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


@functools.cache
def driver_layouts() -> dict[str, list[str]]:
    """Golden file name -> the inventory's arguments (tests/driver/layouts.json)."""
    return cast(dict[str, list[str]], json.loads((DRIVER_DIR / "layouts.json").read_text()))


@functools.cache
def _golden_text(layout: str) -> str:
    return (GOLDEN_DIR / f"{layout}.json").read_text()


def golden(layout: str) -> Any:
    """The driver's output for a layout of tests/driver/layouts.json (a fresh copy)."""
    return json.loads(_golden_text(layout))


def _static_layout(
    args: Sequence[str],
) -> tuple[str, int, dict[int, list[str]], str | None] | None:
    """(product, GPUs, MIG devices by GPU, --consumable-shares or None) of a static layout's
    arguments; None for others."""
    product, gpus, mig, consumable = "", 0, {}, None
    for arg in args:
        flag, _, value = arg.partition("=")
        if flag == "--product":
            product = value
        elif flag == "--gpus":
            gpus = int(value)
        elif flag == "--mig":
            index, _, profiles = value.partition("=")
            mig[int(index)] = [p for p in profiles.split(",") if p]
        elif flag == "--consumable-shares":
            consumable = value
        else:
            return None
    return product, gpus, mig, consumable


def gpu_index(device: Obj) -> int:
    """The minor of the GPU a driver's device is or is on: gpu-<minor>[-mig-...]."""
    return int(device["name"].split("-")[1])


def driver_layout(
    product: GpuProduct,
    gpus: int,
    mig: Mapping[int, Sequence[str]],
    consumable: str | None = None,
) -> str:
    """The golden layout whose first `gpus` GPUs are these: the product's, with the same MIG
    devices on those GPUs (the driver enumerates each GPU on its own) and the same
    --consumable-shares; the one with the fewest MIG GPUs left over, then the fewest GPUs."""
    want = {index: list(profiles) for index, profiles in mig.items()}
    found = []
    for name, args in driver_layouts().items():
        layout = _static_layout(args)
        if layout is None or layout[0] != product.inventory or layout[1] < gpus:
            continue
        if layout[3] != consumable:
            continue
        if {i: p for i, p in layout[2].items() if i < gpus} == want:
            found.append((len(layout[2]) - len(want), layout[1], name))
    if not found:
        flags = [f"--product={product.inventory}", f"--gpus={gpus}"] + [
            f"--mig={index}={','.join(profiles)}" for index, profiles in sorted(want.items())
        ]
        if consumable is not None:
            flags.append(f"--consumable-shares={consumable}")
        raise ValueError(
            f"no golden devices of the driver for {flags}: add them to tests/driver/layouts.json"
            " and run GPU2DRA_REGENERATE_GOLDEN=1 .venv/bin/python -m pytest"
            " tests/e2e/test_driver_inventory.py"
        )
    return min(found)[2]


def gpu_devices(
    node_name: str,
    product: GpuProduct = A100_SXM4_40GB,
    gpus: int = 1,
    mig: Mapping[int, Sequence[str]] | None = None,
    memory: bool = True,
    consumable: str | None = None,
) -> list[Obj]:
    """The devices NVIDIA's driver publishes on a node with `gpus` GPUs of the product:
    gpu-0 .. gpu-<gpus-1>, except that a GPU listed in mig (minor -> MIG profiles such as
    ["3g.20gb", "1g.5gb"], placed in order, each at the first free placement NVML lists)
    publishes only those MIG devices; from the golden file of that layout (driver_layout),
    with UUIDs of the node's own. `memory=False`: the whole GPUs have no memory capacity (the
    driver leaves it out when NVML does not report it). `consumable`: the plugin's
    --consumable-shares (memory, unlimited or a number; ConsumableShares gate on): each
    device allows multiple allocations, its memory is consumable capacity and a number N adds
    `shares` N (cmd/gpu-kubelet-plugin/consumable_shares.go)."""
    mig = mig or {}
    unknown = sorted(set(mig) - set(range(gpus)))
    if unknown:
        raise ValueError(f"mig layout names GPUs {unknown}, node has {gpus}")
    devices: list[Obj] = []
    for device in golden(driver_layout(product, gpus, mig, consumable)):
        minor = gpu_index(device)
        if minor >= gpus:
            continue
        attributes = device["attributes"]
        gpu_uuid = f"GPU-{uuid.uuid5(uuid.NAMESPACE_URL, f'{node_name}/gpu-{minor}')}"
        if "parentUUID" in attributes:
            attributes["parentUUID"] = {"string": gpu_uuid}
            mig_uuid = uuid.uuid5(uuid.NAMESPACE_URL, f"{node_name}/{device['name']}")
            attributes["uuid"] = {"string": f"MIG-{mig_uuid}"}
        else:
            attributes["uuid"] = {"string": gpu_uuid}
        attributes["productName"] = {"string": product.name}
        if not memory and attributes["type"]["string"] == "gpu":
            device.get("capacity", {}).pop("memory", None)
        devices.append(device)
    return devices


def quantity_bytes(text: str) -> int:
    """A capacity's value ("40Gi", "4864Mi", "42949672960") in bytes."""
    value = parse_quantity(text).value
    if value.denominator != 1:
        raise ValueError(f"not a whole number of bytes: {text!r}")
    return int(value)


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


def dynamic_mig_slices(node_name: str, product: GpuProduct = H200_141GB) -> list[Obj]:
    """The ResourceSlices NVIDIA's driver publishes for a node of the product under its
    DynamicMIG gate (with split slices, as for Kubernetes 1.35+): one holding each GPU's
    shared counters, one holding every device, each MIG placement a device that consumes
    them and has no UUID of its own (the MIG device is made when a claim is prepared). From
    the product's golden DynamicMIG layout, with the node's name and UUIDs."""
    found = sorted(
        (len(args), name)
        for name, args in driver_layouts().items()
        if f"--product={product.inventory}" in args
        and "--dynamic-mig" in args
        and "--slices" in args
        and not any(a.startswith("--mig") for a in args)
    )
    if not found:
        raise ValueError(f"no golden DynamicMIG slices of {product.inventory}")
    bodies = []
    for spec in golden(found[0][1]):
        spec["nodeName"] = node_name
        spec["pool"] = {**spec["pool"], "name": node_name, "generation": 1}
        for device in spec.get("devices") or []:
            attributes = device["attributes"]
            gpu_uuid = (
                f"GPU-{uuid.uuid5(uuid.NAMESPACE_URL, f'{node_name}/gpu-{gpu_index(device)}')}"
            )
            attributes["parentUUID" if "parentUUID" in attributes else "uuid"] = {
                "string": gpu_uuid
            }
            attributes["productName"] = {"string": product.name}
        bodies.append(
            {
                "apiVersion": f"{RESOURCE_GROUP}/{RESOURCE_VERSION}",
                "kind": "ResourceSlice",
                "metadata": {"generateName": f"{node_name}-{GPU_DRIVER}-"},
                "spec": spec,
            }
        )
    return bodies


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
    devices = gpu_devices(name, product, gpus, mig, consumable=consumable)
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

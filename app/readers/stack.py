"""Components of a GPU cluster known to find GPU pods by their `nvidia.com/gpu` requests, told
by their workloads' images: what each stops seeing once pods are translated, and what to do.
Pure: `gpu2dra impact` and `doctor`'s monitoring check read Deployments and DaemonSets and
ask `components` which of them these are."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from app.core.kube import Obj

DCGM_EXPORTER = "dcgm-exporter"
DRA_ENV = "KUBERNETES_ENABLE_DRA"


@dataclass(frozen=True, slots=True, kw_only=True)
class Known:
    key: str
    name: str
    images: tuple[str, ...]  # a container image holding one of these is the component
    change: str
    action: str


KNOWN: tuple[Known, ...] = (
    Known(
        key=DCGM_EXPORTER,
        name="NVIDIA dcgm-exporter",
        images=("dcgm-exporter",),
        change=(
            "labels each GPU metric with the pod holding the GPU from the kubelet's PodResources "
            "API; for DRA devices only with KUBERNETES_ENABLE_DRA=true and read access to "
            "ResourceSlices (and never with the pod's UID): dashboards and alerts on "
            "exported_pod go quiet for translated pods"
        ),
        action=(
            "set KUBERNETES_ENABLE_DRA=true in its environment (GPU Operator: "
            "dcgmExporter.env) and let its ServiceAccount list and watch resourceslices, or "
            "join gpu2dra_pod_gpu_info on(UUID) (chart value exporter.enabled; "
            "docs/operations/your-stack.md)"
        ),
    ),
    Known(
        key="driver-manager",
        name="NVIDIA GPU Operator driver upgrades (k8s-driver-manager, upgrade controller)",
        images=("k8s-driver-manager", "gpu-operator"),
        change=(
            "before a driver upgrade it deletes the pods of the node that ask for nvidia.com/gpu "
            "or nvidia.com/mig-* (gpuPodSpecFilter): pods holding GPUs through claims are not "
            "deleted, and the driver is unloaded under them"
        ),
        action=(
            "drain the node whole during upgrades (driver.upgradePolicy.drain.enable=true), or "
            "drain GPU nodes yourself before changing the driver"
        ),
    ),
    Known(
        key="hami",
        name="HAMi",
        images=("projecthami/", "/hami:", "hami-scheduler", "hami-device-plugin"),
        change=(
            "its webhook and scheduler act on pods that ask for nvidia.com/gpu (with "
            "nvidia.com/gpumem, nvidia.com/gpucores): translated pods leave HAMi's scheduling "
            "and vGPU sharing"
        ),
        action=(
            "keep namespaces that rely on HAMi's sharing disabled; gpu2dra leaves pods whose "
            "HAMi resources or annotations it cannot translate (docs/concepts/translation.md)"
        ),
    ),
    Known(
        key="volcano",
        name="Volcano",
        images=("volcanosh/",),
        change=(
            "its Queues' capability and its scheduler count nvidia.com/gpu: translated pods of "
            "the default scheduler no longer count against a Queue's GPUs"
        ),
        action=(
            "pods scheduled by Volcano stay untranslated (policy draSchedulers); for the others, "
            "limit GPUs on the DRA side (gpu2dra quota)"
        ),
    ),
    Known(
        key="cost",
        name="Kubecost / OpenCost",
        images=("kubecost", "opencost"),
        change=(
            "allocates GPU cost by containers' nvidia.com/gpu requests: translated pods cost no GPU"
        ),
        action=(
            "allocate GPU cost from gpu2dra_pod_gpu_info (count by (namespace, pod)), or from "
            "dcgm-exporter with its DRA mapping on"
        ),
    ),
    Known(
        key="nvsentinel",
        name="NVIDIA NVSentinel",
        images=("nvsentinel",),
        change=(
            "finds the pods on a faulty GPU by their nvidia.com/gpu requests to drain and "
            "remediate (NVSentinel#1867): translated pods stay on a faulty GPU"
        ),
        action=(
            "check that the installed version recognises pods with DRA claims; until then drain "
            "faulty GPU nodes whole"
        ),
    ),
    Known(
        key="kube-state-metrics",
        name="kube-state-metrics",
        images=("kube-state-metrics",),
        change=(
            'kube_pod_container_resource_requests{resource="nvidia_com_gpu"} no longer counts '
            "translated pods: GPU request dashboards and recording rules drop them"
        ),
        action=(
            "count the GPUs pods hold from gpu2dra_pod_gpu_info (count by (namespace) "
            "(gpu2dra_pod_gpu_info))"
        ),
    ),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Found:
    """A known component, seen running as a Deployment or DaemonSet."""

    known: Known
    kind: str
    namespace: str
    name: str
    env: dict[str, str]  # its containers' literal environment (the matching containers')


def _containers(obj: Obj) -> list[Obj]:
    spec = ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}
    found = [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
    return [c for c in found if isinstance(c, dict)]


def components(kind: str, objects: Iterable[Obj]) -> Iterator[Found]:
    """The known components among `objects` (Deployments or DaemonSets)."""
    for obj in objects:
        meta = obj.get("metadata") or {}
        for known in KNOWN:
            matching = [
                c
                for c in _containers(obj)
                if any(i in str(c.get("image", "")) for i in known.images)
            ]
            if not matching:
                continue
            env = {
                str(e["name"]): str(e.get("value", ""))
                for c in matching
                for e in c.get("env") or []
                if isinstance(e, dict) and "name" in e
            }
            yield Found(
                known=known,
                kind=kind,
                namespace=str(meta.get("namespace", "")),
                name=str(meta.get("name", "")),
                env=env,
            )
            break


def maps_dra(found: Found) -> bool:
    """dcgm-exporter told to map DRA devices to pods."""
    return found.env.get(DRA_ENV, "").lower() == "true"

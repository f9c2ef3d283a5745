"""What the controllers of custom resources read from them, and so what offline translation may
change in them (docs/concepts/workloads.md names the source each rule rests on).

At admission gpu2dra sees pods, after their controller read its custom resource; offline it
rewrites the custom resource itself. Where a controller reads the GPU count from the resource,
the translation either keeps what it reads (KubeRay's `rayStartParams.num-gpus`) or leaves the
resource as it is, with a note that its pods are translated at admission.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from app.core.kube import Obj, Path
from app.core.outcomes import Code, Finding
from app.core.resources import parse_count

# API group -> why its documents are left as they are.
_LEFT = {
    "serving.knative.dev": (
        "Knative Serving accepts no resourceClaims or resources.claims in its pod specs (its "
        "field masks drop them)"
    ),
    "serving.kserve.io": (
        "KServe builds Knative Revisions (Knative mode) or Deployments from it, merging its "
        "model and runtime containers, and the mode may come from the cluster's configuration"
    ),
    "trainer.kubeflow.org": (
        "Kubeflow Trainer derives processes per node (and the torchtune recipe) from the GPU "
        "count of the trainer's `node` container or TrainJob.spec.trainer.resourcesPerNode"
    ),
    "mlops.seldon.io": (
        "Seldon Core v2's pod spec has no resourceClaims (the API server prunes them), so the "
        "containers' claims would point at nothing and its StatefulSet be refused"
    ),
    "grove.io": (
        "Grove adds the multi-node NVLink ComputeDomain only to pod specs that ask for "
        "nvidia.com/gpu (mnnvl.HasGPUInPodSpec): translated, the NVLink domain would be lost"
    ),
    "workload.codeflare.dev": (
        "AppWrapper adds Autopilot's GPU-health anti-affinity only to pod specs that ask for "
        "nvidia.com/gpu (its resourceTaints): translated, that protection would be dropped"
    ),
}

# Pod templates a controller reads a GPU count from, left where the rest is translated.
_KEPT: dict[tuple[str, str], tuple[Path, str]] = {
    ("kubeflow.org", "MPIJob"): (
        ("spec", "mpiReplicaSpecs", "Launcher"),
        "the MPI operator reads the launcher's GPU limit (isGPULauncher) to put it in the "
        "hostfile and to hide the GPUs from a launcher that asks for none",
    ),
}

# KubeRay: where each kind holds its RayClusterSpec.
_RAY = {"RayCluster": ("spec",), "RayJob": ("spec", "rayClusterSpec")}
_RAY["RayService"] = ("spec", "rayClusterConfig")

# Kinds whose controllers copy their pod templates into pods as written, read no GPU count
# from them, and validate them as Kubernetes pod specs: translated without a note.
_KNOWN = {
    "": {"Pod", "PodTemplate", "ReplicationController", "List"},
    "apps": {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet"},
    "batch": {"Job", "CronJob"},
    "jobset.x-k8s.io": {"JobSet"},
    "leaderworkerset.x-k8s.io": {"LeaderWorkerSet"},
    "kubeflow.org": {"PyTorchJob", "TFJob", "XGBoostJob", "PaddleJob", "JAXJob", "MPIJob"},
    "batch.volcano.sh": {"Job"},
    "ray.io": set(_RAY),
    "argoproj.io": {"Rollout"},
}

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


def group_of(doc: Obj) -> str:
    api = doc.get("apiVersion")
    return api.rpartition("/")[0] if isinstance(api, str) else ""


def left_alone(doc: Obj) -> str | None:
    """Why the whole document is left as it is, or None."""
    return _LEFT.get(group_of(doc))


def kept(doc: Obj) -> tuple[Path, str] | None:
    """A pod template left as it is in a document otherwise translated, and why."""
    kind = doc.get("kind")
    return _KEPT.get((group_of(doc), kind)) if isinstance(kind, str) else None


def known(doc: Obj) -> bool:
    """Whether a rule knows the kind (by its kind alone where the document has no apiVersion)."""
    kind = doc.get("kind")
    if not isinstance(kind, str):
        return False  # no kind at all: no rule can know it
    if "apiVersion" not in doc:
        return any(kind in kinds for kinds in _KNOWN.values())
    return kind in _KNOWN.get(group_of(doc), ())


def group_kind(doc: Obj) -> str:
    """`group/Kind` as the policy's translateKinds names it (`Kind` in the core group)."""
    kind, group = doc.get("kind"), group_of(doc)
    shown = kind if isinstance(kind, str) else "object"
    return f"{group}/{shown}" if group else shown


def translated_by_choice(doc: Obj, kinds: frozenset[str]) -> bool:
    """Whether the policy's translateKinds names the kind of `doc`, which no rule knows."""
    return isinstance(doc.get("kind"), str) and group_kind(doc) in kinds


def at(node: Any, path: Path) -> Any:
    for step in path:
        if isinstance(step, str) and isinstance(node, dict):
            node = node.get(step)
        elif isinstance(step, int) and isinstance(node, list) and step < len(node):
            node = node[step]
        else:
            return None
    return node


def put(node: Any, path: Path, value: Any) -> Any:
    """`node` with `value` at `path` (which exists, but perhaps for its last key), copied
    along it."""
    if not path:
        return value
    step, rest = path[0], path[1:]
    if isinstance(node, dict):
        return {**node, step: put(node.get(step), rest, value)}
    copy = list(node)
    assert isinstance(step, int)
    copy[step] = put(node[step], rest, value)
    return copy


def rewrite_except(doc: Obj, path: Path, rewrite: Callable[[Obj], Obj]) -> Obj:
    """`rewrite(doc)` with what is at `path` kept as it was."""
    held = at(doc, path)
    if held is None:
        return rewrite(doc)
    hole = put(doc, path, None)
    out = rewrite(hole)
    return doc if out is hole else put(out, path, held)


# KubeRay counts as GPUs the resources named so (ray-operator/controllers/ray/utils/resources.go).
def _ray_gpu(name: str) -> bool:
    if name.endswith("gpu"):
        return True
    head, _, tail = name.partition("nvidia.com/mig-")
    return not head and tail.endswith("gb") and "g." in tail


def _groups(spec: Any) -> Iterator[tuple[str, Path]]:
    if isinstance(spec, dict):
        if isinstance(spec.get("headGroupSpec"), dict):
            yield "headGroupSpec", ("headGroupSpec",)
        workers = spec.get("workerGroupSpecs")
        for i, group in enumerate(workers if isinstance(workers, list) else []):
            if isinstance(group, dict):
                name = group.get("groupName")
                label = f"workerGroupSpecs[{i}]" + (f" ({name})" if isinstance(name, str) else "")
                yield label, ("workerGroupSpecs", i)


def _limits(group: Any) -> dict[str, Any]:
    limits = at(group, ("template", "spec", "containers", 0, "resources", "limits"))
    return limits if isinstance(limits, dict) else {}


def keep_ray_gpus(doc: Obj, translated: Obj, note: Callable[[Finding], None]) -> Obj:
    """KubeRay starts Ray with `--num-gpus` from the Ray container's (the first's) GPU limit
    unless `rayStartParams.num-gpus` is set, and its autoscaler reads the same: where the
    translation removed that limit, the count goes to `rayStartParams.num-gpus`."""
    kind = doc.get("kind")
    where = _RAY.get(kind) if isinstance(kind, str) and group_of(doc) == "ray.io" else None
    if where is None or translated is doc:
        return translated
    out = translated
    for label, path in _groups(at(doc, where)):
        full = (*where, *path)
        before, after = at(doc, full), at(out, full)
        if before is after:
            continue
        gone = [k for k in sorted(_limits(before)) if _ray_gpu(k) and k not in _limits(after)]
        counts = [parse_count(_limits(before)[k]) for k in gone]
        count = next((c for c in counts if c), None)
        if count is None:
            continue
        params = after.get("rayStartParams")
        params = params if isinstance(params, dict) else {}
        if "num-gpus" in params:
            if str(params["num-gpus"]) != str(count):
                note(
                    Finding(Code.RAY_GPUS_DIFFER, group=label, set=params["num-gpus"], count=count)
                )
            continue
        out = put(out, (*full, "rayStartParams"), {**params, "num-gpus": str(count)})
        note(Finding(Code.RAY_GPUS_SET, group=label, count=count))
    return out


def queue_notes(doc: Obj, translated: Obj, specs: list[Obj], classes: list[str]) -> list[Finding]:
    """What queues that count GPUs need once the pods ask for claims instead."""
    named = ", ".join(classes) or "the DeviceClasses of the claims"
    notes = []
    if _labelled(translated, QUEUE_LABEL, 0):
        notes.append(Finding(Code.KUEUE, classes=named))
    volcano = group_of(doc) == "batch.volcano.sh" or any(
        s.get("schedulerName") == "volcano" for s in specs
    )
    if volcano:
        keys = ", ".join(f"deviceclass/{c}" for c in classes) or "deviceclass/<class>"
        notes.append(Finding(Code.VOLCANO, keys=keys))
    if any(_labelled(translated, label, 0) for label in KAI_QUEUE_LABELS):
        notes.append(Finding(Code.KAI_QUEUE, classes=named))
    if how := yunikorn_queue(doc, specs):
        notes.append(Finding(Code.YUNIKORN_QUEUE, how=how))
    return notes


# KAI Scheduler's queue label; runai/queue before it was renamed (its quickstart still uses it).
KAI_QUEUE_LABELS = ("kai.scheduler/queue", "runai/queue")
YUNIKORN_QUEUE_LABEL = "yunikorn.apache.org/queue"


def yunikorn_queue(doc: Obj, specs: list[Obj]) -> str | None:
    """How a document names a YuniKorn queue, or None: its label or annotation
    yunikorn.apache.org/queue, a `queue` label on pods YuniKorn schedules, or a Spark
    application's batchSchedulerOptions.queue with batchScheduler yunikorn."""
    if _labelled(doc, YUNIKORN_QUEUE_LABEL, 0):
        return YUNIKORN_QUEUE_LABEL
    if any(s.get("schedulerName") == "yunikorn" for s in specs) and _labelled(doc, "queue", 0):
        return "label queue, schedulerName yunikorn"
    spec = doc.get("spec")
    if group_of(doc) == "sparkoperator.k8s.io" and isinstance(spec, dict):
        app: Any = spec.get("template") if doc.get("kind") == "ScheduledSparkApplication" else spec
        yunikorn = isinstance(app, dict) and app.get("batchScheduler") == "yunikorn"
        options = app.get("batchSchedulerOptions") if yunikorn else None
        if isinstance(options, dict) and options.get("queue"):
            return "batchSchedulerOptions.queue"
    return None


def _labelled(node: Any, key: str, depth: int) -> bool:
    """Whether `node` or an object in it (a pod template) has label or annotation `key`."""
    if depth > 32 or not isinstance(node, dict | list):
        return False
    if isinstance(node, list):
        return any(_labelled(v, key, depth + 1) for v in node)
    meta = node.get("metadata")
    if isinstance(meta, dict):
        for field in ("labels", "annotations"):
            if isinstance(meta.get(field), dict) and key in meta[field]:
                return True
    return any(_labelled(v, key, depth + 1) for k, v in node.items() if k != "metadata")


def embedded_manifests(node: Any, path: str = "", depth: int = 0) -> Iterator[tuple[str, str]]:
    """Manifests held as strings (Argo's resource templates: `resource.manifest`): where each
    is, and its text. gpu2dra does not rewrite inside strings."""
    if depth > 64:
        return
    if isinstance(node, list):
        for i, item in enumerate(node):
            yield from embedded_manifests(item, f"{path}[{i}]", depth + 1)
    elif isinstance(node, dict):
        held = node.get("resource")
        if isinstance(held, dict) and isinstance(held.get("manifest"), str):
            name = node.get("name")
            here = f"template {name!r}" if isinstance(name, str) else f"{path}.resource"
            yield here, held["manifest"]
        for key, value in node.items():
            if isinstance(value, dict | list):
                yield from embedded_manifests(value, f"{path}.{key}" if path else key, depth + 1)

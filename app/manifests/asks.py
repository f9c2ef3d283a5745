"""GPU asks in a custom resource's own format, outside any Kubernetes resource list: what a
controller turns into `nvidia.com/gpu` limits when it builds the pods. gpu2dra cannot give
them claims offline; it names each (document, holder, path), and the pods are translated at
admission.

- NVIDIA Dynamo `DynamoGraphDeployment`: `spec.services.<name>.resources.limits.gpu: "4"`
  (and `requests`); `DynamoComponentDeployment`: `spec.resources.limits.gpu`.
- The Spark operator's `SparkApplication`: `spec.driver.gpu` and `spec.executor.gpu`, each
  `{name: nvidia.com/gpu, quantity: 1}`; `ScheduledSparkApplication` under `spec.template`.
- Kubeflow Pipelines: `accelerator: {type|resourceType: nvidia.com/gpu, count|resourceCount}`
  in its IR, and the same (or a container's resources) inside a JSON string parameter of the
  Argo Workflow it compiles to (`pod-spec-patch`, `component`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import orjson

from app.core.kube import Obj
from app.manifests.podspecs import step

MAX_STRING = 1 << 20  # a string parameter longer than this is not read
_DEPTH = 64


class Ask(NamedTuple):
    place: str  # where, holders named: spec.services.decode.resources.limits.gpu
    what: str  # what is asked for, as written: `gpu: "4"`
    owner: str  # whose format: Dynamo's own format


def crd_asks(doc: Obj, mapped: Callable[[str], bool]) -> list[Ask]:
    """The GPU asks in `doc` written in its controller's own format. `mapped` says whether a
    resource name is one the policy translates."""
    group = _group(doc)
    kind = doc.get("kind")
    found: list[Ask] = []
    spec = doc.get("spec")
    if group == "nvidia.com" and isinstance(spec, dict):
        if kind == "DynamoGraphDeployment" and isinstance(spec.get("services"), dict):
            for name, service in spec["services"].items():
                found.extend(_dynamo(service, step("spec.services", name)))
        elif kind == "DynamoComponentDeployment":
            found.extend(_dynamo(spec, "spec"))
    if group == "sparkoperator.k8s.io" and isinstance(spec, dict):
        app: Any = spec
        where = "spec"
        if kind == "ScheduledSparkApplication":
            app, where = spec.get("template"), "spec.template"
        for role in ("driver", "executor"):
            part = app.get(role) if isinstance(app, dict) else None
            gpu = part.get("gpu") if isinstance(part, dict) else None
            if isinstance(gpu, dict) and isinstance(gpu.get("name"), str) and mapped(gpu["name"]):
                what = f"{gpu['name']}: {gpu.get('quantity', 1)}"
                found.append(Ask(f"{where}.{role}.gpu", what, "the Spark operator's own format"))
    found.extend(_accelerators(doc, "", mapped, 0, in_string=None))
    return found


def _group(doc: Obj) -> str:
    api = doc.get("apiVersion")
    return api.rpartition("/")[0] if isinstance(api, str) else ""


def _dynamo(service: Any, where: str) -> Iterator[Ask]:
    resources = service.get("resources") if isinstance(service, dict) else None
    for field in ("limits", "requests"):
        held = resources.get(field) if isinstance(resources, dict) else None
        if isinstance(held, dict) and held.get("gpu") not in (None, "", 0, "0"):
            yield Ask(
                f"{where}.resources.{field}.gpu", f"gpu: {held['gpu']!r}", "Dynamo's own format"
            )
            return  # one line a service: its limits, or its requests where no limit is set


def _accelerators(
    node: Any, path: str, mapped: Callable[[str], bool], depth: int, *, in_string: str | None
) -> Iterator[Ask]:
    """Kubeflow Pipelines' `accelerator` maps, and GPU asks inside JSON string values."""
    if depth > _DEPTH:
        return
    if isinstance(node, list):
        for i, item in enumerate(node):
            here = step(path, i, item)
            yield from _accelerators(item, here, mapped, depth + 1, in_string=in_string)
        return
    if isinstance(node, str):
        if in_string is None:
            yield from _in_string(node, path, mapped)
        return
    if not isinstance(node, dict):
        return
    accelerator = node.get("accelerator")
    if isinstance(accelerator, dict):
        kind = accelerator.get("type", accelerator.get("resourceType"))
        if isinstance(kind, str) and mapped(kind):
            count = accelerator.get("count", accelerator.get("resourceCount", 1))
            place = step(path, "accelerator")
            yield Ask(
                _within(place, in_string), f"{kind}: {count}", "Kubeflow Pipelines' own format"
            )
    if in_string is not None:
        resources = node.get("resources")
        limits = resources.get("limits") if isinstance(resources, dict) else None
        if isinstance(limits, dict):
            asked = sorted(k for k in limits if isinstance(k, str) and mapped(k))
            if asked:
                place = step(path, "resources")
                what = ", ".join(f"{k}: {limits[k]}" for k in asked)
                yield Ask(_within(place, in_string), what, "a pod spec inside a string")
    for key, value in node.items():
        if key == "accelerator" or not isinstance(value, dict | list | str):
            continue
        yield from _accelerators(value, step(path, key), mapped, depth + 1, in_string=in_string)


def _in_string(text: str, path: str, mapped: Callable[[str], bool]) -> Iterator[Ask]:
    if len(text) > MAX_STRING or not text.lstrip().startswith(("{", "[")):
        return
    if "accelerator" not in text and "resources" not in text:
        return
    try:
        inner = orjson.loads(text)
    except orjson.JSONDecodeError:
        return
    yield from _accelerators(inner, "", mapped, 0, in_string=path)


def _within(place: str, in_string: str | None) -> str:
    return place if in_string is None else f"{in_string} (a JSON string) at {place}"

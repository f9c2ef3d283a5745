"""Pod specs found in any document by shape, not by kind: Deployments, Jobs, CronJobs and
custom resources that embed pod templates (Kubeflow, Ray, JobSet, LeaderWorkerSet...) alike."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from app.core.kube import Obj
from app.core.scope import opted_out
from app.manifests import yamlio

MAX_DEPTH = yamlio.MAX_DEPTH


class TooDeep(ValueError):
    """A document nested deeper than MAX_DEPTH."""


def is_pod_spec(node: Obj) -> bool:
    """A pod spec, found by shape: a non-empty list of named containers."""
    containers = node.get("containers")
    return (
        isinstance(containers, list)
        and bool(containers)
        and all(isinstance(c, dict) and "name" in c for c in containers)
    )


# A pod spec, and the metadata of the pod or pod template that holds it (None: none).
Rewrite = Callable[[Obj, Any], Obj]


def rewrite_pod_specs(node: Any, rewrite: Rewrite, opt_out: bool = True) -> Any:
    """`node` with `rewrite` applied to each pod spec in it and its pod's metadata, copied
    only along the paths that change. With `opt_out`, a pod template annotated gpu2dra.io/skip
    is passed over."""
    return _walk(node, rewrite, every=not opt_out, skip=False, depth=0, metadata=None)


# Positional, unlike the rest: called once per node of every document, where keyword
# arguments would cost half as much again per call.
def _walk(node: Any, rewrite: Rewrite, every: bool, skip: bool, depth: int, metadata: Any) -> Any:
    if depth > MAX_DEPTH:
        raise TooDeep
    if isinstance(node, list):
        items = [_walk(v, rewrite, every, skip, depth + 1, None) for v in node]
        return node if all(a is b for a, b in zip(items, node, strict=True)) else items
    if not isinstance(node, dict):
        return node
    if is_pod_spec(node):
        return node if skip else rewrite(node, metadata)
    meta = node.get("metadata")
    template = isinstance(meta, dict) and isinstance(node.get("spec"), dict)
    # A pod template's own metadata can opt out (gpu2dra.io/skip) like a pod's.
    skip = skip or (not every and template and opted_out(meta))
    own = meta if template else None
    changed = {}
    for key, value in node.items():
        if key in _NOT_POD_SPECS:
            continue  # containers of one pod that is no pod spec gpu2dra can give claims to
        held = own if key == "spec" else None
        new = _walk(value, rewrite, every, skip, depth + 1, held)
        if new is not value:
            changed[key] = new
    return {**node, **changed} if changed else node


# Argo Workflows' containerSet holds named containers like a pod spec, but its template is
# no pod spec: Argo builds the pod, and `resourceClaims` there would be an unknown field.
_NOT_POD_SPECS = frozenset({"containerSet"})
# Keys under which workflow engines hold one container, or steps, of a pod they build:
# Argo's container/script/containerSet templates, Tekton's steps, sidecars and stepTemplate.
_ONE = ("container", "script", "stepTemplate")
_MANY = ("steps", "sidecars")
_HOLDERS = frozenset({*_ONE, *_MANY, "containerSet"})


# Keys under which custom resources hold the resources of containers they build, outside any
# pod spec: KServe's predictor model and runtimes, NIMService, Slinky's NodeSets, Trainer's
# TrainJob (resourcesPerNode) and Tekton's computeResources.
_RESOURCES = ("resources", "resourcesPerNode", "computeResources")


def singular_containers(
    node: Any, asks: Callable[[Obj], list[str]], depth: int = 0, path: str = ""
) -> list[tuple[str, list[str], bool]]:
    """Containers outside any pod spec, found by shape, that ask for resources (`asks` gives
    them): (where, resources, held) for each. `where` names the template that holds them
    (`held`), or the path of resources asked for outside any container. The pods these
    become are built by a controller; gpu2dra sees them at admission."""
    found: list[tuple[str, list[str], bool]] = []
    if depth > MAX_DEPTH:
        raise TooDeep
    if isinstance(node, list):
        for i, item in enumerate(node):
            found.extend(singular_containers(item, asks, depth + 1, step(path, i, item)))
        return found
    if not isinstance(node, dict) or is_pod_spec(node):
        return found
    if not _HOLDERS.isdisjoint(node):  # most nodes hold none: no work for them
        found.extend((where, res, True) for where, res in _held(node, asks))
    for key, value in node.items():
        if key in _HOLDERS or not isinstance(value, dict | list):
            continue
        here = step(path, key)
        if key in _RESOURCES and isinstance(value, dict) and (res := asks({"resources": value})):
            found.append((here, res, False))
        else:
            found.extend(singular_containers(value, asks, depth + 1, here))
    return found


def _held(node: Obj, asks: Callable[[Obj], list[str]]) -> list[tuple[str, list[str]]]:
    name = node.get("name")
    here = f"template {name!r}" if isinstance(name, str) else "a template"
    held: list[tuple[str, Any]] = [(k, node.get(k)) for k in _ONE]
    box = node.get("containerSet")
    if isinstance(box, dict) and isinstance(box.get("containers"), list):
        held.extend(("containerSet", c) for c in box["containers"])
    for key in _MANY:
        if isinstance(node.get(key), list):
            held.extend((key, c) for c in node[key])
    found = []
    for key, container in held:
        if isinstance(container, dict) and (resources := asks(_resources_of(container))):
            label = container.get("name")
            what = f"{key} {label!r}" if isinstance(label, str) and key != "container" else key
            found.append((f"{here} ({what})", resources))
    return found


def _resources_of(container: Obj) -> Obj:
    # Tekton v1 names a step's resources computeResources.
    if "resources" not in container and isinstance(container.get("computeResources"), dict):
        return {**container, "resources": container["computeResources"]}
    return container


def pod_specs(node: Any) -> list[Obj]:
    """Every pod spec in `node`, opted out or not, in document order."""
    found: list[Obj] = []

    def collect(spec: Obj, metadata: Any) -> Obj:
        found.append(spec)
        return spec

    rewrite_pod_specs(node, collect, opt_out=False)
    return found


def pod_spec_places(node: Any, depth: int = 0, path: str = "") -> list[tuple[str, Obj]]:
    """Every pod spec in `node` with where it is, in document order: the path of the pod
    template that holds it (`spec.pytorchReplicaSpecs.Worker`, a list item by its name:
    `spec.components[name=decode].podTemplate`), so that a warning can name it."""
    if depth > MAX_DEPTH:
        raise TooDeep
    found: list[tuple[str, Obj]] = []
    if isinstance(node, list):
        for i, item in enumerate(node):
            found.extend(pod_spec_places(item, depth + 1, step(path, i, item)))
    elif isinstance(node, dict):
        if is_pod_spec(node):
            return [(_template(path), node)]
        for key, value in node.items():
            if key not in _NOT_POD_SPECS and isinstance(value, dict | list):
                found.extend(pod_spec_places(value, depth + 1, step(path, key)))
    return found


_PRINTABLE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}")
_NAMES = ("name", "groupName")  # what a list item that holds something is called by


def step(path: str, key: Any, item: Any = None) -> str:
    """`path` one step further: a map key, or a list index, given as the item's name where
    it has one (`spec.services[name=decode]`), so that a warning names the holder."""
    if isinstance(key, int):
        names = [item.get(k) for k in _NAMES] if isinstance(item, dict) else []
        # Only a name a warning can print as it is (a DNS-style name, not control characters).
        named = [n for n in names if isinstance(n, str) and _PRINTABLE_NAME.fullmatch(n)]
        return f"{path}[name={named[0]}]" if named else f"{path}[{key}]"
    shown = key if isinstance(key, str) and key.isprintable() else repr(key)
    return f"{path}.{shown}" if path else shown


def _template(path: str) -> str:
    """The pod template of a pod spec's path: its `.spec` (and `.template`) dropped."""
    for tail in (".template.spec", ".spec"):
        held = path[: -len(tail)] if path.endswith(tail) else ""
        if held and held != "spec":  # a Deployment's is spec.template, not spec
            return held
    return path or "the document"

"""Pod specs found in any document by shape, not by kind: Deployments, Jobs, CronJobs and
custom resources that embed pod templates (Kubeflow, Ray, JobSet, LeaderWorkerSet...) alike."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app.core.kube import Obj
from app.core.policy import SKIP_ANNOTATION
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


def _skipped(metadata: Any) -> bool:
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    return isinstance(annotations, dict) and annotations.get(SKIP_ANNOTATION) == "true"


def rewrite_pod_specs(node: Any, rewrite: Callable[[Obj], Obj], opt_out: bool = True) -> Any:
    """`node` with `rewrite` applied to each pod spec in it, copied only along the paths
    that change. With `opt_out`, a pod template annotated gpu2dra.io/skip is passed over."""
    return _walk(node, rewrite, not opt_out, False, 0)


def _walk(node: Any, rewrite: Callable[[Obj], Obj], every: bool, skip: bool, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise TooDeep
    if isinstance(node, list):
        items = [_walk(v, rewrite, every, skip, depth + 1) for v in node]
        return node if all(a is b for a, b in zip(items, node, strict=True)) else items
    if not isinstance(node, dict):
        return node
    if is_pod_spec(node):
        return node if skip else rewrite(node)
    # A pod template's own metadata can opt out (gpu2dra.io/skip) like a pod's.
    skip = skip or (
        not every and _skipped(node.get("metadata")) and isinstance(node.get("spec"), dict)
    )
    changed = {}
    for key, value in node.items():
        new = _walk(value, rewrite, every, skip, depth + 1)
        if new is not value:
            changed[key] = new
    return {**node, **changed} if changed else node


def pod_specs(node: Any) -> list[Obj]:
    """Every pod spec in `node`, opted out or not, in document order."""
    found: list[Obj] = []

    def collect(spec: Obj) -> Obj:
        found.append(spec)
        return spec

    rewrite_pod_specs(node, collect, opt_out=False)
    return found

"""Which pods gpu2dra never changes, whatever their namespace's mode: one rule for the
webhook and for `explain`."""

from __future__ import annotations

from typing import Any

from app.core.policy import SKIP_ANNOTATION, Policy

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"


def skip_reason(pod: Any, namespace: str, policy: Policy) -> str | None:
    """Why the pod is left alone (its namespace is never changed, it is a mirror pod, or it
    opts out with the skip annotation); None when its namespace's mode decides."""
    if namespace in policy.skip_namespaces:
        return f"namespace {namespace} is never changed"
    metadata = pod.get("metadata") if isinstance(pod, dict) else None
    annotations = (metadata.get("annotations") if isinstance(metadata, dict) else None) or {}
    if not isinstance(annotations, dict):
        return None
    if MIRROR_ANNOTATION in annotations:
        return "mirror pod"  # the kubelet's copy of a static pod: the API cannot change it
    if annotations.get(SKIP_ANNOTATION) == "true":
        return f"annotated {SKIP_ANNOTATION}"
    return None

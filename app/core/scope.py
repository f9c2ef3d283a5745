"""Which pods gpu2dra changes, and how: the namespaces and pods it never changes, and each
namespace's mode. One rule for the webhook, the manifests and the troubleshooting commands."""

from __future__ import annotations

from typing import Any, Final, Literal

from app.core.kube import Obj
from app.core.policy import SKIP_ANNOTATION, Mode, Policy

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
NEVER_CHANGED: Final = "never changed"  # a skipNamespaces namespace, whatever its label says


def never_changed(namespace: str | None, policy: Policy) -> bool:
    """The namespace is one of the policy's skipNamespaces."""
    return namespace in policy.skip_namespaces


def opted_out(metadata: Any) -> bool:
    """A pod's (or pod template's) metadata annotated gpu2dra.io/skip: "true"."""
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    return isinstance(annotations, dict) and annotations.get(SKIP_ANNOTATION) == "true"


def namespace_mode(namespace: Obj, policy: Policy) -> Mode | Literal["never changed"]:
    """What gpu2dra does in a namespace (a Namespace object): never changed, else its mode."""
    metadata = namespace["metadata"]
    if never_changed(metadata["name"], policy):
        return NEVER_CHANGED
    return policy.mode_for(metadata.get("labels"))


def skip_reason(pod: Any, namespace: str, policy: Policy) -> str | None:
    """Why the pod is left alone (its namespace is never changed, it is a mirror pod, or it
    opts out with the skip annotation); None when its namespace's mode decides."""
    if never_changed(namespace, policy):
        return f"namespace {namespace} is {NEVER_CHANGED}"
    metadata = pod.get("metadata") if isinstance(pod, dict) else None
    annotations = (metadata.get("annotations") if isinstance(metadata, dict) else None) or {}
    if not isinstance(annotations, dict):
        return None
    if MIRROR_ANNOTATION in annotations:
        return "mirror pod"  # the kubelet's copy of a static pod: the API cannot change it
    if opted_out(metadata):
        return f"annotated {SKIP_ANNOTATION}"
    return None

"""Node autoscalers' Deployments as their charts install them, for the tests that read them
(gpu2dra reads an autoscaler from its Deployment: labels, image tag, args; nothing runs it)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from kubernetes import client

Obj = dict[str, Any]
KARPENTER_LABELS = {"app.kubernetes.io/name": "karpenter"}


def cluster_autoscaler_labels(provider: str) -> dict[str, str]:
    """The cluster-autoscaler chart's name label: `<cloudProvider>-cluster-autoscaler`."""
    return {"app.kubernetes.io/name": f"{provider}-cluster-autoscaler"}


@contextmanager
def deployed(
    api: client.ApiClient,
    namespace: str,
    name: str,
    labels: dict[str, str],
    image: str,
    args: Sequence[str] = (),
) -> Iterator[Obj]:
    """A Deployment of no replicas running `image` with `args`; deleted afterwards."""
    container: Obj = {"name": "controller", "image": image, "args": list(args)}
    body: Obj = {
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
        },
    }
    apps = client.AppsV1Api(api)
    apps.create_namespaced_deployment(namespace, body)
    try:
        yield body
    finally:
        apps.delete_namespaced_deployment(name, namespace)

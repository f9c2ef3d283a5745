"""The gpu2dra webhooks a cluster runs, as their Deployments say: a pure function of what was
listed."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from app.core.kube import Obj

NAME_LABEL = "app.kubernetes.io/name"
VERSION_LABEL = "app.kubernetes.io/version"
COMPONENT_LABEL = "app.kubernetes.io/component"
SELECTOR = f"{NAME_LABEL}=gpu2dra"


@dataclass(frozen=True, slots=True)
class Webhook:
    namespace: str
    name: str
    version: str | None  # its app.kubernetes.io/version label
    image: str | None  # the webhook container's
    tag: str | None  # the image's tag (a digest alone has none)
    ready: int
    replicas: int


def image_tag(image: str) -> str | None:
    """`registry:5000/gpu2dra:0.1.0@sha256:...` -> `0.1.0`; None without a tag."""
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    return last.rsplit(":", 1)[1] if ":" in last else None


def _image(spec: Obj) -> str | None:
    containers = [c for c in spec.get("containers") or () if isinstance(c, dict)]
    chosen = next((c for c in containers if c.get("name") == "webhook"), None)
    chosen = chosen or (containers[0] if containers else {})
    image = chosen.get("image")
    return image if isinstance(image, str) else None


def webhooks(deployments: Iterable[Obj]) -> list[Webhook]:
    """The Deployments of gpu2dra's webhook (component `webhook`, or none said): the chart's
    exporter and test objects carry gpu2dra's name too."""
    found = []
    for deployment in deployments:
        meta = deployment.get("metadata") or {}
        labels = meta.get("labels") or {}
        if labels.get(NAME_LABEL) != "gpu2dra" or labels.get(COMPONENT_LABEL, "webhook") != (
            "webhook"
        ):
            continue
        spec, status = deployment.get("spec") or {}, deployment.get("status") or {}
        image = _image((spec.get("template") or {}).get("spec") or {})
        replicas = spec.get("replicas")
        found.append(
            Webhook(
                namespace=str(meta.get("namespace", "")),
                name=str(meta.get("name", "")),
                version=labels.get(VERSION_LABEL),
                image=image,
                tag=image_tag(image) if image else None,
                ready=int(status.get("readyReplicas") or 0),
                replicas=int(replicas if isinstance(replicas, int) else 1),
            )
        )
    return sorted(found, key=lambda w: (w.namespace, w.name))

"""Every image the chart renders comes from the `image` values through one helper: the
webhook's Deployment, the prune CronJob, the exporter and the `helm test` Pod, in every
combination of the optional ones, pull the same `[registry/]repository(:tag|@digest)`."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from tests.chart.render import helm_template

Obj = dict[str, Any]
DIGEST = "sha256:" + "ab" * 32
# (--set values of `image`, the image string every container must pull)
IMAGES = [
    ((), "ghcr.io/gpu2dra/gpu2dra:0.1.0"),
    (("image.tag=1.2.3",), "ghcr.io/gpu2dra/gpu2dra:1.2.3"),
    ((f"image.digest={DIGEST}", "image.tag=1.2.3"), f"ghcr.io/gpu2dra/gpu2dra@{DIGEST}"),
    (("image.registry=mirror.example.com/",), "mirror.example.com/gpu2dra/gpu2dra:0.1.0"),
    (
        ("image.registry=", "image.repository=localhost/gpu2dra", "image.tag=dev"),
        "localhost/gpu2dra:dev",
    ),
]
# The optional components that run a container, by the value that turns each on.
COMPONENTS = {
    "claimTemplates.prune.enabled": ("CronJob", "gpu2dra-prune"),
    "exporter.enabled": ("Deployment", "gpu2dra-exporter"),
    "helmTest.enabled": ("Pod", "gpu2dra-doctor"),
}


def containers(doc: Obj) -> list[Obj]:
    """The containers and init containers of a Pod, a Deployment or a CronJob."""
    spec = doc.get("spec", {})
    if doc["kind"] == "CronJob":
        spec = spec["jobTemplate"]["spec"]["template"]["spec"]
    elif doc["kind"] != "Pod":
        spec = spec.get("template", {}).get("spec", {})
    return [*spec.get("initContainers", []), *spec.get("containers", [])]


def combinations() -> list[tuple[str, ...]]:
    names = list(COMPONENTS)
    return [c for n in range(len(names) + 1) for c in itertools.combinations(names, n)]


@pytest.mark.parametrize("enabled", combinations(), ids=lambda c: "+".join(c) or "webhook")
@pytest.mark.parametrize(("values", "expected"), IMAGES, ids=[i[1] for i in IMAGES])
def test_every_container_pulls_the_image_the_values_name(
    helm: Path, enabled: tuple[str, ...], values: tuple[str, ...], expected: str
) -> None:
    switches = [f"{name}={'true' if name in enabled else 'false'}" for name in COMPONENTS]
    docs = helm_template(helm, *values, *switches)
    pulled = {
        (doc["kind"], doc["metadata"]["name"], c["name"]): c["image"]
        for doc in docs
        for c in containers(doc)
    }
    runs = {(kind, name) for kind, name, _ in pulled}
    assert runs == {("Deployment", "gpu2dra")} | {COMPONENTS[name] for name in enabled}
    assert set(pulled.values()) == {expected}, pulled

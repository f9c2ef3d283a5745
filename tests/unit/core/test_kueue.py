"""Kueue as admission reads it: the version, the DRA gate, the integrations and mappings, and
why a queued pod's claims would not be counted."""

from __future__ import annotations

from typing import Any

import pytest

from app.core.kueue import (
    Gate,
    Kueue,
    queued,
    read,
    uncounted,
)
from app.core.outcomes import Code

Obj = dict[str, Any]

CONFIG = """apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
integrations:
  frameworks: [batch/job, pod]
resources:
  deviceClassMappings:
  - {name: whole-gpus, deviceClassNames: [gpu.nvidia.com]}
"""


def configmap(text: str = CONFIG) -> dict[str, Any]:
    return {"data": {"controller_manager_config.yaml": text}}


def deployment(image: str = "registry.k8s.io/kueue/kueue:v0.17.1", *args: str) -> Any:
    manager = {"name": "manager", "image": image, "args": list(args)}
    return {"spec": {"template": {"spec": {"containers": [manager]}}}}


def test_read() -> None:
    assert read(None, None) is None
    assert read(configmap(), deployment()) == Kueue(
        (0, 17),
        Gate("DynamicResourceAllocation", False, "its default"),
        ("pod",),
        {"gpu.nvidia.com": "whole-gpus"},
    )
    on = read(
        configmap(), deployment("kueue:v0.17.1", "--feature-gates=DynamicResourceAllocation=true")
    )
    assert on is not None and on.gate == Gate("DynamicResourceAllocation", True, "--feature-gates")
    newer = read(configmap(), deployment("r/kueue:v0.18.0@sha256:abc"))
    assert newer is not None and newer.gate == Gate("KueueDRAIntegration", True, "its default")
    # Unreadable parts count as the worst: no version, no gate; every pod-based integration.
    blind = read({"data": {}}, None)
    assert blind == Kueue(None, None, ("pod", "deployment"), {})


def metadata(labels: Any, controller: str | None) -> Any:
    owner = {"kind": controller, "name": "o", "controller": True} if controller else None
    return {"labels": labels, "ownerReferences": [owner] if owner else []}


@pytest.mark.parametrize(
    ("labels", "controller", "expected"),
    [
        ({"kueue.x-k8s.io/queue-name": "q"}, None, True),
        ({"kueue.x-k8s.io/queue-name": "q"}, "ReplicaSet", True),  # the deployment integration
        ({"kueue.x-k8s.io/queue-name": "q"}, "Job", False),  # counted from the Job's template
        ({"kueue.x-k8s.io/queue-name": "q"}, "StatefulSet", False),
        ({"kueue.x-k8s.io/queue-name": ""}, None, False),
        (None, None, False),
    ],
)
def test_queued(labels: Any, controller: str | None, expected: bool) -> None:
    assert queued(metadata(labels, controller)) is expected


def test_uncounted() -> None:
    then = "pod left"
    gate_off = read(configmap(), deployment())
    gate_on = read(
        configmap(), deployment("k:v0.17.1", "--feature-gates=DynamicResourceAllocation=true")
    )
    no_pods = read(configmap(CONFIG.replace(", pod]", "]")), deployment())
    assert gate_off and gate_on and no_pods
    found = uncounted(gate_off, {"gpu.nvidia.com"}, False, then)
    assert found is not None and found.code is Code.KUEUE_GATE_OFF
    assert found.startswith("queued by Kueue v0.17 with its DRA gate DynamicResourceAllocation off")
    assert found.endswith("; pod left")
    missing = uncounted(gate_on, {"gpu.nvidia.com", "mig.nvidia.com"}, False, then)
    assert missing is not None and missing.code is Code.KUEUE_UNMAPPED
    assert "names no mig.nvidia.com" in missing
    selecting = uncounted(gate_on, {"gpu.nvidia.com"}, True, then)
    assert selecting is not None and selecting.code is Code.KUEUE_SELECTORS
    assert uncounted(gate_on, {"gpu.nvidia.com"}, False, then) is None
    assert uncounted(no_pods, {"gpu.nvidia.com"}, False, then) is None
    blind = uncounted(Kueue(None, None, ("pod",)), (), False, then)
    assert blind is not None and blind.code is Code.KUEUE_NO_DRA

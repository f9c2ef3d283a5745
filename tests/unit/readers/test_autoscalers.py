"""The node autoscalers as the commands read them: by each label selector, and GKE's pools by
their nodes' label."""

from __future__ import annotations

from typing import Any, cast

import pytest

from app.core import autoscalers
from app.readers.autoscalers import node_autoscalers
from app.readers.client import Reader, ReadError

Obj = dict[str, Any]


class Listed:
    """A Reader that answers each (path, labelSelector) from a table; records what was asked."""

    def __init__(self, answers: dict[tuple[str, str], list[Obj]]) -> None:
        self.answers, self.asked = answers, list[tuple[str, str]]()

    def items(self, path: str, **query: str) -> list[Obj]:
        key = (path, query.get("labelSelector", ""))
        self.asked.append(key)
        if key not in self.answers:
            raise ReadError(f"GET {path}: 403 forbidden")
        return self.answers[key]


def deployment(name: str, labels: dict[str, str], image: str, *args: str) -> Obj:
    container = {"name": "c", "image": image, "args": list(args)}
    return {
        "metadata": {"name": name, "namespace": "kube-system", "labels": labels},
        "spec": {"template": {"spec": {"containers": [container]}}},
    }


def test_every_selector_and_gkes_nodes_are_read() -> None:
    by_name, by_app = autoscalers.SELECTORS
    karpenter = deployment(
        "karpenter",
        {"app.kubernetes.io/name": "karpenter"},
        "public.ecr.aws/karpenter/controller:1.15.0",
    )
    ca = deployment(
        "ca",
        {"app": "cluster-autoscaler"},
        "registry.k8s.io/autoscaling/cluster-autoscaler:v1.37.0",
        "--cloud-provider=clusterapi",
    )
    pool = {
        "metadata": {
            "name": "n1",
            "labels": {
                autoscalers.GKE_DRA_LABEL: "true",
                autoscalers.GKE_POOL_LABEL: "gpus",
            },
        }
    }
    nodes = ("/api/v1/nodes", f"{autoscalers.GKE_DRA_LABEL}=true")
    reader = Listed(
        {
            ("/apis/apps/v1/deployments", by_name): [karpenter],
            ("/apis/apps/v1/deployments", by_app): [ca],
            nodes: [pool],
        }
    )
    found = node_autoscalers(cast(Reader, reader))
    assert [(a.kind, a.where, a.adds_dra_nodes) for a in found] == [
        ("cluster-autoscaler", "kube-system/ca", True),
        ("gke", "pool gpus", True),
        ("karpenter", "kube-system/karpenter", False),
    ]
    assert reader.asked[-1] == nodes


def test_an_unreadable_list_raises() -> None:
    with pytest.raises(ReadError, match="403 forbidden"):
        node_autoscalers(cast(Reader, Listed({})))

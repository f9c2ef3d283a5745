"""The webhook's pods run at system-cluster-critical by default: a webhook the API server
calls for every GPU pod must not be the first pod evicted under node pressure, nor be
preempted by the workloads it admits. Where the API server limits the critical classes to
namespaces with a quota for them (GKE), the chart brings that quota."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.webhook import render_chart

Obj = dict[str, Any]
CRITICAL = ["system-node-critical", "system-cluster-critical"]


def of(docs: list[Obj], kind: str) -> list[Obj]:
    return [d for d in docs if d["kind"] == kind]


def webhook_pod(docs: list[Obj]) -> Obj:
    (deployment,) = [d for d in of(docs, "Deployment") if d["metadata"]["name"] == "gpu2dra"]
    spec: Obj = deployment["spec"]["template"]["spec"]
    return spec


def test_the_webhook_is_cluster_critical_by_default(helm: Path) -> None:
    docs = render_chart(helm)
    assert webhook_pod(docs)["priorityClassName"] == "system-cluster-critical"
    (quota,) = of(docs, "ResourceQuota")
    assert quota["metadata"]["namespace"] == "gpu2dra-system"
    (scope,) = quota["spec"]["scopeSelector"]["matchExpressions"]
    assert scope == {"scopeName": "PriorityClass", "operator": "In", "values": CRITICAL}
    assert quota["spec"]["hard"] == {"pods": "10"}  # never the limit: only what allows them


def test_a_class_of_your_own_brings_no_quota(helm: Path) -> None:
    docs = render_chart(helm, "priorityClassName=platform-high")
    assert webhook_pod(docs)["priorityClassName"] == "platform-high"
    assert of(docs, "ResourceQuota") == []


def test_no_class_no_quota(helm: Path) -> None:
    docs = render_chart(helm, "priorityClassName=")
    assert "priorityClassName" not in webhook_pod(docs)
    assert of(docs, "ResourceQuota") == []


def test_the_quota_can_be_left_out(helm: Path) -> None:
    docs = render_chart(helm, "priorityClassQuota=false")
    assert webhook_pod(docs)["priorityClassName"] == "system-cluster-critical"
    assert of(docs, "ResourceQuota") == []

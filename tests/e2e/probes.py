"""What the fault tests send a webhook and read back: a pod's review, a /metrics sum."""

from __future__ import annotations

import uuid
from typing import Any

from tests.support.webhook import Webhook

Obj = dict[str, Any]


def review(namespace: str, pod: Obj) -> Obj:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "operation": "CREATE",
            "namespace": namespace,
            "object": pod,
        },
    }


def metric(hook: Webhook, line_start: str) -> float:
    status, text = hook.get("/metrics")
    assert status == 200
    total = 0.0
    for line in text.decode().splitlines():
        if line.startswith(line_start):
            total += float(line.rsplit(" ", 1)[1])
    return total

"""Queues other than Kueue and Volcano: KAI Scheduler's and YuniKorn's, named where a
translated document's GPUs leave what they count."""

from __future__ import annotations

from typing import Any

import pytest

from app.core.catalog import Catalog
from app.core.outcomes import Code, codes
from app.core.policy import Policy
from app.manifests.documents import translate_documents

Obj = dict[str, Any]


def _deployment(labels: Obj, **spec: Any) -> Obj:
    container = {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": 1}}}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "labels": labels},
        "spec": {
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [container], **spec},
            }
        },
    }


def _run(doc: Obj, policy: Policy, catalog: Catalog) -> tuple[Any, list[str]]:
    result = translate_documents([doc], policy, catalog, namespace="ns", mode="enabled")
    return result.documents[0], [n.text for n in result.notes]


@pytest.mark.parametrize("label", ["kai.scheduler/queue", "runai/queue"])
def test_kai_queue(label: str, policy: Policy, catalog: Catalog) -> None:
    out, notes = _run(_deployment({label: "team-a"}), policy, catalog)
    assert out["spec"]["template"]["spec"]["resourceClaims"]
    kai = [n for n in notes if codes([n]) == (Code.KAI_QUEUE,)]
    assert len(kai) == 1 and "gpu.nvidia.com" in kai[0] and "draSchedulers" in kai[0]


def test_yunikorn_queue_label(policy: Policy, catalog: Catalog) -> None:
    _, notes = _run(_deployment({"yunikorn.apache.org/queue": "root.a"}), policy, catalog)
    assert Code.YUNIKORN_QUEUE in codes(notes)
    (note,) = [n for n in notes if codes([n]) == (Code.YUNIKORN_QUEUE,)]
    assert note.startswith("queued by YuniKorn (yunikorn.apache.org/queue)")


def test_a_plain_queue_label_counts_only_with_yunikorn(policy: Policy, catalog: Catalog) -> None:
    assert Code.YUNIKORN_QUEUE not in codes(_run(_deployment({"queue": "a"}), policy, catalog)[1])
    # With schedulerName yunikorn the pod is left (draSchedulers) and says so; nothing moved.
    out, notes = _run(_deployment({"queue": "a"}, schedulerName="yunikorn"), policy, catalog)
    assert "resourceClaims" not in out["spec"]["template"]["spec"]
    assert any("spec.schedulerName 'yunikorn'" in n for n in notes)


def test_a_spark_application_queued_by_yunikorn(policy: Policy, catalog: Catalog) -> None:
    gpu = {"name": "nvidia.com/gpu", "quantity": 1}
    doc = {
        "apiVersion": "sparkoperator.k8s.io/v1beta2",
        "kind": "SparkApplication",
        "metadata": {"name": "pi"},
        "spec": {
            "batchScheduler": "yunikorn",
            "batchSchedulerOptions": {"queue": "root.default"},
            "executor": {"instances": 2, "gpu": gpu},
        },
    }
    out, notes = _run(doc, policy, catalog)
    assert out is doc
    assert codes(notes) == (Code.CRD_ASK, Code.YUNIKORN_QUEUE)
    assert "(batchSchedulerOptions.queue)" in notes[1]

"""Queues other than Kueue and Volcano: KAI Scheduler's and YuniKorn's, named where a
translated document's GPUs leave what they count."""

from __future__ import annotations

from typing import Any

import pytest

from app.core.catalog import Catalog
from app.core.outcomes import Code, codes
from app.core.policy import Policy, parse_policy
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


@pytest.mark.parametrize("label", ["yunikorn.apache.org/queue", "queue"])
def test_pods_marked_for_yunikorn_are_left(label: str, policy: Policy, catalog: Catalog) -> None:
    """YuniKorn's admission controller gives them schedulerName: yunikorn when they are
    created, after gpu2dra's webhook: their template is left, as a yunikorn pod is."""
    doc = _deployment({label: "root.a"})
    out, notes = _run(doc, policy, catalog)
    assert out is doc
    assert codes(notes) == (Code.YUNIKORN_POD,)
    assert notes[0].startswith(f"label {label} marks the pod for YuniKorn")


def test_a_queue_label_on_the_workload_alone_marks_no_pod(policy: Policy, catalog: Catalog) -> None:
    """Pods carry their template's labels, not their Deployment's: they are translated, and
    the note says what YuniKorn's queue no longer counts."""
    doc = _deployment({})
    doc["metadata"]["labels"] = {"yunikorn.apache.org/queue": "root.a"}
    out, notes = _run(doc, policy, catalog)
    assert out["spec"]["template"]["spec"]["resourceClaims"]
    assert Code.YUNIKORN_QUEUE in codes(notes) and Code.YUNIKORN_POD not in codes(notes)
    (note,) = [n for n in notes if codes([n]) == (Code.YUNIKORN_QUEUE,)]
    assert note.startswith("queued by YuniKorn (yunikorn.apache.org/queue)")


def test_yunikorn_in_dra_schedulers_translates_its_pods_with_the_queue_note(
    catalog: Catalog,
) -> None:
    policy = parse_policy({"draSchedulers": ["default-scheduler", "yunikorn"]})
    out, notes = _run(_deployment({"queue": "a"}, schedulerName="yunikorn"), policy, catalog)
    assert out["spec"]["template"]["spec"]["resourceClaims"]
    assert Code.YUNIKORN_QUEUE in codes(notes)


def test_a_yunikorn_scheduler_name_is_said_once(policy: Policy, catalog: Catalog) -> None:
    # Left (draSchedulers) and said so; its queue label adds no second line.
    out, notes = _run(_deployment({"queue": "a"}, schedulerName="yunikorn"), policy, catalog)
    assert "resourceClaims" not in out["spec"]["template"]["spec"]
    assert codes(notes) == (Code.SCHEDULER,)
    assert "spec.schedulerName 'yunikorn'" in notes[0]


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

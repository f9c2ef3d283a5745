"""A pod Kueue holds, as explain reads it: the gate, its Workload, why it waits."""

from __future__ import annotations

from typing import Any

import pytest

from app.diagnose.explain.workload import admission_gated, waiting_for, workload_of

Obj = dict[str, Any]


def test_admission_gated_and_the_workload_of_a_pod() -> None:
    gated = {"schedulingGates": [{"name": "other"}, {"name": "kueue.x-k8s.io/admission"}]}
    assert admission_gated(gated) and not admission_gated({"schedulingGates": [{"name": "x"}]})
    assert not admission_gated({})
    pod = {"metadata": {"uid": "u1"}}
    mine = {"metadata": {"name": "w1", "ownerReferences": [{"kind": "Pod", "uid": "u1"}]}}
    other = {"metadata": {"name": "w2", "ownerReferences": [{"kind": "Pod", "uid": "u2"}]}}
    assert workload_of(pod, [other, mine]) is mine
    assert workload_of(pod, [other, {"metadata": {}}]) is None


@pytest.mark.parametrize(
    ("conditions", "expected"),
    [
        ([], "not yet considered for admission"),
        (
            [{"type": "QuotaReserved", "status": "False", "message": "insufficient quota"}],
            "insufficient quota",
        ),
        (
            [
                {"type": "QuotaReserved", "status": "True", "message": "reserved"},
                {"type": "Admitted", "status": "False", "reason": "AdmissionCheck"},
            ],
            "AdmissionCheck",
        ),
        ([{"type": "Admitted", "status": "True"}], "admitted: Kueue is about to lift the gate"),
        ([{"type": "Finished", "status": "True"}], "finished"),
    ],
)
def test_waiting_for(conditions: list[Obj], expected: str) -> None:
    assert waiting_for({"status": {"conditions": conditions}}) == expected

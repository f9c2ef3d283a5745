"""`gpu2dra explain` exits 3 when a step says FAIL, so a script can act on it; 0 otherwise."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from app.diagnose.explain import command
from app.diagnose.explain.explain import Explanation
from app.diagnose.explain.step import Step
from app.kubeconfig import Kubeconfig


@pytest.mark.parametrize(("state", "status"), [("PASS", 0), ("WARN", 0), ("FAIL", 3)])
def test_a_failing_step_is_exit_status_3(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], state: Any, status: int
) -> None:
    steps = (Step("PASS", "translated by gpu2dra"), Step(state, "the last step"))
    monkeypatch.setattr(command, "connect", lambda kubeconfig: None)
    monkeypatch.setattr(command, "cluster_policy", lambda reader, file: (None, None))
    monkeypatch.setattr(command, "gather", lambda reader, namespace, name: None)
    monkeypatch.setattr(command, "explain", lambda facts, policy: Explanation("pod", steps, ()))
    assert (
        command.run(kubeconfig=Kubeconfig(), policy_file=None, namespace="ns", name="p") == status
    )
    assert f"  {state:<4}  the last step\n" in capsys.readouterr().out


@pytest.mark.parametrize("output", ["json", "yaml"])
def test_the_explanation_as_json_or_yaml(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], output: Any
) -> None:
    steps = (Step("PASS", "translated by gpu2dra", ("claim gpu",)), Step("FAIL", "unschedulable"))
    monkeypatch.setattr(command, "connect", lambda kubeconfig: None)
    monkeypatch.setattr(command, "cluster_policy", lambda reader, file: (None, None))
    monkeypatch.setattr(command, "gather", lambda reader, namespace, name: None)
    monkeypatch.setattr(command, "explain", lambda facts, policy: Explanation("pod p", steps, ()))
    status = command.run(
        kubeconfig=Kubeconfig(), policy_file=None, namespace="ns", name="p", output=output
    )
    assert status == 3  # FAIL, whatever the format
    body = yaml.safe_load(capsys.readouterr().out)  # JSON is YAML too
    assert body["headline"] == "pod p"
    assert [(s["state"], s["text"], s["details"]) for s in body["steps"]] == [
        ("PASS", "translated by gpu2dra", ["claim gpu"]),
        ("FAIL", "unschedulable", []),
    ]

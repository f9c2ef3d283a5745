"""skipAnnotation.allowedUsers: nothing by default (anyone who may create a pod may opt it
out); with users listed, a ValidatingAdmissionPolicy and its Deny binding naming them; a name
that would break the policy's CEL is refused by the schema. Enforcement on the real API
server: tests/e2e/test_skip_policy.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chart.render import helm_template

KINDS = ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")


def test_no_policy_by_default(helm: Path) -> None:
    assert [d for d in helm_template(helm) if d["kind"] in KINDS] == []


def test_listed_users_may_opt_out_and_no_one_else(helm: Path) -> None:
    users = "skipAnnotation.allowedUsers={system:serviceaccount:ci:deployer,alice}"
    policy, binding = [d for d in helm_template(helm, users) if d["kind"] in KINDS]
    variables = {v["name"]: v["expression"] for v in policy["spec"]["variables"]}
    assert variables["allowed"].startswith(
        "request.userInfo.username in ['system:serviceaccount:ci:deployer','alice'] ||"
    )
    (validation,) = policy["spec"]["validations"]
    assert validation["expression"] == (
        "variables.skip != 'true' || variables.had == 'true' || variables.allowed"
    )
    assert binding["spec"] == {
        "policyName": policy["metadata"]["name"],
        "validationActions": ["Deny"],
    }


@pytest.mark.parametrize("name", ["o'brien", "x'"])
def test_a_name_that_would_break_the_expression_is_refused(helm: Path, name: str) -> None:
    with pytest.raises(AssertionError, match="allowedUsers"):
        helm_template(helm, f"skipAnnotation.allowedUsers={{{name}}}")

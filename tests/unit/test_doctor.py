"""Doctor checks that the control plane in the end-to-end tests cannot show: old versions,
an API not served, unreadable kinds; and the text output's shape."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from app.cli import main
from app.core.policy import load_policy
from app.troubleshoot.checks import Check, check_kubernetes, check_namespaces
from app.troubleshoot.client import ReadError
from app.troubleshoot.doctor import render_text


def version(minor: str) -> dict[str, str]:
    return {"major": "1", "minor": minor, "gitVersion": f"v1.{minor.rstrip('+')}.0"}


def test_kubernetes_version_and_served_versions() -> None:
    old = check_kubernetes(version("33+"), ["v1beta1", "v1beta2"])
    assert (old.status, old.summary) == (
        "FAIL",
        "v1.33.0: DRA resource.k8s.io/v1 needs Kubernetes 1.34 or later",
    )
    off = check_kubernetes(version("34"), ["v1beta1"])
    assert off.status == "FAIL"
    assert "resource.k8s.io/v1 is not served (served: v1beta1)" in off.summary
    assert "--runtime-config=resource.k8s.io/v1=true" in off.fix
    both = check_kubernetes(version("35"), ["v1", "v1beta2"])
    assert (both.status, both.summary) == (
        "PASS",
        "v1.35.0; resource.k8s.io/v1 served (also served: v1beta2)",
    )


def test_unreadable_is_a_warning_with_a_fix() -> None:
    check = check_namespaces(ReadError("GET /api/v1/namespaces: 403 forbidden"), load_policy(None))
    assert check.status == "WARN"
    assert check.summary == "cannot read: GET /api/v1/namespaces: 403 forbidden"
    assert "readOnlyRole.create=true" in check.fix


def test_namespace_modes_are_counted() -> None:
    namespaces: list[dict[str, Any]] = [
        {"metadata": {"name": "a", "labels": {"gpu2dra.io/migration": "enabled"}}},
        {"metadata": {"name": "b", "labels": {"gpu2dra.io/migration": "audit"}}},
        {"metadata": {"name": "c", "labels": {"gpu2dra.io/migration": "typo"}}},
        {"metadata": {"name": "kube-system"}},
    ]
    check = check_namespaces(namespaces, load_policy(None))
    assert check.summary.startswith("1 enabled, 1 audit, 1 disabled, 1 never changed")


def test_text_output_one_line_per_check() -> None:
    checks = [
        Check("kubernetes", "PASS", "v1.35.0"),
        Check("coexistence", "FAIL", "node n offers GPUs twice", "remove one", ("node n: x",)),
    ]
    assert render_text(checks, "embedded default").splitlines() == [
        "policy: embedded default",
        "PASS  kubernetes   v1.35.0",
        "FAIL  coexistence  node n offers GPUs twice",
        "                   - node n: x",
        "                   fix: remove one",
    ]


def test_unreachable_api_server_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    for command in (["doctor"], ["report", "-A"], ["explain", "pod", "p"]):
        assert main([*command, "--kubeconfig", str(kubeconfig)]) == 1
        out, err = capsys.readouterr()
        assert out == ""
        assert err.startswith("gpu2dra: cannot reach the API server at https://127.0.0.1:1: ")
        assert len(err.splitlines()) == 1
    assert main(["doctor", "--kubeconfig", str(tmp_path / "none")]) == 1
    assert capsys.readouterr().err == f"gpu2dra: kubeconfig {tmp_path / 'none'}: no such file\n"

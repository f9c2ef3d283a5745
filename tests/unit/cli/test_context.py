"""Every command that reads a cluster takes --kubeconfig and --context, and its -n defaults to
the chosen context's namespace, else default, as kubectl's."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.cli import commands
from app.kubeconfig import Kubeconfig

# command line -> the module whose run() it calls
COMMANDS = {
    ("doctor",): "app.diagnose.doctor.command",
    ("explain", "pod", "p"): "app.diagnose.explain.command",
    ("report",): "app.diagnose.report.command",
    ("impact",): "app.plan.impact.command",
    ("capacity",): "app.plan.capacity.command",
    ("deviceclasses",): "app.plan.deviceclasses.command",
    ("quota",): "app.plan.quota.command",
    ("prune-templates",): "app.maintain.prune.command",
    ("version",): "app.diagnose.version.command",
}
TAKES_N = {"explain", "report", "impact", "quota", "prune-templates"}


@pytest.fixture
def kubeconfig(tmp_path: Path) -> Path:
    path = tmp_path / "config"
    context = {"cluster": "c", "user": "u"}
    path.write_text(
        yaml.safe_dump(
            {
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [
                    {"name": "lab", "context": {**context, "namespace": "ml"}},
                    {"name": "prod", "context": context},
                ],
                "current-context": "lab",
            }
        )
    )
    return path


def _run(monkeypatch: pytest.MonkeyPatch, argv: list[str]) -> dict[str, Any]:
    """The keyword arguments `gpu2dra ARGV` calls its command's run() with."""
    called: dict[str, Any] = {}

    def run(**kwargs: Any) -> int:
        called.update(kwargs)
        return 0

    module = importlib.import_module(COMMANDS[next(k for k in COMMANDS if k[0] == argv[0])])
    monkeypatch.setattr(module, "run", run)
    assert commands.main(argv) == 0
    return called


@pytest.mark.parametrize("command", list(COMMANDS), ids=lambda c: c[0])
@pytest.mark.parametrize(("context", "namespace"), [(None, "ml"), ("prod", "default")])
def test_the_context_and_its_namespace(
    monkeypatch: pytest.MonkeyPatch,
    kubeconfig: Path,
    command: tuple[str, ...],
    context: str | None,
    namespace: str,
) -> None:
    chosen = ["--context", context] if context else []
    called = _run(monkeypatch, [*command, "--kubeconfig", str(kubeconfig), *chosen])
    assert called["kubeconfig"] == Kubeconfig(kubeconfig, context)
    if command[0] in TAKES_N:
        assert called["namespace"] == namespace
        given = _run(monkeypatch, [*command, "--kubeconfig", str(kubeconfig), *chosen, "-n", "x"])
        assert given["namespace"] == "x"


@pytest.mark.parametrize("command", ["report", "impact", "prune-templates"])
def test_all_namespaces_is_none(
    monkeypatch: pytest.MonkeyPatch, kubeconfig: Path, command: str
) -> None:
    called = _run(monkeypatch, [command, "--kubeconfig", str(kubeconfig), "-A"])
    assert called["namespace"] is None


def test_quota_from_a_file_reads_every_namespace_it_names(
    monkeypatch: pytest.MonkeyPatch, kubeconfig: Path
) -> None:
    called = _run(monkeypatch, ["quota", "-f", "q.yaml", "--kubeconfig", str(kubeconfig)])
    assert called["namespace"] is None


@pytest.mark.parametrize(
    ("command", "formats"),
    [
        (("doctor",), ["text", "json", "yaml"]),
        (("explain", "pod", "p"), ["text", "json", "yaml"]),
        (("report",), ["table", "wide", "json", "yaml", "csv"]),
        (("impact",), ["text", "json", "yaml"]),
        (("capacity",), ["text", "wide", "json", "yaml"]),
        (("prune-templates",), ["text", "json", "yaml"]),
        (("version",), ["text", "json", "yaml"]),
    ],
    ids=lambda c: c[0] if isinstance(c, tuple) else "",
)
def test_output_formats_and_no_headers(
    monkeypatch: pytest.MonkeyPatch, kubeconfig: Path, command: tuple[str, ...], formats: list[str]
) -> None:
    for output in formats:
        called = _run(monkeypatch, [*command, "--kubeconfig", str(kubeconfig), "-o", output])
        assert called["output"] == output
    default = _run(monkeypatch, [*command, "--kubeconfig", str(kubeconfig)])
    assert default["output"] == formats[0]
    if "wide" in formats:  # a table: its header can go
        assert default["headers"] is True
        bare = _run(monkeypatch, [*command, "--kubeconfig", str(kubeconfig), "--no-headers"])
        assert bare["headers"] is False

"""`gpu2dra` with no arguments: with manifests piped in, as Helm 3 runs a post-renderer, it
translates them; at a terminal, it says how it is used."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from app.cli.commands import main

ROOT = Path(__file__).resolve().parents[3]
POD = (
    "# Source: chart/templates/pod.yaml\n"
    "kind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
    "  - {name: c, image: x, resources: {limits: {nvidia.com/gpu: 1}}}\n"
)


class _Stdin:
    def __init__(self, text: str, *, terminal: bool) -> None:
        self.buffer = io.BytesIO(text.encode())
        self.terminal = terminal

    def isatty(self) -> bool:
        return self.terminal


def test_piped_manifests_are_translated(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", _Stdin(POD, terminal=False))
    assert main([]) == 0
    kinds = [d["kind"] for d in yaml.safe_load_all(capsys.readouterr().out)]
    assert kinds == ["ResourceClaimTemplate", "Pod"]


def test_at_a_terminal_it_says_how_it_is_used(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", _Stdin("", terminal=True))
    with pytest.raises(SystemExit) as exited:
        main([])
    assert exited.value.code == 2
    assert capsys.readouterr().err.startswith("usage: gpu2dra ")


def test_the_program_reads_its_stdin() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "app"],
        input=POD,
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    docs = list(yaml.safe_load_all(done.stdout))
    assert [d["kind"] for d in docs] == ["ResourceClaimTemplate", "Pod"]
    assert "warning: document 1 (Pod p)" in done.stderr

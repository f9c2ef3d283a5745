"""`gpu2dra translate`'s inputs: several -f, directories (-R), stdin by default, URLs refused."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import yaml

from app.cli import main

POD = (
    "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  containers:\n"
    "  - name: c\n    image: i\n    resources:\n      limits:\n        nvidia.com/gpu: 1\n"
)


def _kinds_and_names(text: str) -> list[tuple[str, str]]:
    return [(d["kind"], d["metadata"]["name"]) for d in yaml.safe_load_all(text) if d]


def test_every_file_is_translated_in_order_and_templates_written_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a.yaml").write_text(POD.format(name="a"))
    (tmp_path / "b.yaml").write_text(POD.format(name="b").rstrip("\n"))  # no final newline
    (tmp_path / "c.yaml").write_text("---\n" + POD.format(name="c"))
    files = [str(tmp_path / n) for n in ("a.yaml", "b.yaml", "c.yaml")]
    assert main(["translate", "-f", files[0], "-f", files[1], "-f", files[2]]) == 0
    found = _kinds_and_names(capsys.readouterr().out)
    # The template first, that kubectl apply creates before the pods that use it.
    assert [kind for kind, _ in found] == ["ResourceClaimTemplate", "Pod", "Pod", "Pod"]
    assert [name for _, name in found[1:]] == ["a", "b", "c"]


def test_a_directory_gives_its_manifests_by_name_and_r_those_below(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "b.yml").write_text(POD.format(name="b"))
    (tmp_path / "a.json").write_text('{"kind": "ConfigMap", "metadata": {"name": "a"}}')
    (tmp_path / "notes.txt").write_text("not a manifest: [")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "c.yaml").write_text(POD.format(name="c"))
    assert main(["translate", "-f", str(tmp_path)]) == 0
    found = _kinds_and_names(capsys.readouterr().out)
    assert [name for _, name in found[1:]] == ["a", "b"] and len(found) == 3
    assert main(["translate", "-R", "-f", str(tmp_path)]) == 0
    found = _kinds_and_names(capsys.readouterr().out)
    assert [name for _, name in found[1:]] == ["a", "b", "c"] and len(found) == 4


def test_without_f_stdin_is_read(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    class Stdin:
        buffer = io.BytesIO(POD.format(name="p").encode())

        @staticmethod
        def isatty() -> bool:
            return False

    monkeypatch.setattr("sys.stdin", Stdin)
    assert main(["translate"]) == 0
    assert [k for k, _ in _kinds_and_names(capsys.readouterr().out)] == [
        "ResourceClaimTemplate",
        "Pod",
    ]


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("https://example.com/pod.yaml", "URLs are not read: download it first"),
        ("empty-dir", "no *.yaml, *.yml or *.json files in the directory"),
        ("missing.yaml", "No such file or directory"),
    ],
)
def test_what_cannot_be_read_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, message: str
) -> None:
    (tmp_path / "empty-dir").mkdir()
    (tmp_path / "a.yaml").write_text(POD.format(name="a"))
    where = name if "://" in name else str(tmp_path / name)
    assert main(["translate", "-f", str(tmp_path / "a.yaml"), "-f", where]) == 1
    out = capsys.readouterr()
    assert out.err == f"gpu2dra: {where}: {message}\n" and out.out == ""


def test_without_f_a_terminal_is_not_waited_on(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    class Terminal:
        @staticmethod
        def isatty() -> bool:
            return True

    monkeypatch.setattr("sys.stdin", Terminal)
    assert main(["translate"]) == 1
    assert capsys.readouterr().err == (
        "gpu2dra: no -f given and stdin is a terminal: give -f FILE, or pipe manifests in\n"
    )

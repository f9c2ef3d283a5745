"""The documentation: generated references that match the code."""

from __future__ import annotations

import pytest

from app.core.policy import PolicyError, parse_policy
from tests.support import docs

ROOT = docs.ROOT


@pytest.mark.parametrize("path", sorted(docs.GENERATED))
def test_generated_reference_is_current(path: str) -> None:
    file = ROOT / path
    assert file.exists(), f"{path} is missing: run {docs.REGENERATE}"
    assert file.read_text() == docs.GENERATED[path](), f"{path} is stale: run {docs.REGENERATE}"


@pytest.mark.parametrize("field", sorted(docs.MAPPING_FIELDS))
def test_each_documented_mapping_field_is_accepted(field: str) -> None:
    mapping = {"deviceClassName": "gpu.nvidia.com", field: docs.MAPPING_EXAMPLES[field]}
    parse_policy({"mappings": {"nvidia.com/gpu": mapping}})


def test_an_undocumented_mapping_field_is_refused() -> None:
    with pytest.raises(PolicyError, match="unknown field"):
        parse_policy({"mappings": {"nvidia.com/gpu": {"deviceClassName": "x", "other": 1}}})


def test_the_docs_command_says_what_is_stale(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(docs, "stale", lambda: ["docs/reference/cli.md"])
    assert docs.main([]) == 1
    assert capsys.readouterr().err == (f"docs/reference/cli.md is stale: run {docs.REGENERATE}\n")

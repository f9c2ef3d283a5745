"""The bad-input corpus (tests/fuzz/corpus): files named by the outcome they must get."""

from __future__ import annotations

from pathlib import Path

CORPUS = Path(__file__).resolve().parents[1] / "fuzz" / "corpus"
CORPUS_POLICY = CORPUS / "policy.yaml"  # the default policy, migration enabled by default


def corpus(endpoint: str) -> list[Path]:
    """The corpus files for `endpoint`, named `<outcome>--<what>.<ext>`."""
    return sorted((CORPUS / endpoint).iterdir())


def outcome_of(path: Path) -> str:
    return path.name.split("--", 1)[0]

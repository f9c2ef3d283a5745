"""What a test does when a tool it needs is missing: fail in CI, skip (with why) elsewhere."""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Literal, NoReturn

import pytest

from tests.support.controlplane import BUILD_HINT


def missing(message: str) -> NoReturn:
    if os.environ.get("CI") == "true":
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def missing_tools(
    bin_dir: Path, missing: Sequence[str], *, go: bool, ci: bool
) -> tuple[Literal["skip", "fail"], str] | None:
    """What to do when binaries are missing: skipping is allowed only where they cannot be
    built (no Go) and CI is not checking; otherwise a stale .bin would hide the tests."""
    if not missing:
        return None
    names = f"{', '.join(missing)} missing in {bin_dir}"
    if go:
        return "fail", f"{names}: run `bash {BUILD_HINT}`"
    return ("fail" if ci else "skip"), f"Go is not installed to build the control plane: {names}"


def require_tools(bin_dir: Path, missing: Sequence[str]) -> None:
    """Skip or fail, as missing_tools says for this machine, when a binary is missing."""
    verdict = missing_tools(
        bin_dir, missing, go=shutil.which("go") is not None, ci=os.environ.get("CI") == "true"
    )
    if verdict is not None:
        action, message = verdict
        if action == "skip":
            pytest.skip(message)
        pytest.fail(message, pytrace=False)

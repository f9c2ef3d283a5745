"""The release workflow: actionlint-clean (actionlint built from the Go module proxy on first
use), and it publishes what a user installs: both architectures, with SBOM and provenance,
the chart as an OCI artifact, the version checked against the tag."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.controlplane import find_bin_dir
from tests.support.tools import missing

ROOT = Path(__file__).resolve().parents[2]
RELEASE = ROOT / ".github" / "workflows" / "release.yml"
ACTIONLINT = "github.com/rhysd/actionlint/cmd/actionlint@v1.7.12"


@pytest.fixture(scope="module")
def actionlint() -> Path:
    binary = find_bin_dir() / "actionlint"
    if not os.access(binary, os.X_OK):
        go = shutil.which("go")
        if go is None:
            missing(f"Go is not installed to build actionlint ({ACTIONLINT})")
        env = {**os.environ, "GOBIN": str(binary.parent)}
        subprocess.run([go, "install", ACTIONLINT], check=True, env=env, capture_output=True)
    return binary


def lint(actionlint: Path, *files: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(actionlint), "-no-color", *map(str, files)], capture_output=True, text=True
    )


def test_the_workflows_are_actionlint_clean(actionlint: Path) -> None:
    workflows = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
    assert workflows == [RELEASE]
    done = lint(actionlint, *workflows)
    assert done.returncode == 0, done.stdout + done.stderr


def test_actionlint_would_catch_a_mistake(actionlint: Path, tmp_path: Path) -> None:
    bad = tmp_path / ".github" / "workflows" / "release.yml"
    bad.parent.mkdir(parents=True)
    bad.write_text(RELEASE.read_text().replace("${{ env.IMAGE }}", "${{ env.IMAGE }"))
    done = lint(actionlint, bad)
    assert done.returncode != 0 and "release.yml" in done.stdout


def test_a_tag_publishes_the_image_for_both_architectures_and_the_chart() -> None:
    workflow: dict[Any, Any] = yaml.safe_load(RELEASE.read_text())
    assert workflow[True] == {"push": {"tags": ["v*"]}}  # PyYAML reads the key `on` as True
    steps = workflow["jobs"]["release"]["steps"]
    build = next(s for s in steps if str(s.get("uses", "")).startswith("docker/build-push"))
    assert build["with"]["platforms"] == "linux/amd64,linux/arm64"
    assert build["with"]["sbom"] is True and build["with"]["provenance"] == "mode=max"
    assert "REVISION=${{ github.sha }}" in build["with"]["build-args"]
    script = "\n".join(str(s.get("run", "")) for s in steps)
    assert '"$GITHUB_REF_NAME" != "v$version"' in script  # the tag is the version
    assert 'helm push "dist/gpu2dra-$VERSION.tgz" "$CHARTS"' in script

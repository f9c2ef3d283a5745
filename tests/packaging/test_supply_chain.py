"""What a release is made from, and what a user can check: every action pinned by commit, the
tests run before anything is published, the image and the chart signed keyless."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
RELEASE = ROOT / ".github" / "workflows" / "release.yml"
# owner/repo[/path]@<a full commit> # <the tag it was>
PINNED = re.compile(r"^[\w.-]+/[\w.-]+(/[\w./-]+)?@[0-9a-f]{40}$")


def release_jobs() -> dict[str, Any]:
    jobs: dict[str, Any] = yaml.safe_load(RELEASE.read_text())["jobs"]
    return jobs


def test_every_action_is_pinned_by_commit() -> None:
    assert WORKFLOWS
    for workflow in WORKFLOWS:
        for job in yaml.safe_load(workflow.read_text())["jobs"].values():
            for step in job["steps"]:
                if "uses" in step:
                    assert PINNED.match(step["uses"]), f"{workflow.name}: {step['uses']}"


def test_each_pin_names_the_tag_it_was() -> None:
    for workflow in WORKFLOWS:
        for line in workflow.read_text().splitlines():
            if "uses:" in line:
                assert re.search(r"@[0-9a-f]{40} # v\d+(\.\d+)*$", line), line


def test_the_release_runs_the_test_command_first() -> None:
    jobs = release_jobs()
    assert jobs["release"]["needs"] == "test"
    runs = [step.get("run") for step in jobs["test"]["steps"]]
    assert ".ci/run" in runs
    assert "bash tests/run.sh" in (ROOT / ".ci" / "run").read_text()


def test_the_image_and_the_chart_are_signed_keyless_by_digest() -> None:
    job = release_jobs()["release"]
    assert job["permissions"]["id-token"] == "write"
    script = "\n".join(str(step.get("run", "")) for step in job["steps"])
    assert 'cosign sign --yes "$IMAGE@$DIGEST"' in script
    assert 'cosign sign --yes "${CHARTS#oci://}/gpu2dra@$digest"' in script
    (image,) = [s for s in job["steps"] if s.get("id") == "image"]
    sign = next(s for s in job["steps"] if "$IMAGE@$DIGEST" in str(s.get("run", "")))
    assert sign["env"]["DIGEST"] == "${{ steps.image.outputs.digest }}"
    assert image["with"]["push"] is True


def test_the_install_guide_says_how_to_verify_both() -> None:
    guide = (ROOT / "docs" / "getting-started" / "install.md").read_text()
    identity = "https://github.com/gpu2dra/gpu2dra/.github/workflows/release.yml@refs/tags/v"
    assert guide.count("cosign verify") >= 2
    assert identity in guide
    assert "--certificate-oidc-issuer https://token.actions.githubusercontent.com" in guide


def test_every_pin_the_image_installs_carries_its_hashes() -> None:
    text = (ROOT / "constraints.txt").read_text().replace("\\\n", " ")
    entries = [line.split() for line in text.splitlines() if line and not line.startswith("#")]
    assert len(entries) >= 50
    for name, *hashes in entries:
        assert "==" in name and hashes, name
        assert all(re.fullmatch(r"--hash=sha256:[0-9a-f]{64}", h) for h in hashes), name
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "--require-hashes -r constraints.txt" in dockerfile
    assert "--no-deps --no-build-isolation ." in dockerfile  # no unhashed build dependencies


def test_gpu2dra_is_built_with_the_setuptools_the_image_hashes() -> None:
    (requires,) = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    assert requires.startswith("setuptools==")
    assert requires in (ROOT / "constraints.txt").read_text()


def test_the_release_builds_on_the_base_by_digest() -> None:
    """The base's tag is resolved to a digest once, checked, and passed as BASE: the image's
    two stages and its org.opencontainers.image.base.name label name that digest."""
    steps = release_jobs()["release"]["steps"]
    (resolve,) = [s for s in steps if "imagetools inspect" in str(s.get("run", ""))]
    assert "sed -n 's/^ARG BASE=//p' Dockerfile" in resolve["run"]
    assert '[[ "$digest" =~ ^sha256:[0-9a-f]{64}$ ]]' in resolve["run"]
    assert 'echo "BASE=$base@$digest" >> "$GITHUB_ENV"' in resolve["run"]
    (image,) = [s for s in steps if s.get("id") == "image"]
    assert "BASE=${{ env.BASE }}" in image["with"]["build-args"].splitlines()
    assert steps.index(resolve) < steps.index(image)

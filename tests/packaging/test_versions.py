"""One version, said the same everywhere: pyproject.toml's, which the chart, the image's pinned
dependencies and `gpu2dra --version` agree with."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def pins() -> dict[str, str]:
    """constraints.txt as {canonical name: version}."""
    found: dict[str, str] = {}
    text = (ROOT / "constraints.txt").read_text().replace("\\\n", " ")
    for line in text.splitlines():
        line = line.split("#", 1)[0].split(" --hash=")[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"constraints.txt: {line!r} is not pinned with =="
            found[canonicalize_name(name)] = version
    return found


def test_the_chart_ships_the_package_version() -> None:
    chart = yaml.safe_load((ROOT / "charts" / "gpu2dra" / "Chart.yaml").read_text())
    assert chart["version"] == chart["appVersion"] == PROJECT["version"]


def test_gpu2dra_version_says_what_runs() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "app", "--version"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={"GPU2DRA_REVISION": "0123abc", "PATH": ""},
    )
    assert done.stdout == f"gpu2dra {PROJECT['version']} (0123abc)\n"


def test_the_image_pins_every_runtime_dependency_within_its_range() -> None:
    pinned = pins()
    for spec in PROJECT["dependencies"]:
        requirement = Requirement(spec)
        name = canonicalize_name(requirement.name)
        assert name in pinned, f"constraints.txt does not pin {requirement.name}"
        assert requirement.specifier.contains(pinned[name]), (
            f"constraints.txt pins {name}=={pinned[name]}, outside {requirement.specifier}"
        )
        for extra in requirement.extras:  # uvicorn[standard]: its extras' packages too
            assert extra == "standard" and {"uvloop", "httptools"} <= pinned.keys()


def test_the_dockerfile_installs_the_pins_before_the_sources() -> None:
    text = (ROOT / "Dockerfile").read_text()
    order = [
        text.index("COPY constraints.txt"),
        text.index("pip install --no-cache-dir --require-hashes -r constraints.txt"),
        text.index("COPY app ./app"),
        text.index("pip install --no-cache-dir --no-deps --no-build-isolation ."),
    ]
    assert order == sorted(order), "dependencies first, in a layer app/ changes do not touch"
    labels = set(re.findall(r"org\.opencontainers\.image\.(\w+)=", text))
    assert {"source", "version", "revision"} <= labels

"""`helm template` of the chart with values files, and the example setups of its ci/ folder:
one `<setup>-values.yaml` per supported setup, each rendered and validated by the tests."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.support.webhook import CHART, RELEASE_NAMESPACE

Obj = dict[str, Any]
CI_DIR = CHART / "ci"
CI_VALUES = {p.name.removesuffix("-values.yaml"): p for p in sorted(CI_DIR.glob("*-values.yaml"))}


def helm_template(
    helm: Path, *sets: str, files: tuple[Path, ...] = (), namespace: str = RELEASE_NAMESPACE
) -> list[Obj]:
    """The chart's objects with the values `files` and `--set` values, in that order."""
    args = [str(helm), "template", "gpu2dra", str(CHART), "--namespace", namespace]
    for path in files:
        args += ["--values", str(path)]
    for value in sets:
        args += ["--set", value]
    done = subprocess.run(args, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise AssertionError(f"helm template failed: {done.stderr.strip()}")
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def render_setup(helm: Path, setup: str, *sets: str) -> list[Obj]:
    """The chart's objects for the setup of ci/<setup>-values.yaml."""
    return helm_template(helm, *sets, files=(CI_VALUES[setup],))


def setup_values(setup: str) -> Obj:
    values: Obj = yaml.safe_load(CI_VALUES[setup].read_text()) or {}
    return values

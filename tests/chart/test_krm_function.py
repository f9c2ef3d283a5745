"""`gpu2dra translate` as a KRM exec function of the standalone kustomize (built by
tests/kustomize/build.sh): a transformer whose functionConfig names it, run by `kustomize build
--enable-alpha-plugins --enable-exec`, translates the build's pods and adds their templates."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.controlplane import REPO_ROOT, find_bin_dir
from tests.support.tools import missing

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: infer   # the model server
spec:
  replicas: 2
  selector: {matchLabels: {app: infer}}
  template:
    metadata: {labels: {app: infer}}
    spec:
      containers:
      - name: server
        image: server:1
        resources:
          limits:
            nvidia.com/gpu: 1
"""
POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: train
spec:
  restartPolicy: Never
  containers:
  - name: trainer
    image: trainer:1
    resources:
      limits:
        nvidia.com/gpu: 2
"""
CLONESET = """\
apiVersion: apps.kruise.io/v1alpha1
kind: CloneSet
metadata: {name: cs}
spec:
  template:
    spec:
      containers:
      - {name: c, image: i, resources: {limits: {nvidia.com/gpu: 1}}}
"""
# As docs/getting-started/gitops.md shows it: gpu2dra found on the PATH, `translate` its
# argument, its settings in data.
FUNCTION = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: gpu2dra
  annotations:
    config.kubernetes.io/function: |
      exec:
        path: gpu2dra
        args: [translate]
data:
  mode: enabled
"""


@pytest.fixture(scope="module")
def kustomize() -> Path:
    binary = find_bin_dir() / "kustomize" / "kustomize"
    if not os.access(binary, os.X_OK):
        where = f"kustomize/kustomize missing in {find_bin_dir()}"
        if shutil.which("go") is not None:
            pytest.fail(f"{where}: run `bash tests/kustomize/build.sh`", pytrace=False)
        missing(f"Go is not installed to build kustomize: {where}")
    return binary


@pytest.fixture
def path_with_gpu2dra(tmp_path: Path) -> str:
    """A PATH whose `gpu2dra` is this checkout's, as `pip install gpu2dra` would put one."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "gpu2dra"
    script.write_text(f'#!/bin/sh\ncd {REPO_ROOT} && exec {sys.executable} -m app "$@"\n')
    script.chmod(0o755)
    return f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"


def _overlay(root: Path, *resources: tuple[str, str], function: str | None = FUNCTION) -> Path:
    root.mkdir()
    names = [name for name, _ in resources]
    lines = ["namespace: ml", f"resources: [{', '.join(names)}]"]
    if function is not None:
        lines.append("transformers: [gpu2dra.yaml]")
        (root / "gpu2dra.yaml").write_text(function)
    (root / "kustomization.yaml").write_text("\n".join(lines) + "\n")
    for name, text in resources:
        (root / name).write_text(text)
    return root


def _build(kustomize: Path, root: Path, path: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(kustomize), "build", "--enable-alpha-plugins", "--enable-exec", str(root)],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PATH": path},
    )


def test_kustomize_runs_translate_as_a_transformer_and_keeps_its_templates(
    kustomize: Path, path_with_gpu2dra: str, tmp_path: Path
) -> None:
    resources = (("deployment.yaml", DEPLOYMENT), ("pod.yaml", POD))
    built = _build(kustomize, _overlay(tmp_path / "fn", *resources), path_with_gpu2dra)
    assert built.returncode == 0, built.stderr
    docs = list(yaml.safe_load_all(built.stdout))
    kinds = sorted((d["kind"], d["metadata"]["name"]) for d in docs)
    templates = [d for d in docs if d["kind"] == "ResourceClaimTemplate"]
    assert [k for k, _ in kinds] == ["Deployment", "Pod", *["ResourceClaimTemplate"] * 2]
    assert {t["metadata"]["namespace"] for t in templates} == {"ml"}
    named = {t["metadata"]["name"] for t in templates}
    [deployment] = [d for d in docs if d["kind"] == "Deployment"]
    [pod] = [d for d in docs if d["kind"] == "Pod"]
    for spec in (deployment["spec"]["template"]["spec"], pod["spec"]):
        [claim] = spec["resourceClaims"]
        assert claim["resourceClaimTemplateName"] in named
        assert "nvidia.com/gpu" not in spec["containers"][0]["resources"].get("limits", {})
    # kustomize's own bookkeeping annotations do not leak into what it writes.
    assert "config.kubernetes.io" not in built.stdout and "config.k8s.io" not in built.stdout
    # The same objects as the plain build piped through `gpu2dra translate`.
    plain = _build(kustomize, _overlay(tmp_path / "plain", *resources, function=None), "")
    assert plain.returncode == 0, plain.stderr
    piped = subprocess.run(
        [sys.executable, "-m", "app", "translate"],
        input=plain.stdout,
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO_ROOT,
    )
    key = lambda d: (d["kind"], d["metadata"]["name"])  # noqa: E731
    assert sorted(docs, key=key) == sorted(yaml.safe_load_all(piped.stdout), key=key)
    assert "warning: document 1 (Deployment infer): toleration" in built.stderr


def test_a_strict_function_fails_the_build_and_says_why(
    kustomize: Path, path_with_gpu2dra: str, tmp_path: Path
) -> None:
    strict = FUNCTION.replace("  mode: enabled\n", '  mode: enabled\n  strict: "true"\n')
    root = _overlay(tmp_path / "fn", ("pod.yaml", POD), ("cs.yaml", CLONESET), function=strict)
    built = _build(kustomize, root, path_with_gpu2dra)
    assert built.returncode != 0
    assert "gpu2dra: 2 documents: 1 translated, 1 left (no-rule 1), 0 unchanged" in built.stderr
    assert "exit status 3" in built.stderr

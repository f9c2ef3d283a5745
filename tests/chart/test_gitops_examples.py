"""examples/gitops, as docs/getting-started/gitops.md tells each tool to use it, with the
standalone kustomize (tests/kustomize/build.sh) and helm: Argo CD's Config Management Plugin
(its generate command run as written, with the variables Argo CD sets), the CI render Flux
syncs (and that the committed render is current), the overlay with gpu2dra as a KRM function,
and that same overlay failing where plugins are off, as in Flux."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.controlplane import REPO_ROOT, find_bin_dir
from tests.support.tools import missing

GITOPS = REPO_ROOT / "examples" / "gitops"
DOC = REPO_ROOT / "docs" / "getting-started" / "gitops.md"
CHART = {
    "Chart.yaml": "apiVersion: v2\nname: serve\nversion: 0.1.0\n",
    "templates/deployment.yaml": (GITOPS / "base" / "inference.yaml")
    .read_text()
    .replace("name: inference", "name: {{ .Release.Name }}"),
}


@pytest.fixture(scope="module")
def tools(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A PATH with kustomize, helm and this checkout's gpu2dra, as the plugin's sidecar and CI
    have them, and a HOME of their own for helm's caches."""
    bin_dir = find_bin_dir()
    kustomize, helm = bin_dir / "kustomize" / "kustomize", bin_dir / "helm"
    absent = [str(p) for p in (kustomize, helm) if not os.access(p, os.X_OK)]
    if absent:
        where = f"{', '.join(absent)} missing"
        if shutil.which("go") is not None:
            hint = "bash tests/kustomize/build.sh && bash tests/k8s/build.sh"
            pytest.fail(f"{where}: run `{hint}`", pytrace=False)
        missing(f"Go is not installed to build kustomize and helm: {where}")
    path = tmp_path_factory.mktemp("bin")
    (path / "kustomize").symlink_to(kustomize)
    (path / "helm").symlink_to(helm)
    script = path / "gpu2dra"
    script.write_text(f'#!/bin/sh\ncd {REPO_ROOT} && exec {sys.executable} -m app "$@"\n')
    script.chmod(0o755)
    home = tmp_path_factory.mktemp("home")
    return {"PATH": f"{path}{os.pathsep}{os.environ.get('PATH', '')}", "HOME": str(home)}


def _run(
    command: list[str], cwd: Path, tools: dict[str, str], **env: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command,
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **tools, **env},
    )


def _translated(stdout: str, namespace: str) -> list[Any]:
    """The documents, checked: every pod spec names a template among them, in `namespace`,
    and asks for no nvidia.com/gpu."""
    docs = [d for d in yaml.safe_load_all(stdout) if d]
    templates = {
        d["metadata"]["name"]
        for d in docs
        if d["kind"] == "ResourceClaimTemplate" and d["metadata"]["namespace"] == namespace
    }
    for doc in docs:
        if doc["kind"] == "ResourceClaimTemplate":
            continue
        spec = doc["spec"]["template"]["spec"]
        assert {c["resourceClaimTemplateName"] for c in spec["resourceClaims"]} <= templates
        assert "nvidia.com/gpu" not in str(spec["containers"])
    return docs


def _plugin_command() -> list[str]:
    """The plugin's generate command as docs/getting-started/gitops.md shows it."""
    blocks = re.findall(r"```yaml\n(.*?)```", DOC.read_text(), re.DOTALL)
    [plugin] = [yaml.safe_load(b) for b in blocks if "kind: ConfigManagementPlugin" in b]
    generate = plugin["spec"]["generate"]
    return [*generate["command"], *generate["args"]]


ARGO_ENV = {"ARGOCD_APP_NAME": "ml-prod", "ARGOCD_APP_NAMESPACE": "ml-prod"}


def test_the_argo_cd_plugin_renders_the_overlay_translated(tools: dict[str, str]) -> None:
    done = _run(_plugin_command(), GITOPS / "overlays" / "prod", tools, **ARGO_ENV)
    assert done.returncode == 0, done.stderr
    docs = _translated(done.stdout, "ml-prod")
    kinds = sorted(d["kind"] for d in docs)
    assert kinds == ["Deployment", "Job", "ResourceClaimTemplate", "ResourceClaimTemplate"]


def test_the_argo_cd_plugin_renders_a_chart_translated(
    tools: dict[str, str], tmp_path: Path
) -> None:
    for name, text in CHART.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    done = _run(_plugin_command(), tmp_path, tools, **ARGO_ENV)
    assert done.returncode == 0, done.stderr
    docs = _translated(done.stdout, "ml-prod")
    assert [d["kind"] for d in docs] == ["ResourceClaimTemplate", "Deployment"]
    assert docs[1]["metadata"]["name"] == "ml-prod"  # the release is the Application's name


def test_the_argo_cd_plugin_fails_the_sync_for_a_gpu_pod_left(
    tools: dict[str, str], tmp_path: Path
) -> None:
    (tmp_path / "kustomization.yaml").write_text("resources: [cs.yaml]\n")
    (tmp_path / "cs.yaml").write_text(
        "apiVersion: apps.kruise.io/v1alpha1\nkind: CloneSet\nmetadata: {name: cs}\nspec:\n"
        "  template:\n    spec:\n      containers:\n"
        "      - {name: c, image: i, resources: {limits: {nvidia.com/gpu: 1}}}\n"
    )
    done = _run(_plugin_command(), tmp_path, tools, **ARGO_ENV)
    assert done.returncode == 3
    assert "1 document: 0 translated, 1 left (no-rule 1), 0 unchanged" in done.stderr


def test_the_ci_render_flux_syncs_is_translated_and_committed(
    tools: dict[str, str], tmp_path: Path
) -> None:
    done = _run(["bash", str(GITOPS / "render.sh"), str(tmp_path)], tmp_path, tools)
    assert done.returncode == 0, done.stderr
    rendered = (tmp_path / "manifests.yaml").read_text()
    _translated(rendered, "ml-prod")
    # What Flux syncs is the render as CI commits it: the same, byte for byte.
    assert rendered == (GITOPS / "deploy" / "prod" / "manifests.yaml").read_text()
    flux = yaml.safe_load((GITOPS / "flux" / "kustomization.yaml").read_text())
    assert (REPO_ROOT / flux["spec"]["path"]) == GITOPS / "deploy" / "prod"


def test_the_krm_overlay_translates_under_kustomize_and_fails_with_plugins_off(
    tools: dict[str, str],
) -> None:
    overlay = GITOPS / "overlays" / "krm"
    flags = ["--enable-alpha-plugins", "--enable-exec"]
    done = _run(["kustomize", "build", *flags, "."], overlay, tools)
    assert done.returncode == 0, done.stderr
    prod = _run(["kustomize", "build", "."], GITOPS / "overlays" / "prod", tools)
    expected = subprocess.run(
        [sys.executable, "-m", "app", "translate"],
        input=prod.stdout.replace("ml-prod", "ml-krm"),
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO_ROOT,
    )
    key = lambda d: (d["kind"], d["metadata"]["name"])  # noqa: E731
    assert sorted(_translated(done.stdout, "ml-krm"), key=key) == sorted(
        yaml.safe_load_all(expected.stdout), key=key
    )
    # As Flux's kustomize-controller builds it: built-in plugins only.
    off = _run(["kustomize", "build", "."], overlay, tools)
    assert off.returncode != 0
    assert "external plugins disabled; unable to load external plugin 'ConfigMap'" in off.stderr

"""`gpu2dra translate` where charts and overlays are rendered: as Helm's post-renderer (`helm
template --post-renderer gpu2dra`, with no arguments, pipes the rendered chart through gpu2dra,
which then translates stdin to stdout; `--post-renderer-args translate` and its options say
more), and after `kubectl kustomize`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from tests.support.controlplane import REPO_ROOT, find_bin_dir

CHART_YAML = "apiVersion: v2\nname: app\nversion: 0.1.0\n"
TRAIN = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: {{ .Release.Name }}-train
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: trainer
        image: trainer:1
        resources:
          limits:
            nvidia.com/gpu: {{ .Values.gpus }}
"""
CONFIG = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-config   # named after the release
data:
  a: "1"
"""
# A template that renders nothing: Helm still writes its `---` and `# Source:` line.
OPTIONAL = "{{- if .Values.hpa }}\napiVersion: v1\nkind: Service\n{{- end }}\n"


def _helm(helm: Path, chart: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(helm), "template", "rel", str(chart), "--set", "gpus=2", *args],
        capture_output=True,
        text=True,
        check=False,
    )


def test_helm_post_renderer_translates_the_chart_and_leaves_the_rest_as_rendered(
    helm: Path, tmp_path: Path
) -> None:
    chart = tmp_path / "app"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text(CHART_YAML)
    (chart / "templates" / "config.yaml").write_text(CONFIG)
    (chart / "templates" / "optional.yaml").write_text(OPTIONAL)
    (chart / "templates" / "train.yaml").write_text(TRAIN)
    renderer = tmp_path / "gpu2dra"  # what `pip install gpu2dra` puts on the PATH
    renderer.write_text(f'#!/bin/sh\ncd {REPO_ROOT} && exec {sys.executable} -m app "$@"\n')
    renderer.chmod(0o755)

    plain = _helm(helm, chart)
    assert plain.returncode == 0, plain.stderr
    done = _helm(helm, chart, "--post-renderer", str(renderer), "--post-renderer-args", "translate")
    assert done.returncode == 0, done.stderr
    docs = [d for d in yaml.safe_load_all(done.stdout) if d]
    # The template first: `helm install` creates it before the Job that uses it.
    assert [d["kind"] for d in docs] == ["ResourceClaimTemplate", "ConfigMap", "Job"]
    [template] = [d for d in docs if d["kind"] == "ResourceClaimTemplate"]
    pod = docs[2]["spec"]["template"]["spec"]
    assert pod["resourceClaims"][0]["resourceClaimTemplateName"] == template["metadata"]["name"]
    assert "nvidia.com/gpu" not in pod["containers"][0]["resources"].get("limits", {})
    # The ConfigMap comes back as Helm rendered it, its comment kept.
    config = plain.stdout.split("# Source: app/templates/config.yaml\n")[1].split("---")[0]
    assert config in done.stdout and "# named after the release" in config


def test_helm_post_renderer_with_no_arguments(helm: Path, tmp_path: Path) -> None:
    """`--post-renderer gpu2dra` alone, as Helm 3 documents post-renderers: gpu2dra, run with
    no arguments and the rendered chart on stdin, translates it with the default policy."""
    chart = tmp_path / "app"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text(CHART_YAML)
    (chart / "templates" / "config.yaml").write_text(CONFIG)
    (chart / "templates" / "train.yaml").write_text(TRAIN)
    renderer = tmp_path / "gpu2dra"
    renderer.write_text(f'#!/bin/sh\ncd {REPO_ROOT} && exec {sys.executable} -m app "$@"\n')
    renderer.chmod(0o755)
    done = _helm(helm, chart, "--post-renderer", str(renderer))
    assert done.returncode == 0, done.stderr
    docs = [d for d in yaml.safe_load_all(done.stdout) if d]
    assert [d["kind"] for d in docs] == ["ResourceClaimTemplate", "ConfigMap", "Job"]
    pod = docs[2]["spec"]["template"]["spec"]
    assert pod["resourceClaims"][0]["resourceClaimTemplateName"] == docs[0]["metadata"]["name"]


def test_helm_fails_with_strict_when_a_gpu_pod_would_be_left(helm: Path, tmp_path: Path) -> None:
    chart = tmp_path / "app"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text(CHART_YAML)
    (chart / "templates" / "cloneset.yaml").write_text(
        "apiVersion: apps.kruise.io/v1alpha1\nkind: CloneSet\nmetadata: {name: cs}\nspec:\n"
        "  template:\n    spec:\n      containers:\n"
        "      - {name: c, image: i, resources: {limits: {nvidia.com/gpu: 1}}}\n"
    )
    renderer = tmp_path / "gpu2dra"
    renderer.write_text(f'#!/bin/sh\ncd {REPO_ROOT} && exec {sys.executable} -m app "$@"\n')
    renderer.chmod(0o755)
    args = ("--post-renderer", str(renderer), "--post-renderer-args", "translate")
    assert _helm(helm, chart, *args).returncode == 0
    done = _helm(helm, chart, *args, "--post-renderer-args=--strict")
    assert done.returncode != 0
    assert "1 document: 0 translated, 1 left (no-rule 1), 0 unchanged" in done.stderr


def test_a_kustomize_build_piped_through_translate(tmp_path: Path) -> None:
    """`kubectl kustomize DIR | gpu2dra translate`: kustomize's own output, read from stdin."""
    kubectl = sorted(find_bin_dir().glob("v*/kubectl"))[-1]
    base = tmp_path / "base"
    base.mkdir()
    (base / "kustomization.yaml").write_text(
        "namespace: ml\ncommonLabels: {team: a}\nresources: [job.yaml]\n"
    )
    (base / "job.yaml").write_text(
        TRAIN.replace("{{ .Release.Name }}", "x").replace("{{ .Values.gpus }}", "2")
    )
    built = subprocess.run(
        [str(kubectl), "kustomize", str(base)], capture_output=True, text=True, check=True
    )
    done = subprocess.run(
        [sys.executable, "-m", "app", "translate"],
        input=built.stdout,
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO_ROOT,
    )
    docs = [d for d in yaml.safe_load_all(done.stdout) if d]
    assert [d["kind"] for d in docs] == ["ResourceClaimTemplate", "Job"]
    assert docs[0]["metadata"]["namespace"] == "ml"

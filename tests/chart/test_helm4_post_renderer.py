"""gpu2dra as a Helm 4 post-renderer: Helm 4's `--post-renderer` names a plugin, no longer an
executable, so helm-plugin/ is one (type postrenderer/v1) that pipes the rendered chart
through `gpu2dra translate -f -`. Installed into a real Helm 4 (tests/k8s/build.sh builds it as
helm4) and run by `helm template`, with and without `--post-renderer-args`."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from tests.support.controlplane import REPO_ROOT, find_bin_dir
from tests.support.tools import require_tools

PLUGIN = REPO_ROOT / "helm-plugin"
JOB = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: train
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


@pytest.fixture
def helm4(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """Helm 4 with gpu2dra's plugin installed in a home of its own, and gpu2dra on the PATH."""
    bin_dir = find_bin_dir()
    require_tools(bin_dir, [] if os.access(bin_dir / "helm4", os.X_OK) else ["helm4"])
    env = {
        **os.environ,
        "HELM_DATA_HOME": str(tmp_path / "data"),
        "HELM_CONFIG_HOME": str(tmp_path / "config"),
        "HELM_CACHE_HOME": str(tmp_path / "cache"),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    env.pop("HELM_PLUGINS", None)
    helm = bin_dir / "helm4"
    done = subprocess.run(
        [str(helm), "plugin", "install", str(PLUGIN)], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return helm, env


def render(helm4: tuple[Path, dict[str, str]], chart: Path, *args: str) -> list[dict[str, object]]:
    helm, env = helm4
    done = subprocess.run(
        [str(helm), "template", "rel", str(chart), "--set", "gpus=2", *args],
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def chart(tmp_path: Path) -> Path:
    root = tmp_path / "app"
    (root / "templates").mkdir(parents=True)
    (root / "Chart.yaml").write_text("apiVersion: v2\nname: app\nversion: 0.1.0\n")
    (root / "templates" / "job.yaml").write_text(JOB)
    return root


def test_the_plugin_translates_what_the_chart_renders(
    helm4: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    helm, env = helm4
    listed = subprocess.run(
        [str(helm), "plugin", "list"], env=env, capture_output=True, text=True, check=True
    )
    assert "gpu2dra" in listed.stdout and "postrenderer/v1" in listed.stdout
    docs = render(helm4, chart(tmp_path), "--post-renderer", "gpu2dra")
    kinds = sorted(str(d["kind"]) for d in docs)
    assert kinds == ["Job", "ResourceClaimTemplate"]
    (job,) = [d for d in docs if d["kind"] == "Job"]
    spec = job["spec"]["template"]["spec"]  # type: ignore[index]
    assert spec["resourceClaims"][0]["resourceClaimTemplateName"].startswith("gpu2dra-gpu-x2-")
    assert "limits" not in spec["containers"][0]["resources"]


def test_post_renderer_args_reach_gpu2dra(
    helm4: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    """--post-renderer-args are translate's options: a pod gpu2dra leaves (a node label that
    picks shared GPUs) renders as written, and fails the render under --strict (Helm 4 shows
    a plugin's exit, not its stderr)."""
    root = chart(tmp_path)
    text = (root / "templates" / "job.yaml").read_text()
    (root / "templates" / "job.yaml").write_text(
        text.replace(
            "      restartPolicy: Never\n",
            "      restartPolicy: Never\n"
            "      nodeSelector: {nvidia.com/gpu.sharing-strategy: time-slicing}\n",
        )
    )
    (job,) = render(helm4, root, "--post-renderer", "gpu2dra")
    assert "resourceClaims" not in job["spec"]["template"]["spec"]  # type: ignore[index]
    helm, env = helm4
    done = subprocess.run(
        [
            *(str(helm), "template", "rel", str(root), "--set", "gpus=2"),
            *("--post-renderer", "gpu2dra", "--post-renderer-args", "--strict"),
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0
    assert 'plugin "gpu2dra" exited with error' in done.stderr


def test_the_plugin_carries_the_version_pyproject_says() -> None:
    plugin = yaml.safe_load((PLUGIN / "plugin.yaml").read_text())
    version = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert (plugin["name"], plugin["type"], plugin["version"]) == (
        "gpu2dra",
        "postrenderer/v1",
        version,
    )
    assert plugin["runtimeConfig"]["platformCommand"] == [
        {"command": "gpu2dra", "args": ["translate", "-f", "-"]}
    ]

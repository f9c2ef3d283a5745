"""examples/: what the docs show of them is what they hold, and each translates as it says."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def _blocks(page: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", (ROOT / page).read_text(), re.DOTALL)


def test_the_argo_cd_plugin_in_the_docs_is_the_example_and_reads_as_one() -> None:
    """docs/getting-started/gitops.md shows examples/gitops/argocd/plugin.yaml whole (its
    generate command is run as written in tests/chart/test_gitops_examples.py)."""
    plugin = (EXAMPLES / "gitops" / "argocd" / "plugin.yaml").read_text()
    assert plugin in _blocks("docs/getting-started/gitops.md", "yaml")
    found = yaml.safe_load(plugin)
    assert (found["apiVersion"], found["kind"]) == (
        "argoproj.io/v1alpha1",
        "ConfigManagementPlugin",
    )
    assert "discover" not in found["spec"]  # only Applications that name it use it
    generate = found["spec"]["generate"]
    assert generate["command"] == ["bash", "-c"] and len(generate["args"]) == 1
    assert "gpu2dra translate --strict" in generate["args"][0]
    application = yaml.safe_load((EXAMPLES / "gitops" / "argocd" / "application.yaml").read_text())
    assert application["spec"]["source"]["plugin"] == {"name": found["metadata"]["name"]}
    assert (ROOT / application["spec"]["source"]["path"] / "kustomization.yaml").is_file()

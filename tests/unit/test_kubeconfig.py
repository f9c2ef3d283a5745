"""The kubeconfig context a command uses, and the namespace it defaults to, as kubectl's."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from app.kubeconfig import Kubeconfig, NoCluster, api_client, context_namespace

KUBECONFIG = {
    "apiVersion": "v1",
    "kind": "Config",
    "clusters": [
        {"name": "a", "cluster": {"server": "https://127.0.0.1:6443"}},
        {"name": "b", "cluster": {"server": "https://10.0.0.2:6443"}},
    ],
    "users": [{"name": "u", "user": {"token": "t"}}],
    "contexts": [
        {"name": "lab", "context": {"cluster": "a", "user": "u", "namespace": "ml"}},
        {"name": "prod", "context": {"cluster": "b", "user": "u"}},
    ],
    "current-context": "lab",
}


@pytest.fixture
def kubeconfig(tmp_path: Path) -> Path:
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(KUBECONFIG))
    return path


def test_the_context_named_is_the_one_used(kubeconfig: Path) -> None:
    assert api_client(kubeconfig).configuration.host == "https://127.0.0.1:6443"
    assert api_client(kubeconfig, context="prod").configuration.host == "https://10.0.0.2:6443"


def test_a_context_the_kubeconfig_lacks_is_one_line(kubeconfig: Path) -> None:
    with pytest.raises(NoCluster, match=r"has no context named 'staging'$"):
        api_client(kubeconfig, context="staging")


@pytest.mark.parametrize(
    ("context", "namespace"), [(None, "ml"), ("lab", "ml"), ("prod", "default")]
)
def test_the_namespace_is_the_contexts(
    kubeconfig: Path, context: str | None, namespace: str
) -> None:
    assert context_namespace(Kubeconfig(kubeconfig, context)) == namespace


def test_no_kubeconfig_is_namespace_default(tmp_path: Path) -> None:
    assert context_namespace(Kubeconfig(tmp_path / "missing")) == "default"
    assert context_namespace(Kubeconfig(tmp_path / "missing", "lab")) == "default"

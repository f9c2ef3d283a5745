"""`gpu2dra version`: the client's, and the webhook's as its Deployments say; a cluster that
cannot be reached is said, never an error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from app.cli.commands import main
from app.core.kube import Obj
from app.diagnose.version import command
from app.diagnose.version.command import Versions, render_json, render_text
from app.diagnose.version.webhooks import Webhook, image_tag, webhooks
from app.kubeconfig import Kubeconfig
from app.readers.client import ReadError, Unreachable


def deployment(name: str, component: str | None = "webhook", **labels: str) -> Obj:
    said = {"app.kubernetes.io/name": "gpu2dra", "app.kubernetes.io/version": "0.1.0"}
    if component is not None:
        said["app.kubernetes.io/component"] = component
    containers = [{"name": "webhook", "image": "ghcr.io/gpu2dra/gpu2dra:0.1.0"}]
    return {
        "metadata": {"namespace": "gpu2dra-system", "name": name, "labels": {**said, **labels}},
        "spec": {"replicas": 2, "template": {"spec": {"containers": containers}}},
        "status": {"readyReplicas": 1},
    }


@pytest.mark.parametrize(
    ("image", "tag"),
    [
        ("ghcr.io/gpu2dra/gpu2dra:0.1.0", "0.1.0"),
        ("registry:5000/gpu2dra:0.2.0@sha256:abc", "0.2.0"),
        ("registry:5000/gpu2dra@sha256:abc", None),
        ("gpu2dra", None),
    ],
)
def test_the_image_tag(image: str, tag: str | None) -> None:
    assert image_tag(image) == tag


def test_the_webhooks_deployments_and_not_the_exporters() -> None:
    found = webhooks(
        [
            deployment("gpu2dra"),
            deployment("gpu2dra-exporter", "exporter"),
            deployment("by-hand", None, **{"app.kubernetes.io/version": "0.0.9"}),
        ]
    )
    assert found == [
        Webhook(
            "gpu2dra-system", "by-hand", "0.0.9", "ghcr.io/gpu2dra/gpu2dra:0.1.0", "0.1.0", 1, 2
        ),
        Webhook(
            "gpu2dra-system", "gpu2dra", "0.1.0", "ghcr.io/gpu2dra/gpu2dra:0.1.0", "0.1.0", 1, 2
        ),
    ]


def test_what_is_said_found_not_found_and_unreachable() -> None:
    [hook] = webhooks([deployment("gpu2dra")])
    found = Versions("0.1.0", "https://k8s:6443", "v1.37.0", webhooks=[hook])
    assert render_text(found, client_only=False).splitlines() == [
        "client: gpu2dra 0.1.0",
        "cluster: https://k8s:6443, Kubernetes v1.37.0",
        "webhook: gpu2dra-system/gpu2dra: 0.1.0 (image ghcr.io/gpu2dra/gpu2dra:0.1.0), 1/2 ready",
    ]
    none = Versions("0.1.0", "https://k8s:6443", "v1.37.0")
    assert render_text(none, client_only=False).splitlines()[-1] == (
        "webhook: not found (no Deployment labelled app.kubernetes.io/name=gpu2dra)"
    )
    gone = Versions("0.1.0", cluster_error="cannot reach the API server at https://k8s:6443")
    assert render_text(gone, client_only=False).splitlines()[1:] == [
        "cluster: not reached: cannot reach the API server at https://k8s:6443",
        "webhook: unknown (no cluster)",
    ]
    assert orjson.loads(render_json(gone, client_only=False)) == {
        "client": {"version": "0.1.0"},
        "cluster": {
            "server": None,
            "kubernetes": None,
            "error": "cannot reach the API server at https://k8s:6443",
        },
        "webhook": {"found": [], "error": "no cluster"},
    }
    assert render_text(found, client_only=True) == "client: gpu2dra 0.1.0\n"


class _Reader:
    """A cluster that answers /version, and lists Deployments or refuses to."""

    def __init__(self, listed: list[Obj] | ReadError) -> None:
        self.listed = listed
        self.api: Any = type("Api", (), {"configuration": type("C", (), {"host": "https://k"})})

    def get(self, path: str) -> Obj:
        assert path == "/version"
        return {"gitVersion": "v1.37.0"}

    def items(self, path: str, **query: str) -> list[Obj]:
        assert query == {"labelSelector": "app.kubernetes.io/name=gpu2dra"}
        if isinstance(self.listed, ReadError):
            raise self.listed
        return self.listed


def test_a_cluster_that_refuses_the_list_is_said(monkeypatch: pytest.MonkeyPatch) -> None:
    refused = ReadError("GET /apis/apps/v1/deployments: 403 forbidden")
    monkeypatch.setattr(command, "connect", lambda kubeconfig, timeout: _Reader(refused))
    found = command.gather(Kubeconfig(), "0.1.0")
    assert (found.kubernetes, found.webhooks_error) == (
        "v1.37.0",
        "cannot read Deployments: GET /apis/apps/v1/deployments: 403 forbidden",
    )


def test_an_unreachable_cluster_exits_0(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    def unreachable(kubeconfig: Any, timeout: float) -> Any:
        raise Unreachable("cannot reach the API server at https://10.0.0.1:6443: timed out")

    monkeypatch.setattr(command, "connect", unreachable)
    assert main(["version"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("client: gpu2dra ") and "cluster: not reached: cannot reach" in out


def test_no_kubeconfig_exits_0(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["version", "--kubeconfig", str(tmp_path / "none"), "-o", "json"]) == 0
    body = orjson.loads(capsys.readouterr().out)
    assert body["cluster"]["error"] == f"kubeconfig {tmp_path / 'none'}: no such file"
    assert main(["version", "--client", "-o", "json"]) == 0
    assert list(orjson.loads(capsys.readouterr().out)) == ["client"]

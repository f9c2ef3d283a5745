"""The chart's second port and its verification of the API server's client certificate, as
rendered into the webhook's Deployment."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.webhook import of_kind, render_chart

Obj = dict[str, Any]


def webhook(docs: list[Obj]) -> tuple[Obj, Obj]:
    """The webhook's pod spec and its container."""
    spec: Obj = of_kind(docs, "Deployment")["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    return spec, container


def test_by_default_one_port_and_no_client_certificate(helm: Path) -> None:
    spec, container = webhook(render_chart(helm))
    assert [port["name"] for port in container["ports"]] == ["https"]
    assert not [a for a in container["args"] if a.startswith(("--internal-port", "--client-"))]
    assert "client-ca" not in [volume["name"] for volume in spec["volumes"]]


def test_translate_and_metrics_on_a_port_of_their_own(helm: Path) -> None:
    _, container = webhook(render_chart(helm, "server.internalPort=8444"))
    assert "--internal-port=8444" in container["args"]
    assert container["ports"][1] == {"name": "internal", "containerPort": 8444, "protocol": "TCP"}


def test_the_internal_port_is_refused_with_the_service_monitor(helm: Path) -> None:
    with pytest.raises(AssertionError, match="ServiceMonitor scrapes the admission port"):
        render_chart(helm, "server.internalPort=8444", "serviceMonitor.enabled=true")


def test_the_api_servers_client_certificate_verified(helm: Path) -> None:
    values = (
        "server.clientAuth.caSecret=apiserver-client-ca",
        "server.clientAuth.names={kube-apiserver,apiserver.example}",
    )
    spec, container = webhook(render_chart(helm, *values))
    assert [a for a in container["args"] if a.startswith("--client-")] == [
        "--client-ca=/etc/gpu2dra/client-ca/ca.crt",
        "--client-name=kube-apiserver",
        "--client-name=apiserver.example",
    ]
    (volume,) = [v for v in spec["volumes"] if v["name"] == "client-ca"]
    assert volume["secret"] == {
        "secretName": "apiserver-client-ca",
        "items": [{"key": "ca.crt", "path": "ca.crt"}],
    }
    mount = {"name": "client-ca", "mountPath": "/etc/gpu2dra/client-ca", "readOnly": True}
    assert mount in container["volumeMounts"]


def test_a_typo_in_client_auth_fails_the_install(helm: Path) -> None:
    with pytest.raises(AssertionError, match="clientAuth"):
        render_chart(helm, "server.clientAuth.caSecretName=x")

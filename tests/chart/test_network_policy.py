"""The chart's NetworkPolicies: the webhook port lets in only the peers
`networkPolicy.webhookFrom` names (the API server), `/metrics` only `networkPolicy.metricsFrom`,
and the exporter's port only `exporter.networkPolicy.from`. A policy with no peers would let
every source in, so the chart refuses to render one."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.chart.render import helm_template
from tests.support.webhook import CHART

Obj = dict[str, Any]
API_SERVER = [{"ipBlock": {"cidr": "172.16.0.0/28"}}]  # GKE's control-plane range, say
PROMETHEUS = [
    {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
        "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}},
    }
]


def render(helm: Path, tmp_path: Path, values: Obj) -> list[Obj]:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    return helm_template(helm, files=(path,))


def policies(docs: list[Obj]) -> dict[str, Obj]:
    return {d["metadata"]["name"]: d["spec"] for d in docs if d["kind"] == "NetworkPolicy"}


def test_the_webhook_port_lets_in_only_the_peers_named(helm: Path, tmp_path: Path) -> None:
    docs = render(helm, tmp_path, {"networkPolicy": {"enabled": True, "webhookFrom": API_SERVER}})
    (spec,) = policies(docs).values()
    assert spec["policyTypes"] == ["Ingress"]
    assert spec["ingress"] == [
        {"from": API_SERVER, "ports": [{"port": "https", "protocol": "TCP"}]}
    ]
    webhook = spec["podSelector"]["matchLabels"]["app.kubernetes.io/component"]
    assert webhook == "webhook"


def test_metrics_scrapers_get_a_rule_of_their_own(helm: Path, tmp_path: Path) -> None:
    values = {
        "networkPolicy": {"enabled": True, "webhookFrom": API_SERVER, "metricsFrom": PROMETHEUS}
    }
    (spec,) = policies(render(helm, tmp_path, values)).values()
    assert [rule["from"] for rule in spec["ingress"]] == [API_SERVER, PROMETHEUS]
    assert all(rule["from"] for rule in spec["ingress"])  # no rule open to every source


def test_with_an_internal_port_the_scrapers_reach_only_that_port(
    helm: Path, tmp_path: Path
) -> None:
    values = {
        "server": {"internalPort": 9443},
        "networkPolicy": {"enabled": True, "webhookFrom": API_SERVER, "metricsFrom": PROMETHEUS},
    }
    (spec,) = policies(render(helm, tmp_path, values)).values()
    assert [(rule["from"], rule["ports"]) for rule in spec["ingress"]] == [
        (API_SERVER, [{"port": "https", "protocol": "TCP"}]),
        (PROMETHEUS, [{"port": "internal", "protocol": "TCP"}]),
    ]


def test_a_policy_with_no_peers_is_refused(helm: Path) -> None:
    done = subprocess.run(
        [str(helm), "template", "gpu2dra", str(CHART), "--set", "networkPolicy.enabled=true"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode != 0
    assert "networkPolicy.webhookFrom" in done.stderr


def test_the_exporter_has_a_policy_of_its_own(helm: Path, tmp_path: Path) -> None:
    values = {"exporter": {"enabled": True, "networkPolicy": {"enabled": True, "from": PROMETHEUS}}}
    found = policies(render(helm, tmp_path, values))
    assert list(found) == ["gpu2dra-exporter"]
    spec = found["gpu2dra-exporter"]
    assert spec["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "exporter"
    assert spec["ingress"] == [
        {"from": PROMETHEUS, "ports": [{"port": "http-metrics", "protocol": "TCP"}]}
    ]


def test_no_exporter_no_exporter_policy(helm: Path, tmp_path: Path) -> None:
    values = {
        "exporter": {"enabled": False, "networkPolicy": {"enabled": True, "from": PROMETHEUS}}
    }
    assert policies(render(helm, tmp_path, values)) == {}


@pytest.mark.parametrize(
    "peer",
    [{"ipblock": {"cidr": "10.0.0.0/8"}}, {"ipBlock": {"cidr": "10.0.0.0/8", "exept": []}}],
)
def test_a_typo_in_a_peer_fails_the_install(helm: Path, tmp_path: Path, peer: Obj) -> None:
    with pytest.raises(AssertionError, match="additional properties"):
        render(helm, tmp_path, {"networkPolicy": {"enabled": True, "webhookFrom": [peer]}})

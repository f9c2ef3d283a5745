"""The chart's knobs as rendered: image, port, probes, strategy, extra arguments and
environment, annotations, topology spread, the ServiceMonitor, and the TLS Secret of
tls.mode=helm in a template of its own."""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.chart.render import render_setup
from tests.support.webhook import CHART, of_kind, render_chart

Obj = dict[str, Any]
SELECTOR_LABELS = {
    "app.kubernetes.io/name": "gpu2dra",
    "app.kubernetes.io/instance": "gpu2dra",
    "app.kubernetes.io/component": "webhook",
}
DIGEST = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"


def pod_spec(docs: list[Obj]) -> Obj:
    spec: Obj = of_kind(docs, "Deployment")["spec"]["template"]["spec"]
    return spec


def container(docs: list[Obj]) -> Obj:
    (found,) = pod_spec(docs)["containers"]
    assert isinstance(found, dict)
    return found


def image(helm: Path, *values: str) -> str:
    return str(container(render_chart(helm, *values))["image"])


def test_image_from_registry_repository_tag_or_digest(helm: Path) -> None:
    assert image(helm) == "ghcr.io/gpu2dra/gpu2dra:0.1.0"  # the published release
    assert image(helm, "image.tag=1.2.3") == "ghcr.io/gpu2dra/gpu2dra:1.2.3"
    mirror = "registry.example.com/gpu2dra/gpu2dra:0.1.0"
    assert image(helm, "image.registry=registry.example.com/") == mirror
    own = "image.registry=", "image.repository=localhost/gpu2dra"
    assert image(helm, *own) == "localhost/gpu2dra:0.1.0"
    digest = f"ghcr.io/gpu2dra/gpu2dra@{DIGEST}"
    assert image(helm, f"image.digest={DIGEST}", "image.tag=1.2.3") == digest
    docs = render_setup(helm, "everything")
    assert container(docs)["image"] == f"registry.example.com/ml/gpu2dra/gpu2dra@{DIGEST}"


def test_container_port(helm: Path) -> None:
    default = container(render_chart(helm))
    assert default["args"][:2] == ["serve", "--port=8443"]
    assert default["ports"] == [{"name": "https", "containerPort": 8443, "protocol": "TCP"}]
    docs = render_setup(helm, "gke-private")
    gke = container(docs)
    assert gke["args"][:2] == ["serve", "--port=10250"]
    assert gke["ports"] == [{"name": "https", "containerPort": 10250, "protocol": "TCP"}]
    # the Service and the probes follow the port by its name
    (port,) = of_kind(docs, "Service")["spec"]["ports"]
    assert port == {"name": "https", "port": 443, "targetPort": "https", "protocol": "TCP"}
    assert gke["readinessProbe"]["httpGet"]["port"] == "https"


def test_probes_keep_their_defaults_and_can_be_changed(helm: Path) -> None:
    default = container(render_chart(helm))
    assert default["readinessProbe"] == {
        "httpGet": {"path": "/readyz", "port": "https", "scheme": "HTTPS"},
        "periodSeconds": 5,
    }
    assert default["livenessProbe"] == {
        "httpGet": {"path": "/healthz", "port": "https", "scheme": "HTTPS"},
        "periodSeconds": 10,
        "failureThreshold": 3,
    }
    assert "startupProbe" not in default
    changed = container(render_chart(helm, "livenessProbe.periodSeconds=20", "readinessProbe=null"))
    assert changed["livenessProbe"] == {**default["livenessProbe"], "periodSeconds": 20}
    assert "readinessProbe" not in changed
    typed = container(render_setup(helm, "kubernetes-typed"))
    assert typed["startupProbe"] == {
        "httpGet": {"path": "/healthz", "port": "https", "scheme": "HTTPS"},
        "failureThreshold": 30,
        "periodSeconds": 2,
    }


def test_strategy(helm: Path) -> None:
    assert "strategy" not in of_kind(render_chart(helm), "Deployment")["spec"]
    deployment = of_kind(render_setup(helm, "kubernetes-typed"), "Deployment")
    assert deployment["spec"]["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
    }


def test_extra_args_and_env_come_after_the_chart_s(helm: Path) -> None:
    default = container(render_chart(helm))
    everything = container(render_setup(helm, "everything"))
    assert everything["args"] == [
        *default["args"],
        "--no-translate-endpoint",
        "--cert-reload-interval=10",
    ]
    assert everything["env"] == [*default["env"], {"name": "TZ", "value": "UTC"}]
    assert [e["name"] for e in default["env"]] == ["POD_NAMESPACE"]


def test_annotations_of_deployment_service_and_webhooks(helm: Path) -> None:
    default = render_chart(helm)
    for kind in ("Deployment", "Service", "MutatingWebhookConfiguration"):
        assert "annotations" not in of_kind(default, kind)["metadata"], kind
    docs = render_setup(helm, "everything")
    deployment = of_kind(docs, "Deployment")
    assert deployment["metadata"]["annotations"] == {"example.com/owner": "platform"}
    pod_annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    assert pod_annotations["example.com/team"] == "ml"
    assert of_kind(docs, "Service")["metadata"]["annotations"] == {"example.com/scrape": "false"}
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        assert of_kind(docs, kind)["metadata"]["annotations"] == {
            "cert-manager.io/inject-ca-from": "gpu2dra-system/gpu2dra-serving",
            "example.com/reviewed": "true",
        }
    helm_mode = render_chart(helm, "webhook.annotations.a=b")
    assert of_kind(helm_mode, "ValidatingWebhookConfiguration")["metadata"]["annotations"] == {
        "a": "b"
    }


def test_topology_spread_gets_the_chart_s_selector(helm: Path) -> None:
    assert "topologySpreadConstraints" not in pod_spec(render_chart(helm))
    spec = pod_spec(render_setup(helm, "ha"))
    assert spec["topologySpreadConstraints"] == [
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": SELECTOR_LABELS},
        },
        {
            "maxSkew": 1,
            "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": SELECTOR_LABELS},
        },
    ]
    assert spec["priorityClassName"] == "system-cluster-critical"
    own = pod_spec(
        render_chart(
            helm,
            "topologySpreadConstraints[0].maxSkew=2",
            "topologySpreadConstraints[0].topologyKey=zone",
            "topologySpreadConstraints[0].whenUnsatisfiable=DoNotSchedule",
            "topologySpreadConstraints[0].labelSelector.matchLabels.app=x",
        )
    )
    assert own["topologySpreadConstraints"][0]["labelSelector"] == {"matchLabels": {"app": "x"}}


def test_service_monitor(helm: Path) -> None:
    default = of_kind(render_chart(helm, "serviceMonitor.enabled=true"), "ServiceMonitor")
    assert default["spec"]["endpoints"] == [
        {
            "port": "https",
            "scheme": "https",
            "path": "/metrics",
            "interval": "30s",
            "tlsConfig": {"insecureSkipVerify": True},
        }
    ]
    monitor = of_kind(render_setup(helm, "everything"), "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    assert monitor["spec"]["endpoints"] == [
        {
            "port": "https",
            "scheme": "https",
            "path": "/metrics",
            "interval": "30s",
            "scrapeTimeout": "10s",
            "tlsConfig": {
                "insecureSkipVerify": True,
                "serverName": "gpu2dra.gpu2dra-system.svc",
                "ca": {"secret": {"name": "gpu2dra-tls", "key": "ca.crt"}},
            },
        }
    ]


def show_only(helm: Path, template: str, *values: str) -> list[Obj]:
    args = [str(helm), "template", "gpu2dra", str(CHART), "-n", "gpu2dra-system"]
    args += ["--show-only", f"templates/{template}"]
    for value in values:
        args += ["--set", value]
    done = subprocess.run(args, capture_output=True, text=True, check=True)
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def test_the_helm_mode_secret_has_a_template_of_its_own(helm: Path) -> None:
    (secret,) = show_only(helm, "tls-secret.yaml")
    assert secret["kind"] == "Secret"
    assert secret["metadata"]["name"] == "gpu2dra-tls"
    assert secret["type"] == "kubernetes.io/tls"
    assert sorted(secret["data"]) == ["ca.crt", "tls.crt", "tls.key"]
    assert b"BEGIN CERTIFICATE" in base64.b64decode(secret["data"]["ca.crt"])
    webhooks = show_only(helm, "webhooks.yaml")
    assert [d["kind"] for d in webhooks] == [
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ]
    # one CA per render, whichever template asks first: the Secret's is the webhooks'
    docs = render_chart(helm)
    ca = of_kind(docs, "Secret")["data"]["ca.crt"]
    bundles = {
        hook["clientConfig"]["caBundle"]
        for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
        for hook in of_kind(docs, kind)["webhooks"]
    }
    assert bundles == {ca}
    for values in (
        ("tls.mode=cert-manager",),
        ("tls.mode=secret", "tls.secretName=s", "tls.caBundle=Q0EK"),
    ):
        assert "Secret" not in {d["kind"] for d in render_chart(helm, *values)}

"""The chart's monitoring objects beyond the webhook's own: `gpu2dra exporter` (one replica
under a role that only reads pods, claims and slices, its ServiceMonitor keeping the
workload's labels), off by default."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.chart.render import render_setup
from tests.support.webhook import render_chart

Obj = dict[str, Any]


def exporter_objects(docs: list[Obj]) -> dict[str, Obj]:
    return {
        d["kind"]: d
        for d in docs
        if (d["metadata"].get("labels") or {}).get("app.kubernetes.io/component") == "exporter"
    }


def test_the_exporter_is_off_by_default(helm: Path) -> None:
    assert exporter_objects(render_chart(helm)) == {}
    assert exporter_objects(render_chart(helm, "serviceMonitor.enabled=true")) == {}


def test_the_exporter_runs_one_replica_that_only_reads_what_it_joins(helm: Path) -> None:
    objects = exporter_objects(render_chart(helm, "exporter.enabled=true"))
    assert set(objects) == {
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Deployment",
        "Service",
    }
    granted = {
        (g, r, v)
        for rule in objects["ClusterRole"]["rules"]
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
    }
    assert granted == {
        (group, resource, verb)
        for group, resource in (
            ("", "pods"),
            ("resource.k8s.io", "resourceclaims"),
            ("resource.k8s.io", "resourceslices"),
        )
        for verb in ("list", "watch")
    }
    deployment = objects["Deployment"]["spec"]
    assert deployment["replicas"] == 1
    assert deployment["strategy"] == {"type": "Recreate"}
    pod = deployment["template"]["spec"]
    assert pod["serviceAccountName"] == objects["ServiceAccount"]["metadata"]["name"]
    (container,) = pod["containers"]
    assert container["command"] == ["gpu2dra"]
    assert container["args"] == [
        "exporter",
        "--port=9464",
        "--driver=gpu.nvidia.com",
        "--log-level=info",
        "--log-format=json",
    ]
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http-metrics"}
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert objects["Service"]["spec"]["ports"][0]["port"] == 9464
    # the webhook's Service and PodDisruptionBudget do not select the exporter's pod
    labels = deployment["template"]["metadata"]["labels"]
    webhook_service = next(
        d
        for d in render_chart(helm, "exporter.enabled=true")
        if d["kind"] == "Service" and d["metadata"]["name"] == "gpu2dra"
    )
    assert not webhook_service["spec"]["selector"].items() <= labels.items()


def test_its_service_monitor_keeps_the_workloads_labels(helm: Path) -> None:
    docs = render_setup(helm, "monitoring")
    monitor = exporter_objects(docs)["ServiceMonitor"]
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    assert monitor["spec"]["endpoints"] == [
        {"port": "http-metrics", "path": "/metrics", "honorLabels": True, "interval": "30s"}
    ]
    (container,) = exporter_objects(docs)["Deployment"]["spec"]["template"]["spec"]["containers"]
    drivers = [a for a in container["args"] if a.startswith("--driver=")]
    assert drivers == ["--driver=gpu.nvidia.com", "--driver=gpu.example.com"]


def test_secure_metrics_serve_https_to_the_readers_only(helm: Path) -> None:
    """exporter.secureMetrics: the exporter reviews tokens (and may), the readers are bound to
    the non-resource URL it checks, Prometheus scrapes over HTTPS with its own token, and the
    probes use HTTPS without one."""
    docs = render_setup(helm, "secure-metrics")
    name = "gpu2dra-exporter"
    roles = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ClusterRole"}
    granted = {
        (g, r, v)
        for rule in roles[name]["rules"]
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
    }
    assert ("authentication.k8s.io", "tokenreviews", "create") in granted
    assert ("authorization.k8s.io", "subjectaccessreviews", "create") in granted
    assert roles[f"{name}-metrics-reader"]["rules"] == [
        {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}
    ]
    (binding,) = [
        d
        for d in docs
        if d["kind"] == "ClusterRoleBinding" and d["metadata"]["name"] == f"{name}-metrics-reader"
    ]
    assert binding["roleRef"]["name"] == f"{name}-metrics-reader"
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "prometheus-k8s", "namespace": "monitoring"}
    ]
    objects = exporter_objects([d for d in docs if "metrics-reader" not in d["metadata"]["name"]])
    pod = objects["Deployment"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert "--secure-metrics" in container["args"]
    assert container["ports"][0]["name"] == "https-metrics"
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"]["scheme"] == "HTTPS"
    assert container["volumeMounts"] == [{"name": "tmp", "mountPath": "/tmp"}]
    assert pod["volumes"][0]["emptyDir"]["medium"] == "Memory"
    assert objects["Service"]["spec"]["ports"][0]["targetPort"] == "https-metrics"
    (endpoint,) = objects["ServiceMonitor"]["spec"]["endpoints"]
    assert endpoint["port"] == "https-metrics"
    assert endpoint["scheme"] == "https"
    assert endpoint["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"
    assert endpoint["tlsConfig"] == {"insecureSkipVerify": True}


def test_without_secure_metrics_nothing_reviews(helm: Path) -> None:
    docs = render_chart(helm, "exporter.enabled=true")
    assert not [d for d in docs if "metrics-reader" in d["metadata"]["name"]]
    (container,) = exporter_objects(docs)["Deployment"]["spec"]["template"]["spec"]["containers"]
    assert "--secure-metrics" not in container["args"]
    assert "volumeMounts" not in container


def test_secure_metrics_need_no_service_monitor(helm: Path) -> None:
    docs = render_chart(
        helm,
        "exporter.enabled=true",
        "exporter.secureMetrics.enabled=true",
        "exporter.secureMetrics.readers[0].name=vmagent",
        "exporter.secureMetrics.readers[0].namespace=metrics",
    )
    assert not [d for d in docs if d["kind"] == "ServiceMonitor"]
    (binding,) = [
        d
        for d in docs
        if d["metadata"]["name"] == "gpu2dra-exporter-metrics-reader"
        and d["kind"] == "ClusterRoleBinding"
    ]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "vmagent", "namespace": "metrics"}
    ]

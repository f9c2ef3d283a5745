"""The chart's Grafana dashboard: off by default, a ConfigMap the sidecar loads, valid
dashboard JSON whose PromQL parses and names only metrics and label values gpu2dra exports (a
metric renamed in app/webhook/metrics.py or app/exporter/ fails here), and its
per-pod utilisation join evaluated over a real exporter scrape and a dcgm-exporter series."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import promql_parser
import pytest
from kubernetes.client import ApiClient
from prometheus_client.parser import text_string_to_metric_families

from app.core.policy import load_policy
from app.exporter.gpuinfo import claim_devices, pod_gpus, slice_devices
from app.exporter.server import Exporter
from app.webhook.application import create_app
from app.webhook.metrics import Metrics
from app.webhook.settings import Settings
from tests.chart.render import render_setup
from tests.support.promql import DuplicateSeries, Sample, evaluate
from tests.support.webhook import CHART, render_chart

Obj = dict[str, Any]
DASHBOARD = CHART / "dashboards" / "gpu2dra.json"
# Series the dashboard reads that are not gpu2dra's: dcgm-exporter's.
EXTERNAL = {"DCGM_FI_DEV_GPU_UTIL"}
VARIABLES = {"$__rate_interval": "5m", "$job": ".+", "$namespace": ".+"}
_SUFFIXES = {"counter": ("_total",), "gauge": ("",), "histogram": ("_bucket", "_sum", "_count")}
PANEL_TYPES = {"row", "timeseries", "table"}


def exported() -> dict[str, list[dict[str, str]]]:
    """Each series name the webhook's and the exporter's /metrics can hold, with the labels of
    the series they export before any request (every endpoint, result and outcome, at 0)."""
    webhook: Metrics = create_app(Settings(policy=load_policy(None))).state.metrics
    series: dict[str, list[dict[str, str]]] = {}
    exporter = Exporter(ApiClient())
    for registry in (webhook.registry, exporter.metrics.registry, exporter.info_registry):
        for family in registry.collect():
            for suffix in _SUFFIXES[family.type]:
                series.setdefault(family.name + suffix, [])
            for sample in family.samples:
                series.setdefault(sample.name, []).append(dict(sample.labels))
    return series


def dashboard() -> Obj:
    loaded: Obj = json.loads(DASHBOARD.read_text())
    return loaded


def exprs(board: Obj) -> list[tuple[str, str]]:
    """(panel title, expression) of every target."""
    return [(p["title"], t["expr"]) for p in board["panels"] for t in p.get("targets", [])]


def substituted(expr: str) -> str:
    for name, value in VARIABLES.items():
        expr = expr.replace(name, value)
    return expr


def selectors(node: Any) -> Iterator[Any]:
    """Every vector selector of a parsed expression."""
    kind = type(node).__name__
    if kind == "VectorSelector":
        yield node
    elif kind == "MatrixSelector":
        yield node.vector_selector
    elif kind == "BinaryExpr":
        yield from selectors(node.lhs)
        yield from selectors(node.rhs)
    elif kind == "Call":
        for arg in node.args:
            yield from selectors(arg)
    elif kind in ("AggregateExpr", "ParenExpr", "UnaryExpr", "SubqueryExpr"):
        yield from selectors(node.expr)


def problems(expr: str, series: dict[str, list[dict[str, str]]]) -> list[str]:
    """What in `expr` gpu2dra does not export: a metric name, or a label value (each
    alternative of an `=` or `=~` matcher on one of its own labels)."""
    found = []
    for selector in selectors(promql_parser.parse(substituted(expr))):
        name = selector.name
        if name in EXTERNAL:
            continue
        if name not in series:
            found.append(f"{name} is not exported")
            continue
        wanted = [
            (m.name, m.value.split("|"))
            for m in selector.matchers.matchers
            if str(m.op).rsplit(".", 1)[-1] in ("Equal", "Re")
            and m.name not in ("job", "namespace")
        ]
        labels = series[name]
        for combination in itertools.product(*(values for _, values in wanted)):
            asked = dict(zip((label for label, _ in wanted), combination, strict=True))
            if labels and not any(asked.items() <= s.items() for s in labels):
                found.append(f"{name}: no series with {asked}")
    return found


def test_the_dashboard_is_off_by_default_and_a_sidecar_config_map_when_on(helm: Path) -> None:
    assert not [
        d
        for d in render_chart(helm)
        if d["kind"] == "ConfigMap" and "dashboard" in d["metadata"]["name"]
    ]
    docs = render_setup(helm, "monitoring")
    (config,) = [
        d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "gpu2dra-dashboard"
    ]
    assert config["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert config["metadata"]["annotations"] == {"grafana_folder": "GPUs"}
    assert json.loads(config["data"]["gpu2dra.json"]) == dashboard()
    relabelled = render_chart(helm, "dashboard.enabled=true", "dashboard.labels.grafana=yes")
    (config,) = [d for d in relabelled if d["metadata"]["name"] == "gpu2dra-dashboard"]
    assert config["metadata"]["labels"]["grafana"] == "yes"
    assert "annotations" not in config["metadata"]


def test_the_dashboard_json_is_well_formed() -> None:
    board = dashboard()
    assert (board["uid"], board["title"]) == ("gpu2dra", "gpu2dra")
    assert isinstance(board["schemaVersion"], int)
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    variables = {v["name"] for v in board["templating"]["list"]}
    assert variables == {"datasource", "job", "namespace"}
    for panel in board["panels"]:
        assert panel["type"] in PANEL_TYPES, panel["title"]
        grid = panel["gridPos"]
        assert all(isinstance(grid[k], int) for k in ("h", "w", "x", "y"))
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        refs = [t["refId"] for t in panel["targets"]]
        assert refs and len(refs) == len(set(refs)), panel["title"]
        assert panel["description"], panel["title"]
    used = {v for _, e in exprs(board) for v in ("$job", "$namespace") if v in e}
    assert used == {"$job", "$namespace"}


def test_every_expression_parses_and_names_only_what_gpu2dra_exports() -> None:
    series = exported()
    assert "gpu2dra_pod_gpu_info" in series and "gpu2dra_request_seconds_bucket" in series
    board = dashboard()
    named = set()
    for title, expr in exprs(board):
        assert problems(expr, series) == [], title
        named |= {s.name for s in selectors(promql_parser.parse(substituted(expr)))}
    # each family the dashboard is about is on it
    for name in (
        "gpu2dra_translations_total",
        "gpu2dra_requests_total",
        "gpu2dra_outcomes_total",
        "gpu2dra_request_seconds_bucket",
        "gpu2dra_cache_synced",
        "gpu2dra_cache_relists_total",
        "gpu2dra_pod_gpu_info",
    ):
        assert name in named, name


def test_a_renamed_metric_or_an_unknown_label_value_is_found() -> None:
    series = exported()
    assert problems("rate(gpu2dra_outcome_total[5m])", series) == [
        "gpu2dra_outcome_total is not exported"
    ]
    assert problems('gpu2dra_outcomes_total{kind="gone"}', series) == [
        "gpu2dra_outcomes_total: no series with {'kind': 'gone'}"
    ]
    assert problems('gpu2dra_requests_total{endpoint=~"mutate|nope"}', series) == [
        "gpu2dra_requests_total: no series with {'endpoint': 'nope'}"
    ]
    assert problems('gpu2dra_requests_total{endpoint!~"nope", result!="x"}', series) == []
    with pytest.raises(ValueError):
        promql_parser.parse("sum(rate(gpu2dra_requests_total[5m])")


# ---- the join ----------------------------------------------------------------------------

UUIDS = ("GPU-11111111-0000-4000-8000-000000000000", "GPU-22222222-0000-4000-8000-000000000000")


def info_series(pods: dict[str, int]) -> list[Sample]:
    """gpu2dra_pod_gpu_info as a real exporter scrapes it, for pods holding gpu-<i> of one
    node (a translated pod: an init container and the app sharing the claim)."""
    exporter = Exporter(ApiClient())
    devices = [
        {"name": f"gpu-{i}", "attributes": {"uuid": {"string": u}}} for i, u in enumerate(UUIDS)
    ]
    exporter.slices.put(
        "s",
        slice_devices(
            {"spec": {"driver": "gpu.nvidia.com", "pool": {"name": "node-a"}, "devices": devices}}
        ),
    )
    for pod, gpu in pods.items():
        claim = f"{pod}-gpu"
        spec = {
            "nodeName": "node-a",
            "initContainers": [{"name": "warmup", "resources": {"claims": [{"name": "gpu"}]}}],
            "containers": [{"name": "main", "resources": {"claims": [{"name": "gpu"}]}}],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu2dra-gpu-x1-a"}],
        }
        status = {
            "phase": "Running",
            "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": claim}],
        }
        exporter.pods.put(
            ("ml", pod),
            pod_gpus(
                {
                    "metadata": {"namespace": "ml", "name": pod, "uid": pod},
                    "spec": spec,
                    "status": status,
                }
            ),
        )
        result = {
            "request": "gpu",
            "driver": "gpu.nvidia.com",
            "pool": "node-a",
            "device": f"gpu-{gpu}",
        }
        exporter.claims.put(
            ("ml", claim),
            claim_devices(
                {
                    "metadata": {"namespace": "ml", "name": claim},
                    "status": {"allocation": {"devices": {"results": [result]}}},
                }
            ),
        )
    body = b"".join(exporter.app({"PATH_INFO": "/metrics"}, lambda *_: None)).decode()
    return [
        (dict(s.labels), s.value)
        for family in text_string_to_metric_families(body)
        for s in family.samples
        if s.name == "gpu2dra_pod_gpu_info"
    ]


def dcgm(uuid: str, gpu: str, util: float) -> Sample:
    """A DCGM_FI_DEV_GPU_UTIL series as Prometheus stores it: dcgm-exporter's labels and its
    own target's namespace and pod."""
    labels = {"gpu": gpu, "UUID": uuid, "modelName": "NVIDIA A100-SXM4-40GB", "Hostname": "node-a"}
    return ({**labels, "namespace": "gpu-operator", "pod": "nvidia-dcgm-exporter-x2k9p"}, util)


def utilisation_expr() -> str:
    (expr,) = [e for t, e in exprs(dashboard()) if t == "GPU utilisation per pod"]
    return substituted(expr)


def test_the_join_names_each_gpu_by_the_pod_that_holds_it() -> None:
    info = info_series({"train": 0, "infer": 1})
    assert len(info) == 4  # two containers of each pod
    series = {
        "gpu2dra_pod_gpu_info": info,
        "DCGM_FI_DEV_GPU_UTIL": [
            dcgm(UUIDS[0], "0", 87.0),
            dcgm(UUIDS[1], "1", 12.0),
            dcgm("GPU-idle", "2", 0.0),
        ],
    }
    joined = sorted(evaluate(utilisation_expr(), series), key=lambda s: s[0]["pod"])
    assert [(s[0]["namespace"], s[0]["pod"], s[0]["UUID"], s[0]["gpu"], s[1]) for s in joined] == [
        ("ml", "infer", UUIDS[1], "1", 12.0),
        ("ml", "train", UUIDS[0], "0", 87.0),
    ]


def test_a_gpu_two_pods_hold_is_refused_rather_than_guessed() -> None:
    series = {
        "gpu2dra_pod_gpu_info": info_series({"a": 0, "b": 0}),
        "DCGM_FI_DEV_GPU_UTIL": [dcgm(UUIDS[0], "0", 50.0)],
    }
    with pytest.raises(DuplicateSeries):
        evaluate(utilisation_expr(), series)

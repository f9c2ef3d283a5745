"""The PrometheusRule's alerts: on metrics and label values gpu2dra exports (a metric renamed
in app/webhook/metrics.py, or a result in app/webhook/endpoint.py, fails here), valid
PromQL, and the knobs that leave alerts out, add rules and set thresholds."""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

import promql_parser
import pytest

from app.core.policy import load_policy
from app.webhook.application import create_app
from app.webhook.metrics import Metrics
from app.webhook.settings import Settings
from tests.chart.render import helm_template, render_setup
from tests.support.webhook import of_kind, render_chart

Obj = dict[str, Any]
ALERTS = [
    "Gpu2draDown",
    "Gpu2draAdmissionErrors",
    "Gpu2draCacheNotSynced",
    "Gpu2draCacheRelisting",
    "Gpu2draSlowAnswers",
    "Gpu2draTemplateErrors",
]
# Series of Prometheus itself, not of gpu2dra.
PROMETHEUS_SERIES = {"up"}
_SELECTOR = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^}]*)\}")
_MATCHER = re.compile(r'([a-zA-Z_]+)\s*(=~|!~|!=|=)\s*"([^"]*)"')
_SUFFIXES = {"counter": ("_total",), "gauge": ("",), "histogram": ("_bucket", "_sum", "_count")}


def exported() -> tuple[set[str], dict[str, list[dict[str, str]]]]:
    """The names of the series gpu2dra's /metrics can hold, and the labels of each series
    an app serving every endpoint exports before any request (every endpoint's results
    show, at 0)."""
    metrics: Metrics = create_app(Settings(policy=load_policy(None))).state.metrics
    names: set[str] = set()
    series: dict[str, list[dict[str, str]]] = {}
    for family in metrics.registry.collect():
        names |= {family.name + suffix for suffix in _SUFFIXES[family.type]}
        for sample in family.samples:
            series.setdefault(sample.name, []).append(dict(sample.labels))
    return names, series


def rules(docs: list[Obj]) -> list[Obj]:
    (group,) = of_kind(docs, "PrometheusRule")["spec"]["groups"]
    assert group["name"] == "gpu2dra"
    found: list[Obj] = group["rules"]
    return found


def selectors(expr: str) -> list[tuple[str, list[tuple[str, str, str]]]]:
    return [(name, _MATCHER.findall(body)) for name, body in _SELECTOR.findall(expr)]


def test_exported_names_are_read_from_the_app() -> None:
    names, series = exported()
    assert {"gpu2dra_requests_total", "gpu2dra_request_seconds_bucket"} <= names
    pairs = {(s["endpoint"], s["result"]) for s in series["gpu2dra_requests_total"]}
    assert {("mutate", "patched"), ("validate", "denied"), ("translate", "ok")} <= pairs
    assert ("translate", "patched") not in pairs


def matching(labels: list[dict[str, str]], matchers: list[tuple[str, str, str]]) -> list[str]:
    """The label values the matchers ask for that no exported series carries with the
    others: each alternative of each `=` or `=~` matcher, combined with those of the others."""
    wanted = [(label, value.split("|")) for label, op, value in matchers if op in ("=", "=~")]
    missing = []
    for combination in itertools.product(*(values for _, values in wanted)):
        asked = dict(zip((label for label, _ in wanted), combination, strict=True))
        if not any(asked.items() <= series.items() for series in labels):
            missing.append(", ".join(f"{k}={v}" for k, v in asked.items()))
    return missing


@pytest.fixture(scope="module")
def default_rules(helm: Path) -> list[Obj]:
    return rules(render_chart(helm, "prometheusRule.enabled=true"))


def test_alerts_use_only_exported_metrics_and_labels(default_rules: list[Obj]) -> None:
    names, series = exported()
    assert [r["alert"] for r in default_rules] == ALERTS
    for rule in default_rules:
        expr = rule["expr"]
        used = selectors(expr)
        assert used, expr
        # every name in the expression, inside a selector or not
        for name in set(re.findall(r"\bgpu2dra_[a-z_]+\b", expr)):
            assert name in names, f"{rule['alert']}: {name} is not exported"
        for name, matchers in used:
            assert name in names | PROMETHEUS_SERIES, f"{rule['alert']}: {name}"
            assert ("job", "=", "gpu2dra") in matchers, expr
            assert ("namespace", "=", "gpu2dra-system") in matchers, expr
            own = [m for m in matchers if m[0] not in ("job", "namespace")]
            if own:
                assert matching(series.get(name, []), own) == [], f"{rule['alert']}: {name}"


def test_a_label_value_not_exported_is_found() -> None:
    _, series = exported()
    requests = series["gpu2dra_requests_total"]
    assert matching(requests, [("endpoint", "=~", "mutate|validate"), ("result", "=", "ok")]) == [
        "endpoint=mutate, result=ok",
        "endpoint=validate, result=ok",
    ]
    assert matching(requests, [("endpoint", "=", "translate"), ("result", "=", "ok")]) == []


def test_each_alert_is_what_it_says(default_rules: list[Obj]) -> None:
    by_name = {r["alert"]: r for r in default_rules}
    job = 'job="gpu2dra", namespace="gpu2dra-system"'
    assert by_name["Gpu2draDown"]["expr"] == f"absent(up{{{job}}} == 1)"
    assert by_name["Gpu2draDown"]["labels"] == {"severity": "warning"}
    errors = by_name["Gpu2draAdmissionErrors"]["expr"]
    assert 'result=~"bad-request|too-large|error"' in errors
    assert 'endpoint="mutate", result="denied"' in errors
    assert errors.endswith("> 0.05")
    assert by_name["Gpu2draCacheNotSynced"]["expr"] == f"gpu2dra_cache_synced{{{job}}} == 0"
    slow = by_name["Gpu2draSlowAnswers"]["expr"]
    assert slow.startswith("histogram_quantile(0.99, sum by (job, namespace, endpoint, le)")
    assert slow.endswith("> 0.5")
    templates = by_name["Gpu2draTemplateErrors"]["expr"]
    assert f"increase(gpu2dra_template_errors_total{{{job}}}[10m])" in templates
    for rule in default_rules:
        assert rule["for"] in ("5m", "10m")
        assert set(rule["annotations"]) == {"summary", "description"}
    # Prometheus' own templating reaches the rule unrendered by Helm
    assert "{{ $labels.cache }}" in by_name["Gpu2draCacheNotSynced"]["annotations"]["description"]


def balanced(expr: str) -> bool:
    """Brackets closed in order and quotes closed: what a template slip breaks first."""
    closing = {")": "(", "]": "[", "}": "{"}
    stack: list[str] = []
    for char in re.sub(r'"[^"]*"', '""', expr):
        if char in "([{":
            stack.append(char)
        elif char in closing and (not stack or stack.pop() != closing[char]):
            return False
    return not stack and expr.count('"') % 2 == 0


def test_alerts_are_valid_promql(default_rules: list[Obj]) -> None:
    assert not balanced("sum(rate(gpu2dra_requests_total[5m])")
    assert not balanced('up{job="x}')
    for rule in default_rules:
        assert balanced(rule["expr"]), rule["alert"]
    for rule in default_rules:
        promql_parser.parse(rule["expr"])
    with pytest.raises(ValueError):
        promql_parser.parse("sum(rate(gpu2dra_requests_total[5m])")


def test_thresholds_severity_left_out_and_added_rules(helm: Path, tmp_path: Path) -> None:
    # numbers with a fraction through a file: `--set` passes them as strings
    values = tmp_path / "values.yaml"
    values.write_text("prometheusRule: {errorRatio: 0.2, latencyP99Seconds: 1.5}\n")
    docs = helm_template(
        helm,
        "prometheusRule.enabled=true",
        "webhook.mutating.failurePolicy=Fail",
        files=(values,),
    )
    by_name = {r["alert"]: r for r in rules(docs)}
    assert by_name["Gpu2draAdmissionErrors"]["expr"].endswith("> 0.2")
    assert by_name["Gpu2draSlowAnswers"]["expr"].endswith("> 1.5")
    assert by_name["Gpu2draDown"]["labels"] == {"severity": "critical"}
    everything = render_setup(helm, "everything")
    rule = of_kind(everything, "PrometheusRule")
    assert rule["metadata"]["labels"]["release"] == "prometheus"
    names = [r["alert"] for r in rules(everything)]
    assert names == [a for a in ALERTS if a != "Gpu2draCacheRelisting"] + ["Gpu2draNoTranslations"]
    assert rules(everything)[-1] == {
        "alert": "Gpu2draNoTranslations",
        "expr": 'sum(rate(gpu2dra_translations_total{mode="enabled"}[1h])) == 0',
        "for": "1h",
        "labels": {"severity": "info"},
        "annotations": {"summary": "No pod was translated for an hour."},
    }
    assert "PrometheusRule" not in {d["kind"] for d in render_chart(helm)}

"""Prometheus metrics, in a registry of their own so each app (and test) starts from zero."""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

# The apiserver's admission histogram starts at 5 ms; resolve well below that.
_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 2.5)


@dataclass
class Metrics:
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        r = self.registry
        self.requests = Counter(
            "gpu2dra_requests",
            "Requests by endpoint and result.",
            ["endpoint", "result"],
            registry=r,
        )
        self.latency = Histogram(
            "gpu2dra_request_seconds",
            "Time to answer, by endpoint.",
            ["endpoint"],
            buckets=_BUCKETS,
            registry=r,
        )
        self.translations = Counter(
            "gpu2dra_translations",
            "Pods translated (or that would be, in audit) by mode.",
            ["mode"],
            registry=r,
        )
        self.templates_created = Counter(
            "gpu2dra_templates_created", "ResourceClaimTemplates created.", registry=r
        )
        self.template_errors = Counter(
            "gpu2dra_template_errors", "Failures to make sure of a template.", registry=r
        )
        self.api_calls = Counter(
            "gpu2dra_api_calls",
            "Calls to the API server, by verb and resource.",
            ["verb", "resource"],
            registry=r,
        )
        self.cache_synced = Gauge(
            "gpu2dra_cache_synced", "1 when a watch cache has synced.", ["cache"], registry=r
        )
        self.cache_relists = Counter(
            "gpu2dra_cache_relists",
            "Full re-lists of a watch cache (start, 410 Gone, errors).",
            ["cache"],
            registry=r,
        )
        self.cache_objects = Gauge(
            "gpu2dra_cache_objects", "Objects held by a watch cache.", ["cache"], registry=r
        )

"""The metrics of watch caches: what every process that keeps them exports (the webhook's
caches, and the exporter's of `gpu2dra exporter`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge


@dataclass
class CacheMetrics:
    """Its API calls and its caches, in a registry of its own so each process (and test)
    starts from zero."""

    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        r = self.registry
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

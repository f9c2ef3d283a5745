"""The webhook's Prometheus metrics: its answers, outcomes and templates, in a registry of
its own (beside its caches', app/watch/cachemetrics.py) so each app (and test) starts from
zero."""

from __future__ import annotations

import ssl
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from prometheus_client import Counter
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric

from app.core.outcomes import Code
from app.watch.cachemetrics import CacheMetrics

# The apiserver's admission histogram starts at 5 ms; resolve well below that.
_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 2.5)


class Latencies:
    """A histogram as plain numbers, written only by the event loop and read at scrape."""

    __slots__ = ("buckets", "sum")

    def __init__(self) -> None:
        self.buckets = [0] * (len(_BUCKETS) + 1)  # the last one: over 2.5 s
        self.sum = 0.0

    def observe(self, seconds: float) -> None:
        self.buckets[bisect_left(_BUCKETS, seconds)] += 1  # le: the first bound >= seconds
        self.sum += seconds

    def cumulative(self) -> list[tuple[str, float]]:
        running, found = 0, list[tuple[str, float]]()
        for bound, n in zip((*map(str, _BUCKETS), "+Inf"), self.buckets, strict=True):
            running += n
            found.append((bound, running))
        return found


class Tally(Latencies):
    """One endpoint's requests by result and its time to answer. A prometheus_client child
    takes a lock on every change; three of them cost a tenth of a remembered pod's answer."""

    __slots__ = ("results",)

    def __init__(self, results: Iterable[str]) -> None:
        super().__init__()
        self.results = dict.fromkeys(results, 0)  # every series shows, at 0 until counted

    def count(self, result: str, seconds: float) -> None:
        self.results[result] += 1
        self.buckets[bisect_left(_BUCKETS, seconds)] += 1  # observe(), inlined: per answer
        self.sum += seconds


class _Requests:
    """gpu2dra_requests_total, gpu2dra_request_seconds, gpu2dra_translations_total and
    gpu2dra_outcomes_total from each endpoint's Tally and the shared counts, at scrape."""

    def __init__(
        self, tallies: dict[str, Tally], translations: dict[str, int], outcomes: dict[Code, int]
    ) -> None:
        self.tallies, self.translations, self.outcomes = tallies, translations, outcomes

    def collect(self) -> Iterator[Metric]:
        requests = CounterMetricFamily(
            "gpu2dra_requests", "Requests by endpoint and result.", labels=["endpoint", "result"]
        )
        latency = HistogramMetricFamily(
            "gpu2dra_request_seconds", "Time to answer, by endpoint.", labels=["endpoint"]
        )
        for endpoint, tally in self.tallies.items():
            for result, n in tally.results.items():
                requests.add_metric([endpoint, result], n)
            latency.add_metric([endpoint], tally.cumulative(), tally.sum)
        translations = CounterMetricFamily(
            "gpu2dra_translations",
            "Pods translated (or that would be, in audit) by mode.",
            labels=["mode"],
        )
        for mode, n in self.translations.items():
            translations.add_metric([mode], n)
        outcomes = CounterMetricFamily(
            "gpu2dra_outcomes",
            "Pods admission left as they are, or translated with a warning, by outcome code.",
            labels=["code", "kind"],
        )
        for code, n in self.outcomes.items():
            outcomes.add_metric([code.value, code.kind], n)
        yield from (requests, latency, translations, outcomes)


class _Serving:
    """What the API server waits for besides the handler: gpu2dra_event_loop_lag_seconds
    and gpu2dra_tls_handshakes_total (OpenSSL's own counts of the serving context)."""

    def __init__(self, lag: Latencies) -> None:
        self.lag = lag
        self.context: ssl.SSLContext | None = None

    def collect(self) -> Iterator[Metric]:
        lag = HistogramMetricFamily(
            "gpu2dra_event_loop_lag_seconds",
            "How much later than asked the event loop ran a timer, sampled every 0.25 s: what "
            "an admission arriving then waits before its handler starts.",
        )
        lag.add_metric([], self.lag.cumulative(), self.lag.sum)
        yield lag
        if self.context is not None:
            stats = self.context.session_stats()
            handshakes = CounterMetricFamily(
                "gpu2dra_tls_handshakes",
                "TLS handshakes of the webhook's server: accepted (begun) and completed. One "
                "per connection the API server opens; few per request when it reuses them.",
                labels=["stage"],
            )
            handshakes.add_metric(["accepted"], stats["accept"])
            handshakes.add_metric(["completed"], stats["accept_good"])
            yield handshakes


@dataclass
class Metrics(CacheMetrics):
    """The webhook's: its answers, outcomes and templates, besides its caches."""

    def __post_init__(self) -> None:
        r = self.registry
        self.tallies: dict[str, Tally] = {}
        self.translations = {"enabled": 0, "audit": 0}
        # every code of a pod admission sees shows, at 0 until counted (notes are offline's)
        self.outcomes = dict.fromkeys((c for c in Code if c.kind != "note"), 0)
        r.register(_Requests(self.tallies, self.translations, self.outcomes))
        self.loop_lag = Latencies()
        self._serving = _Serving(self.loop_lag)
        r.register(self._serving)
        self.templates_created = Counter(
            "gpu2dra_templates_created", "ResourceClaimTemplates created.", registry=r
        )
        self.templates_refused = Counter(
            "gpu2dra_templates_refused",
            "Pods left unchanged because a template under gpu2dra's name is not gpu2dra's.",
            registry=r,
        )
        self.template_errors = Counter(
            "gpu2dra_template_errors", "Failures to make sure of a template.", registry=r
        )
        super().__post_init__()

    def count_handshakes(self, context: ssl.SSLContext) -> None:
        """Export the TLS handshakes of the context the webhook serves with."""
        self._serving.context = context

    def tally(self, endpoint: str, results: Iterable[str]) -> Tally:
        """The endpoint's Tally, made on first ask."""
        if endpoint not in self.tallies:
            self.tallies[endpoint] = Tally(results)
        return self.tallies[endpoint]

"""The per-request metrics, kept as plain numbers, read as prometheus_client's own would be."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from app.webhook.metrics import _BUCKETS, Metrics

RESULTS = ("patched", "allowed", "denied")


def _samples(text: bytes) -> set[str]:
    """The sample lines of a Prometheus exposition (no comments, no `_created` stamps)."""
    lines = text.decode().splitlines()
    return {line for line in lines if not line.startswith("#") and "_created" not in line}


@given(
    st.lists(
        st.tuples(
            st.sampled_from(RESULTS),
            st.one_of(st.sampled_from(_BUCKETS), st.floats(0, 5, allow_nan=False)),
        ),
        max_size=30,
    )
)
def test_a_tally_reads_as_prometheus_client_would_count_it(
    seen: list[tuple[str, float]],
) -> None:
    metrics = Metrics()
    tally = metrics.tally("mutate", RESULTS)
    reference = CollectorRegistry()
    requests = Counter("gpu2dra_requests", "", ["endpoint", "result"], registry=reference)
    latency = Histogram(
        "gpu2dra_request_seconds", "", ["endpoint"], buckets=_BUCKETS, registry=reference
    )
    for result in RESULTS:
        requests.labels("mutate", result)
    for result, seconds in seen:
        tally.count(result, seconds)
        requests.labels("mutate", result).inc()
        latency.labels("mutate").observe(seconds)
    ours = {s for s in _samples(generate_latest(metrics.registry)) if "gpu2dra_request" in s}
    theirs = _samples(generate_latest(reference))
    if not seen:  # prometheus_client shows no histogram for a label set never observed
        theirs |= {s for s in ours if "_seconds" in s}
    assert ours == theirs


def test_translations_count_by_mode() -> None:
    metrics = Metrics()
    metrics.translations["audit"] += 2
    samples = _samples(generate_latest(metrics.registry))
    assert 'gpu2dra_translations_total{mode="audit"} 2.0' in samples
    assert 'gpu2dra_translations_total{mode="enabled"} 0.0' in samples


@given(st.lists(st.floats(0, 5, allow_nan=False), max_size=30))
def test_event_loop_lag_reads_as_prometheus_client_would_observe_it(seen: list[float]) -> None:
    metrics = Metrics()
    reference = CollectorRegistry()
    lag = Histogram("gpu2dra_event_loop_lag_seconds", "", buckets=_BUCKETS, registry=reference)
    for seconds in seen:
        metrics.loop_lag.observe(seconds)
        lag.observe(seconds)
    ours = {s for s in _samples(generate_latest(metrics.registry)) if "loop_lag" in s}
    assert ours == _samples(generate_latest(reference))


def test_tls_handshakes_are_the_serving_contexts_own_counts() -> None:
    metrics = Metrics()
    assert "gpu2dra_tls_handshakes" not in generate_latest(metrics.registry).decode()

    class Context:  # an SSLContext's session_stats(), as OpenSSL counts
        def session_stats(self) -> dict[str, int]:
            return {"accept": 7, "accept_good": 5}

    metrics.count_handshakes(Context())  # type: ignore[arg-type]
    samples = _samples(generate_latest(metrics.registry))
    assert 'gpu2dra_tls_handshakes_total{stage="accepted"} 7.0' in samples
    assert 'gpu2dra_tls_handshakes_total{stage="completed"} 5.0' in samples

"""The watch-backed cache: it lists, follows events, and re-lists after a 410 Gone."""

from __future__ import annotations

import asyncio
import gc
import threading
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from app.core.templates import owned
from app.webhook.cluster import LiveCluster
from app.webhook.clusterview import ReadFailed, TemplateError
from app.webhook.metrics import Metrics
from app.webhook.stores import Store


class FakeResponse:
    def __init__(self, data: bytes = b"", lines: list[Any] = ()) -> None:  # type: ignore[assignment]
        self.data = data
        self._lines = [orjson.dumps(line) + b"\n" for line in lines]

    def stream(self, amt: Any = None, decode_content: Any = None) -> Iterator[bytes]:
        yield from self._lines

    def close(self) -> None:
        pass

    def release_conn(self) -> None:
        pass


def ns(name: str, version: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": version, "labels": labels}}


class FakeApi:
    """Lists return `listings` in turn; the first watch ends in 410 Gone, later ones stop."""

    def __init__(self, stop: threading.Event) -> None:
        self.stop, self.lists, self.watches = stop, 0, 0
        self.listings = [[ns("a", "1")], [ns("a", "5", mode="enabled"), ns("b", "6")]]

    def __call__(self, watch: bool = False, **kwargs: Any) -> FakeResponse:
        if not watch:
            items = self.listings[min(self.lists, 1)]
            self.lists += 1
            return FakeResponse(
                orjson.dumps({"metadata": {"resourceVersion": "9"}, "items": items})
            )
        self.watches += 1
        if self.watches == 1:
            return FakeResponse(
                lines=[
                    {"type": "ADDED", "object": ns("c", "2")},
                    {"type": "DELETED", "object": ns("a", "3")},
                    {
                        "type": "ERROR",
                        "object": {"code": 410, "message": "too old resource version"},
                    },
                ]
            )
        self.stop.set()
        return FakeResponse(lines=[{"type": "BOOKMARK", "object": {"metadata": {}}}])


def test_store_relists_after_gone() -> None:
    stop = threading.Event()
    api, metrics = FakeApi(stop), Metrics()
    store: Store[str, dict[str, str]] = Store(
        "namespaces",
        api,
        lambda o: o["metadata"]["name"],
        lambda o: o["metadata"]["labels"],
        metrics,
        timeout=1,
    )
    seen: list[set[str]] = []
    store._on_change = lambda: seen.append(set(store.items))
    store.run(stop)

    assert seen[:3] == [{"a"}, {"a", "c"}, {"c"}]  # listed, then followed the events
    assert store.items == {"a": {"mode": "enabled"}, "b": {}}  # the re-list replaced it all
    assert api.lists == 2 and store.synced.is_set()
    relists = metrics.registry.get_sample_value(
        "gpu2dra_cache_relists_total", {"cache": "namespaces"}
    )
    assert relists == 2


def test_synced_gauge_drops_while_a_broken_watch_relists() -> None:
    stop = threading.Event()
    metrics = Metrics()

    def synced() -> float | None:
        return metrics.registry.get_sample_value("gpu2dra_cache_synced", {"cache": "namespaces"})

    seen: list[tuple[str, float | None, bool]] = []

    class Recording(FakeApi):
        def __call__(self, watch: bool = False, **kwargs: Any) -> FakeResponse:
            seen.append(("watch" if watch else "list", synced(), store.synced.is_set()))
            return super().__call__(watch, **kwargs)

    store: Store[str, dict[str, str]] = Store(
        "namespaces", Recording(stop), lambda o: o["metadata"]["name"], dict, metrics, timeout=1
    )
    assert synced() == 0, "exported as 0 before the first list"
    store.run(stop)
    # (call, gauge, ready): 0 until listed; 0 again when the 410 forces a re-list, while
    # readiness stays, since the cache still holds the last state.
    assert seen == [
        ("list", 0, False),
        ("watch", 1, True),
        ("list", 0, True),
        ("watch", 1, True),
    ]
    assert synced() == 1


@pytest.mark.parametrize(
    ("error", "expected"),
    [(ApiException(404, "Not Found"), None), (ApiException(403, "Forbidden"), "403 Forbidden")],
)
def test_a_read_that_fails_is_not_an_absent_object(error: Exception, expected: str | None) -> None:
    def read(*args: Any, **kwargs: Any) -> None:
        raise error

    cluster = LiveCluster(client.ApiClient(), Metrics())
    cluster._resource.read_namespaced_resource_claim = read
    if expected is None:
        assert asyncio.run(cluster.claim_requests("ml", "c")) is None
    else:
        with pytest.raises(ReadFailed, match=expected):
            asyncio.run(cluster.claim_requests("ml", "c"))


def test_a_create_that_fails_after_every_waiter_left_is_not_logged_as_lost(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The pod's answer did not wait for it (deadline); its late failure is read anyway, so
    asyncio does not log "Task exception was never retrieved" with a traceback."""
    release = threading.Event()

    def create(*args: Any, **kwargs: Any) -> None:
        release.wait(5)
        raise ApiException(500, "late")

    cluster = LiveCluster(client.ApiClient(), Metrics(), timeout=0.05)
    cluster._resource.create_namespaced_resource_claim_template = create
    template = owned({"metadata": {"name": "t"}, "spec": {"spec": {"devices": {"requests": []}}}})

    async def scenario() -> None:
        with pytest.raises(TemplateError, match="did not answer"):
            await cluster.ensure_templates("ml", [template])
        release.set()
        while cluster._inflight:
            await asyncio.sleep(0.01)

    asyncio.run(scenario())
    gc.collect()  # an unretrieved exception is reported when its task is collected
    assert "never retrieved" not in caplog.text


def quota(namespace: str, name: str, version: str, **hard: str) -> dict[str, Any]:
    meta = {"namespace": namespace, "name": name, "resourceVersion": version}
    return {"metadata": meta, "spec": {"hard": hard}}


class QuotaApi:
    """One list, then a watch that changes, adds and deletes quotas; then stop."""

    def __init__(self, stop: threading.Event) -> None:
        self.stop, self.watched = stop, False

    def __call__(self, watch: bool = False, **kwargs: Any) -> FakeResponse:
        if not watch:
            items = [quota("a", "gpus", "1", cpu="1"), quota("b", "gpus", "2", cpu="2")]
            body = {"metadata": {"resourceVersion": "2"}, "items": items}
            return FakeResponse(orjson.dumps(body))
        if self.watched:
            self.stop.set()
            return FakeResponse()
        self.watched = True
        return FakeResponse(
            lines=[
                {"type": "MODIFIED", "object": quota("a", "gpus", "3", cpu="3")},
                {"type": "ADDED", "object": quota("a", "more", "4", memory="1")},
                {"type": "DELETED", "object": quota("b", "gpus", "5")},
            ]
        )


def test_quotas_are_read_by_namespace() -> None:
    from app.core.quota import Quota
    from app.webhook.stores import NamespacedStore

    stop = threading.Event()
    store: NamespacedStore[Quota] = NamespacedStore(
        "resourcequotas",
        QuotaApi(stop),
        lambda o: (o["metadata"]["namespace"], o["metadata"]["name"]),
        Quota.of,
        Metrics(),
        timeout=1,
    )
    store.run(stop)
    assert sorted(store.in_namespace("a")) == [
        Quota("gpus", {"cpu": "3"}),
        Quota("more", {"memory": "1"}),
    ]
    assert store.in_namespace("b") == () and store.in_namespace("c") == ()


def gpu_slice(name: str, version: str, shared: bool) -> dict[str, Any]:
    device: dict[str, Any] = {"name": "gpu-0", "capacity": {"memory": {"value": "16Gi"}}}
    if shared:
        device["allowMultipleAllocations"] = True
        device["capacity"]["shares"] = {"value": "4"}
    return {
        "metadata": {"name": name, "resourceVersion": version},
        "spec": {"driver": "gpu.nvidia.com", "devices": [device]},
    }


class SliceApi:
    """One list of an exclusive GPU's slice; a watch that makes it shared, then republishes
    it unchanged; then stop."""

    def __init__(self, stop: threading.Event) -> None:
        self.stop, self.watched = stop, False

    def __call__(self, watch: bool = False, **kwargs: Any) -> FakeResponse:
        if not watch:
            body = {"metadata": {"resourceVersion": "1"}, "items": [gpu_slice("n", "1", False)]}
            return FakeResponse(orjson.dumps(body))
        if self.watched:
            self.stop.set()
            return FakeResponse()
        self.watched = True
        return FakeResponse(
            lines=[
                {"type": "MODIFIED", "object": gpu_slice("n", "2", True)},
                {"type": "MODIFIED", "object": gpu_slice("n", "3", True)},
            ]
        )


def test_the_catalog_says_what_the_resourceslices_share() -> None:
    """From the slices' watch, not per request; a republished slice that shares the same keeps
    the very catalog (and so every memoised translation)."""
    stop = threading.Event()
    cluster = LiveCluster(client.ApiClient(), Metrics())
    assert cluster.catalog.sharing == {}
    cluster.slices._list = SliceApi(stop)
    seen: list[Any] = []
    refresh = cluster._refresh_sharing

    def recording() -> None:
        refresh()
        seen.append(cluster.catalog)

    cluster.slices._on_change = recording
    cluster.slices.run(stop)
    assert cluster.slices.items == {"n": ("gpu.nvidia.com", frozenset({"", "memory", "shares"}))}
    assert cluster.catalog.sharing == {"gpu.nvidia.com": frozenset({"", "memory", "shares"})}
    assert seen[0].sharing == {} and seen[1] is seen[2], "unchanged sharing, the same catalog"
    assert cluster.catalog.shares("gpu.nvidia.com", "shares")

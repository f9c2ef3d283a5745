"""The watch-backed cache: it lists, follows events, and re-lists after a 410 Gone."""

from __future__ import annotations

import threading
from typing import Any

import orjson

from app.core.quota import Quota
from app.watch.cachemetrics import CacheMetrics
from app.watch.stores import NamespacedStore, Store
from tests.unit.watch.responses import FakeResponse


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
    api, metrics = FakeApi(stop), CacheMetrics()
    store: Store[str, dict[str, str]] = Store(
        "namespaces",
        api,
        key=lambda o: o["metadata"]["name"],
        value=lambda o: o["metadata"]["labels"],
        metrics=metrics,
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
    metrics = CacheMetrics()

    def synced() -> float | None:
        return metrics.registry.get_sample_value("gpu2dra_cache_synced", {"cache": "namespaces"})

    seen: list[tuple[str, float | None, bool]] = []

    class Recording(FakeApi):
        def __call__(self, watch: bool = False, **kwargs: Any) -> FakeResponse:
            seen.append(("watch" if watch else "list", synced(), store.synced.is_set()))
            return super().__call__(watch, **kwargs)

    store: Store[str, dict[str, str]] = Store(
        "namespaces",
        Recording(stop),
        key=lambda o: o["metadata"]["name"],
        value=dict,
        metrics=metrics,
        timeout=1,
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
    stop = threading.Event()
    store: NamespacedStore[Quota] = NamespacedStore(
        "resourcequotas",
        QuotaApi(stop),
        key=lambda o: (o["metadata"]["namespace"], o["metadata"]["name"]),
        value=Quota.of,
        metrics=CacheMetrics(),
        timeout=1,
    )
    store.run(stop)
    assert sorted(store.in_namespace("a")) == [
        Quota("gpus", {"cpu": "3"}),
        Quota("more", {"memory": "1"}),
    ]
    assert store.in_namespace("b") == () and store.in_namespace("c") == ()


class PagedApi:
    """A list of five objects served two at a time (limit + continue), then a watch that
    stops; the request timeout of each call is kept."""

    def __init__(self, stop: threading.Event) -> None:
        self.stop = stop
        self.calls: list[dict[str, Any]] = []

    def __call__(self, watch: bool = False, **kwargs: Any) -> FakeResponse:
        if watch:
            self.stop.set()
            return FakeResponse()
        self.calls.append(kwargs)
        names = ["a", "b", "c", "d", "e"]
        start = int(kwargs.get("_continue") or 0)
        limit = kwargs.get("limit") or len(names)
        end = start + limit
        meta: dict[str, Any] = {"resourceVersion": "7"}
        if end < len(names):
            meta["continue"] = str(end)
        items = [ns(n, "7") for n in names[start:end]]
        return FakeResponse(orjson.dumps({"metadata": meta, "items": items}))


def test_a_store_lists_page_by_page() -> None:
    """A large cache is listed in pages (limit + continue), each under its own timeout: the
    list of 40,000 templates neither arrives as one body nor must fit in one short timeout."""
    stop = threading.Event()
    api = PagedApi(stop)
    store: Store[str, dict[str, str]] = Store(
        "namespaces",
        api,
        key=lambda o: o["metadata"]["name"],
        value=lambda o: o["metadata"]["labels"],
        metrics=CacheMetrics(),
        timeout=1,
        page=2,
    )
    store.run(stop)
    assert sorted(store.items) == ["a", "b", "c", "d", "e"]
    assert [c.get("_continue") for c in api.calls] == [None, "2", "4"]
    assert all(c["limit"] == 2 for c in api.calls)
    assert all(c["_request_timeout"] >= 10 for c in api.calls)


class BrokenApi:
    """One list; a watch that fails; a second list that fails too, and stops."""

    def __init__(self, stop: threading.Event) -> None:
        self.stop, self.lists = stop, 0

    def __call__(self, watch: bool = False, **kwargs: Any) -> FakeResponse:
        if watch:
            raise OSError("connection reset")
        self.lists += 1
        if self.lists > 1:
            self.stop.set()
            raise OSError("connection refused")
        return FakeResponse(orjson.dumps({"metadata": {"resourceVersion": "1"}, "items": []}))


def test_a_store_is_not_current_while_its_watch_is_broken() -> None:
    """`current` says whether the last list and its watch still hold: what reads that must
    not trust a stale cache (the webhook's own templates) ask. `synced` stays set."""
    stop = threading.Event()
    store: Store[str, dict[str, str]] = Store(
        "namespaces",
        BrokenApi(stop),
        key=lambda o: o["metadata"]["name"],
        value=lambda o: o["metadata"]["labels"],
        metrics=CacheMetrics(),
        timeout=1,
    )
    assert not store.current
    store._relist()
    assert store.current
    store.run(stop)
    assert store.synced.is_set() and not store.current

"""Maps kept equal to the cluster by list + watch, each on a thread of its own: what the
webhook reads on the admission path, and the exporter at each scrape, instead of the API
server; and the two ways a store keys an object."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

import orjson
from kubernetes.watch.watch import iter_resp_lines

from app.core.kube import Obj
from app.watch.cachemetrics import CacheMetrics

log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

# A list comes in pages of this many objects (limit + continue): no cache arrives as one body
# (40,000 templates are some 60 MB of JSON), and each page has a timeout of its own, so the
# time a whole list may take grows with the objects listed.
PAGE = 500
PAGE_TIMEOUT = 10.0  # seconds a page may take, at the least: 500 objects on a busy server


def name_key(obj: Obj) -> str:
    """The key of a cluster-scoped object (or one of a single namespace): its name."""
    return str((obj.get("metadata") or {}).get("name", ""))


def namespaced_key(obj: Obj) -> tuple[str, str]:
    """The key of a namespaced object: (namespace, name)."""
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace", "")), str(meta.get("name", ""))


class Store(Generic[K, V]):
    """A map kept equal to the cluster by list + watch, on a thread of its own."""

    def __init__(
        self,
        name: str,
        list_fn: Callable[..., Any],
        *,
        key: Callable[[Obj], K],
        value: Callable[[Obj], V],
        metrics: CacheMetrics,
        timeout: float,
        on_change: Callable[[], None] = lambda: None,
        page: int = PAGE,
    ) -> None:
        self.name, self._list, self._key, self._value = name, list_fn, key, value
        self._metrics, self._timeout, self._on_change = metrics, timeout, on_change
        self._page = page
        self.items: dict[K, V] = {}
        # Set once, at the first list, and never cleared: while a broken watch re-lists, the
        # last state is still the best answer there is, so readiness stays (and the replica
        # keeps serving); the gauge, not readiness, tells an operator the cache is behind.
        self.synced = threading.Event()
        self._synced_gauge = metrics.cache_synced.labels(name)
        self._synced_gauge.set(0)
        # True from a list until its watch breaks: the cache holds every change so far. A read
        # that must not act on a stale answer (the webhook's own templates) asks this.
        self.current = False

    @property
    def stale(self) -> bool:
        """Synced once, but its watch broke since: changes may be missing until it re-lists."""
        return self.synced.is_set() and not self.current

    def get(self, key: K) -> V | None:
        return self.items.get(key)

    def put(self, key: K, value: V) -> None:
        self._set(key, value)
        self._on_change()

    # Every change goes through these three, so that a subclass can keep an index beside.
    def _replace(self, items: dict[K, V]) -> None:
        self.items = items

    def _set(self, key: K, value: V) -> None:
        self.items[key] = value

    def _drop(self, key: K) -> None:
        self.items.pop(key, None)

    def run(self, stop: threading.Event) -> None:
        backoff = 0.5
        while not stop.is_set():
            try:
                version = self._relist()
                backoff = 0.5
                self._watch(version, stop)
            except Exception as err:  # the cache must outlive any API failure
                self.current = False
                self._synced_gauge.set(0)
                if stop.is_set():
                    return  # shutting down: a log line now could race the interpreter's exit
                log.warning("cache %s: %s; re-listing in %.1fs", self.name, err, backoff)
                stop.wait(backoff)
                backoff = min(backoff * 2, 30.0)

    def _relist(self) -> str:
        self._metrics.cache_relists.labels(self.name).inc()
        items: dict[K, V] = {}
        token: str | None = None
        while True:
            self._metrics.api_calls.labels("list", self.name).inc()
            resp = self._list(
                limit=self._page,
                _continue=token,
                _preload_content=False,
                _request_timeout=max(self._timeout, PAGE_TIMEOUT),
            )
            body = orjson.loads(resp.data)
            # Each page's objects are kept as values at once: only one page's JSON at a time.
            items.update((self._key(o), self._value(o)) for o in body.get("items") or ())
            meta = body.get("metadata") or {}
            token = meta.get("continue") or None
            del resp, body
            if token is None:  # the last page; a 410 on a token too old starts over
                break
        self._replace(items)
        self._on_change()
        self._metrics.cache_objects.labels(self.name).set(len(self.items))
        self._synced_gauge.set(1)
        self.synced.set()
        self.current = True
        return str(meta["resourceVersion"])

    def _watch(self, version: str, stop: threading.Event) -> None:
        while not stop.is_set():
            self._metrics.api_calls.labels("watch", self.name).inc()
            resp = self._list(
                watch=True,
                resource_version=version,
                allow_watch_bookmarks=True,
                timeout_seconds=300,
                _preload_content=False,
                _request_timeout=(self._timeout, 330),
            )
            try:
                for line in iter_resp_lines(resp):
                    event = orjson.loads(line)
                    kind, obj = event.get("type"), event.get("object") or {}
                    if kind == "ERROR":
                        # 410 Gone: our version is too old to resume from; start over.
                        raise RuntimeError(f"watch error {obj.get('code')}: {obj.get('message')}")
                    version = obj.get("metadata", {}).get("resourceVersion", version)
                    if kind in ("ADDED", "MODIFIED"):
                        self._set(self._key(obj), self._value(obj))
                    elif kind == "DELETED":
                        self._drop(self._key(obj))
                    else:
                        continue
                    self._metrics.cache_objects.labels(self.name).set(len(self.items))
                    self._on_change()
                    if stop.is_set():
                        return
            finally:
                resp.close()
                resp.release_conn()


class NamespacedStore(Store[tuple[str, str], V]):
    """A Store of namespaced objects, also indexed by namespace: one namespace's objects are
    read per request, without a pass over every namespace's."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._by_namespace: dict[str, dict[str, V]] = {}

    def count(self, namespace: str) -> int:
        """How many objects `namespace` holds."""
        return len(self._by_namespace.get(namespace) or ())

    def in_namespace(self, namespace: str) -> tuple[V, ...]:
        found = self._by_namespace.get(namespace)
        # tuple() of a dict's values runs without giving up the GIL: the watch thread
        # cannot change the dict half-way.
        return tuple(found.values()) if found else ()

    def _replace(self, items: dict[tuple[str, str], V]) -> None:
        index: dict[str, dict[str, V]] = {}
        for (namespace, name), value in items.items():
            index.setdefault(namespace, {})[name] = value
        self.items, self._by_namespace = items, index

    def _set(self, key: tuple[str, str], value: V) -> None:
        self.items[key] = value
        self._by_namespace.setdefault(key[0], {})[key[1]] = value

    def _drop(self, key: tuple[str, str]) -> None:
        self.items.pop(key, None)
        names = self._by_namespace.get(key[0])
        if names is not None:
            names.pop(key[1], None)
            if not names:
                self._by_namespace.pop(key[0], None)

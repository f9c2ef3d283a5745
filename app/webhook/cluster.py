"""The webhook's view of the cluster: its watch-backed caches (app/watch/stores.py) and
template creation.

Reads on the admission path come from memory. The one write, creating a template a pod needs,
happens only when the cache does not have it yet, and is bounded by a deadline.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, NamedTuple

import orjson
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from app.core import autoscalers, kueue
from app.core.autoscalers import Autoscaler
from app.core.catalog import Catalog, SliceFacts, published_by, sharing_of, slice_facts
from app.core.kube import MANAGED_BY, Obj
from app.core.kueue import Kueue
from app.core.policy import Policy
from app.core.quota import Quota
from app.core.resources import DraRequest, dra_requests
from app.core.templates import Owned, live_digest
from app.watch.stores import NamespacedStore, Store, name_key, namespaced_key
from app.webhook.clusterview import ReadFailed, TemplateError, TemplateSquatted
from app.webhook.logs import ASKER
from app.webhook.metrics import Metrics

log = logging.getLogger(__name__)

MANAGED_SELECTOR = ",".join(f"{k}={v}" for k, v in MANAGED_BY.items())
# Other templates /validate reads (the cache holds only gpu2dra's) are remembered this long,
# this many: a workload's pods name the same one pod after pod. A template's spec cannot
# change; one deleted and made again under its name is seen at most this late.
OTHERS_TTL = 60.0
OTHERS_KEPT = 4096


class Cached(NamedTuple):
    """What the cache keeps of a template: its requests (for /validate), and the digest of
    its spec when it carries gpu2dra's label (None otherwise), computed here, on the watch's
    thread, so that a pod's check is one comparison per template."""

    requests: list[DraRequest]
    digest: str | None


def cached(obj: Obj) -> Cached:
    return Cached(dra_requests((obj.get("spec") or {}).get("spec")), live_digest(obj))


def squatted(namespace: str, name: str, found: Cached) -> TemplateSquatted:
    asks = "; ".join(f"{r.devices or 'all'} x {r.device_class}" for r in found.requests)
    what = (
        "another spec"
        if found.digest is not None
        else "no label app.kubernetes.io/managed-by=gpu2dra"
    )
    return TemplateSquatted(
        f"ResourceClaimTemplate {namespace}/{name} is not gpu2dra's ({what}; it asks for "
        f"{asks or 'no devices'}): not used; delete it, and the next pod makes gpu2dra's"
    )


def _labels(obj: Obj) -> Mapping[str, str]:
    return obj["metadata"].get("labels") or {}


def _itself(obj: Obj) -> Obj:
    return obj


def _kueue_named(list_fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    """A list of the one object called `name` in Kueue's namespace."""
    return functools.partial(list_fn, kueue.NAMESPACE, field_selector=f"metadata.name={name}")


class LiveCluster:
    """The cluster as the webhook sees it: namespaces, DeviceClasses and templates in memory."""

    offline = False

    def __init__(self, api: client.ApiClient, metrics: Metrics, timeout: float = 2.0) -> None:
        core, resource = client.CoreV1Api(api), client.ResourceV1Api(api)
        self._core, self._resource = core, resource
        self._metrics, self._timeout = metrics, timeout
        # Nothing published until the slices' watch says otherwise (`ready` waits for it).
        self._catalog = Catalog(MappingProxyType({}), sharing={}, published=frozenset())
        self._catalog_lock = threading.Lock()
        self._inflight: dict[tuple[str, str], asyncio.Future[None]] = {}
        # (namespace, name) -> (read at, its requests): templates not gpu2dra's, for /validate
        self._others: dict[tuple[str, str], tuple[float, list[DraRequest]]] = {}
        self._kueue: Kueue | None = None
        # The stores, one a line: what is listed and watched, how it is keyed, what is kept.
        store = functools.partial(Store, metrics=metrics, timeout=timeout)
        self.namespaces: Store[str, Mapping[str, str]] = store(
            "namespaces", core.list_namespace, key=name_key, value=_labels
        )
        self.device_classes: Store[str, Obj] = store(
            "deviceclasses",
            resource.list_device_class,
            key=name_key,
            value=_itself,
            on_change=self._refresh_catalog,
        )
        # Of each ResourceSlice only its driver, whether it publishes a device, and the
        # capacities of its shared devices: which drivers publish devices at all (capacity.py)
        # and which publish devices several claims share (consumable capacity).
        self.slices: Store[str, SliceFacts] = store(
            "resourceslices",
            resource.list_resource_slice,
            key=name_key,
            value=slice_facts,
            on_change=self._refresh_sharing,
        )
        # Only gpu2dra's templates, by its label: the others (a cluster may hold many) cost no
        # memory. A foreign one under gpu2dra's name is still found: the create of a name the
        # cache lacks answers AlreadyExists, and that one object is read (`_create`).
        self.templates: NamespacedStore[Cached] = NamespacedStore(
            "resourceclaimtemplates",
            functools.partial(
                resource.list_resource_claim_template_for_all_namespaces,
                label_selector=MANAGED_SELECTOR,
            ),
            key=namespaced_key,
            value=cached,
            metrics=metrics,
            timeout=timeout,
        )
        self.quotas: NamespacedStore[Quota] = NamespacedStore(
            "resourcequotas",
            core.list_resource_quota_for_all_namespaces,
            key=namespaced_key,
            value=Quota.of,
            metrics=metrics,
            timeout=timeout,
        )
        # Kueue's ConfigMap and Deployment, by name: whether it counts queued pods' claims.
        self.kueue_config: Store[str, Obj] = store(
            "kueue-config",
            _kueue_named(core.list_namespaced_config_map, kueue.CONFIG),
            key=name_key,
            value=_itself,
            on_change=self._refresh_kueue,
        )
        self.kueue_manager: Store[str, Obj] = store(
            "kueue-manager",
            _kueue_named(client.AppsV1Api(api).list_namespaced_deployment, kueue.DEPLOYMENT),
            key=name_key,
            value=_itself,
            on_change=self._refresh_kueue,
        )
        # The node autoscalers' Deployments, by the labels their charts and manifests give
        # them (one store a selector: one selector cannot OR two keys); of each, only what
        # it can add.
        apps = client.AppsV1Api(api)
        self.autoscalers: tuple[Store[tuple[str, str], Autoscaler | None], ...] = tuple(
            store(
                f"autoscalers-{i}",
                functools.partial(apps.list_deployment_for_all_namespaces, label_selector=s),
                key=namespaced_key,
                value=autoscalers.of,
                on_change=self._refresh_autoscalers,
            )
            for i, s in enumerate(autoscalers.SELECTORS)
        )
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    @property
    def stores(self) -> tuple[Store[Any, Any], ...]:
        return (
            self.namespaces,
            self.device_classes,
            self.slices,
            self.templates,
            self.quotas,
            self.kueue_config,
            self.kueue_manager,
            *self.autoscalers,
        )

    def start(self) -> None:
        self._threads = [
            threading.Thread(
                target=store.run, args=(self._stop,), name=f"watch-{store.name}", daemon=True
            )
            for store in self.stores
        ]
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        # A thread between calls ends at once; one blocked reading a watch is silent, and a
        # daemon: it does not hold the exit up.
        deadline = time.monotonic() + 1.0
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    @property
    def ready(self) -> bool:
        return all(store.synced.is_set() for store in self.stores)

    def _refresh_catalog(self) -> None:
        found = Catalog.from_objects(list(self.device_classes.items.values()))
        with self._catalog_lock:  # the watches' threads each replace a part of it
            self._catalog = dataclasses.replace(
                found,
                sharing=self._catalog.sharing or {},
                published=self._catalog.published,
                autoscalers=self._catalog.autoscalers,
            )

    def _refresh_sharing(self) -> None:
        # A slice changes often (a driver republishes it); the catalog, and with it every
        # memoised translation, changes only when what the cluster shares, or which drivers
        # publish devices, does.
        slices = list(self.slices.items.values())
        sharing = sharing_of(s.sharing for s in slices)
        published = published_by(slices)
        with self._catalog_lock:
            if sharing != self._catalog.sharing or published != self._catalog.published:
                self._catalog = dataclasses.replace(
                    self._catalog, sharing=sharing, published=published
                )

    def _refresh_autoscalers(self) -> None:
        found = autoscalers.ordered(
            a for store in self.autoscalers for a in list(store.items.values()) if a is not None
        )
        with self._catalog_lock:
            if found != self._catalog.autoscalers:
                self._catalog = dataclasses.replace(self._catalog, autoscalers=found)

    @property
    def catalog(self) -> Catalog:
        return self._catalog

    def _refresh_kueue(self) -> None:
        self._kueue = kueue.read(
            self.kueue_config.get(kueue.CONFIG), self.kueue_manager.get(kueue.DEPLOYMENT)
        )

    @property
    def kueue(self) -> Kueue | None:
        return self._kueue

    def namespace_labels(self, name: str) -> Mapping[str, str] | None:
        return self.namespaces.get(name)

    def namespace_quotas(self, namespace: str) -> Sequence[Quota]:
        return self.quotas.in_namespace(namespace)

    def has_templates(self, namespace: str, templates: Iterable[Owned]) -> bool:
        if self.templates.stale:  # one may have been deleted since: ensure_templates tells
            return False
        get = self.templates.get
        for t in templates:
            found = get((namespace, t.name))
            if found is None or found.digest != t.digest:
                return False
        return True

    def template_count(self, namespace: str) -> int:
        return self.templates.count(namespace)

    async def ensure_templates(self, namespace: str, templates: Iterable[Owned]) -> None:
        pending = []
        for tpl in templates:
            key = (namespace, tpl.name)
            # A stale cache is not trusted: the create, and on AlreadyExists the read, tell.
            found = None if self.templates.stale else self.templates.get(key)
            if found is not None:
                if found.digest == tpl.digest:
                    continue
                self._metrics.templates_refused.inc()
                raise squatted(namespace, tpl.name, found)
            if key not in self._inflight:  # concurrent pods share one create
                task = asyncio.ensure_future(asyncio.to_thread(self._create, namespace, tpl))
                self._inflight[key] = task
                task.add_done_callback(functools.partial(self._done, key))
            pending.append(self._inflight[key])
        if not pending:
            return
        try:
            await asyncio.wait_for(
                asyncio.gather(*(asyncio.shield(p) for p in pending)), self._timeout
            )
        except TemplateSquatted:
            self._metrics.templates_refused.inc()
            raise
        except Exception as err:
            self._metrics.template_errors.inc()
            raise TemplateError(self._failure(err)) from None

    def _done(self, key: tuple[str, str], task: asyncio.Future[None]) -> None:
        self._inflight.pop(key, None)
        # Read here: when every pod waiting on it has timed out, nobody else reads it, and
        # asyncio would log it with a traceback ("Task exception was never retrieved").
        if not task.cancelled() and (err := task.exception()) is not None:
            log.debug("creating template %s/%s failed late: %s", *key, err)

    def _create(self, namespace: str, template: Owned) -> None:
        body = {
            **template.template,
            "metadata": {**template.template["metadata"], "namespace": namespace},
        }
        key = (namespace, template.name)
        self._metrics.api_calls.labels("create", "resourceclaimtemplates").inc()
        try:
            self._resource.create_namespaced_resource_claim_template(
                namespace, body, _request_timeout=self._timeout
            )
            self._metrics.templates_created.inc()
            asker = ASKER.get()
            log.info(
                "created ResourceClaimTemplate",
                extra={
                    "uid": asker and asker.uid,
                    "namespace": namespace,
                    "template": template.name,
                    "user": asker and asker.user,
                },
            )
        except ApiException as err:
            if err.status != 409:
                raise
            # AlreadyExists: another pod (or replica) made it, or someone else did under
            # gpu2dra's name. Only the API server's copy tells.
            self._metrics.api_calls.labels("get", "resourceclaimtemplates").inc()
            resp = self._resource.read_namespaced_resource_claim_template(
                template.name, namespace, _preload_content=False, _request_timeout=self._timeout
            )
            found = cached(orjson.loads(resp.data))
            if found.digest is not None:  # labelled: the watch says when it changes or goes
                self.templates.put(key, found)
            if found.digest != template.digest:
                raise squatted(namespace, template.name, found) from None
            return
        self.templates.put(key, Cached(dra_requests(body["spec"]["spec"]), template.digest))

    async def template_requests(self, namespace: str, name: str) -> list[DraRequest] | None:
        found = self.templates.get((namespace, name))
        if found is not None:
            return found.requests
        # Not in the cache: another's (the cache holds only gpu2dra's), or one created a moment
        # ago (by our own mutating webhook).
        key, now = (namespace, name), time.monotonic()
        if (kept := self._others.get(key)) is not None and now - kept[0] < OTHERS_TTL:
            return kept[1]
        read = self._resource.read_namespaced_resource_claim_template
        obj = await self._read(read, name, namespace, "resourceclaimtemplates")
        if obj is None:
            return None
        requests = dra_requests((obj.get("spec") or {}).get("spec"))
        self._others.pop(key, None)
        if len(self._others) >= OTHERS_KEPT:
            del self._others[next(iter(self._others))]  # the oldest read
        self._others[key] = (now, requests)
        return requests

    async def claim_requests(self, namespace: str, name: str) -> list[DraRequest] | None:
        obj = await self._read(
            self._resource.read_namespaced_resource_claim, name, namespace, "resourceclaims"
        )
        return None if obj is None else dra_requests(obj.get("spec"))

    async def _read(
        self, read: Callable[..., Any], name: str, namespace: str, resource: str
    ) -> Obj | None:
        def get() -> Obj | None:
            self._metrics.api_calls.labels("get", resource).inc()
            try:
                resp = read(name, namespace, _preload_content=False, _request_timeout=self._timeout)
            except ApiException as err:
                if err.status == 404:
                    return None
                raise
            return orjson.loads(resp.data)  # type: ignore[no-any-return]

        try:
            return await asyncio.wait_for(asyncio.to_thread(get), self._timeout)
        except Exception as err:
            raise ReadFailed(self._failure(err)) from None

    def _failure(self, err: Exception) -> str:
        """The one way an API call on the admission path says why it failed."""
        if isinstance(err, TimeoutError):
            return f"the API server did not answer within {self._timeout:g}s"
        if isinstance(err, ApiException):
            return f"{err.status} {err.reason}"
        return str(err) or type(err).__name__


class OfflineCluster:
    """No cluster: the policy's DeviceClasses, the default mode, and templates not created."""

    ready = True
    offline = True

    def __init__(self, policy: Policy) -> None:
        self.catalog = Catalog.of(policy.device_classes)

    def namespace_labels(self, name: str) -> Mapping[str, str] | None:
        return None

    def namespace_quotas(self, namespace: str) -> Sequence[Quota]:
        return ()  # offline, no quota is known: the pod is translated as asked

    kueue = None  # offline, no Kueue is known either

    def has_templates(self, namespace: str, templates: Iterable[Owned]) -> bool:
        return True  # offline, templates are returned, never created

    def template_count(self, namespace: str) -> int:
        return 0  # offline, nothing is created

    async def ensure_templates(self, namespace: str, templates: Iterable[Owned]) -> None:
        return None

    async def template_requests(self, namespace: str, name: str) -> list[DraRequest] | None:
        return None

    async def claim_requests(self, namespace: str, name: str) -> list[DraRequest] | None:
        return None

    def start(self) -> None:
        return None

    def stop(self) -> None:
        return None

"""LiveCluster: reads that fail, template creates that outlive their waiters, and the catalog
kept from the ResourceSlices' watch."""

from __future__ import annotations

import asyncio
import gc
import threading
from typing import Any

import orjson
import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from app.core import autoscalers
from app.core.catalog import SliceFacts
from app.core.templates import owned
from app.webhook.cluster import Cached, LiveCluster
from app.webhook.clusterview import ReadFailed, TemplateError
from app.webhook.metrics import Metrics
from tests.unit.watch.responses import FakeResponse


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
    shared = ("gpu.nvidia.com", frozenset({"", "memory", "shares"}))
    assert cluster.slices.items == {"n": SliceFacts(shared, "gpu.nvidia.com")}
    assert cluster.catalog.published == frozenset({"gpu.nvidia.com"})
    assert cluster.catalog.sharing == {"gpu.nvidia.com": frozenset({"", "memory", "shares"})}
    assert seen[0].sharing == {} and seen[1] is seen[2], "unchanged sharing, the same catalog"
    assert cluster.catalog.shares("gpu.nvidia.com", "shares")


class DeploymentApi:
    """One list of the Deployments a label selector picks; then stop."""

    def __init__(self, stop: threading.Event, *items: dict[str, Any]) -> None:
        self.stop, self.items = stop, list(items)
        self.selectors: list[str | None] = []

    def __call__(self, watch: bool = False, **kwargs: Any) -> FakeResponse:
        if watch:
            self.stop.set()
            return FakeResponse()
        self.selectors.append(kwargs.get("label_selector"))
        body = {"metadata": {"resourceVersion": "1"}, "items": self.items}
        return FakeResponse(orjson.dumps(body))


def test_the_catalog_names_the_node_autoscalers() -> None:
    """From a label-selected watch of Deployments: what capacity.py says of a pod whose
    claims no device could take."""
    karpenter = {
        "metadata": {
            "name": "karpenter",
            "namespace": "karpenter",
            "labels": {"app.kubernetes.io/name": "karpenter"},
        },
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {"name": "controller", "image": "public.ecr.aws/karpenter/controller:1.8.1"}
                    ]
                }
            }
        },
    }
    stop = threading.Event()
    cluster = LiveCluster(client.ApiClient(), Metrics())
    assert cluster.catalog.published == frozenset() and not cluster.catalog.autoscalers
    store = cluster.autoscalers[0]
    assert getattr(store._list, "keywords", None) == {"label_selector": autoscalers.SELECTORS[0]}
    store._list = DeploymentApi(stop, karpenter)
    store.run(stop)
    (found,) = cluster.catalog.autoscalers
    assert found.kind == "karpenter" and not found.adds_dra_nodes
    assert found.shown == "Karpenter v1.8.1 (karpenter/karpenter)"
    assert {s.name for s in cluster.autoscalers} <= {s.name for s in cluster.stores}


def test_the_template_cache_holds_only_gpu2dras_templates() -> None:
    """Listed and watched by gpu2dra's label: a cluster's other templates cost no memory."""
    cluster = LiveCluster(client.ApiClient(), Metrics())
    keywords = getattr(cluster.templates._list, "keywords", None)
    assert keywords == {"label_selector": "app.kubernetes.io/managed-by=gpu2dra"}


def test_a_stale_template_cache_is_not_trusted() -> None:
    """While the templates' watch is broken, a template the cache holds may have been deleted
    since (pruned): the pod's template is created again, and AlreadyExists read back."""
    template = owned({"metadata": {"name": "t"}, "spec": {"spec": {"devices": {"requests": []}}}})
    cluster = LiveCluster(client.ApiClient(), Metrics())
    cluster.templates.put(("ml", "t"), Cached([], template.digest))
    cluster.templates.synced.set()
    cluster.templates.current = True
    assert cluster.has_templates("ml", [template])
    cluster.templates.current = False  # as a broken watch leaves it, until listed again
    assert not cluster.has_templates("ml", [template])
    created: list[str] = []

    def create(namespace: str, body: Any, **kwargs: Any) -> None:
        created.append(body["metadata"]["name"])

    cluster._resource.create_namespaced_resource_claim_template = create
    asyncio.run(cluster.ensure_templates("ml", [template]))
    assert created == ["t"]


def test_validate_reads_a_template_not_gpu2dras_once_a_minute() -> None:
    """The template cache holds only gpu2dra's; another's template, named by pod after pod,
    is read from the API server once and remembered a while, not read for every pod."""
    reads: list[str] = []
    spec = {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "x"}}]}}

    class Response:
        data = orjson.dumps({"metadata": {"name": "team"}, "spec": {"spec": spec}})

    def read(name: str, namespace: str, **kwargs: Any) -> Response:
        reads.append(name)
        return Response()

    cluster = LiveCluster(client.ApiClient(), Metrics())
    cluster._resource.read_namespaced_resource_claim_template = read
    for _ in range(3):
        found = asyncio.run(cluster.template_requests("ml", "team"))
        assert found is not None and [r.device_class for r in found] == ["x"]
    assert reads == ["team"]

"""`gpu2dra exporter`: gpu2dra_pod_gpu_info, which pod holds which GPU, for every pod whose
devices come from DRA claims (gpu2dra's, the in-tree path's, any other), from watch caches of
pods, ResourceClaims and ResourceSlices; its plain-HTTP server, /metrics and the probes. A
scrape reads memory only: no API call.

It runs apart from the webhook, as one small replica (the chart's `exporter`): each webhook
replica exporting would give every series once per replica, and the webhook would need to
watch every pod of the cluster, which admission never reads.
"""

from __future__ import annotations

import logging
import signal
import ssl
import threading
from collections.abc import Callable, Collection, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from kubernetes import client
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from app.exporter.access import Access
from app.exporter.collector import PodGpuInfo
from app.exporter.gpuinfo import (
    ClaimDevices,
    PodGpus,
    SliceDevices,
    claim_devices,
    pod_gpus,
    slice_devices,
)
from app.watch.cachemetrics import CacheMetrics
from app.watch.stores import Store, name_key, namespaced_key

log = logging.getLogger(__name__)

# Only pods that can hold a device: bound, not finished. A pod that stops matching (it
# finishes) comes as a DELETED event, so the cache never holds finished pods.
POD_SELECTOR = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"
DRIVERS = ("gpu.nvidia.com",)


class Exporter:
    """The exporter's caches (their metrics in `metrics.registry`) and its collector."""

    def __init__(
        self,
        api: client.ApiClient,
        drivers: Collection[str] = DRIVERS,
        timeout: float = 10.0,
        metrics: CacheMetrics | None = None,
        access: Access | None = None,
    ) -> None:
        self.metrics = metrics or CacheMetrics()
        self.access = access  # None: /metrics is open to whoever reaches the port
        core, resource = client.CoreV1Api(api), client.ResourceV1Api(api)

        def pods(**kwargs: Any) -> Any:
            return core.list_pod_for_all_namespaces(field_selector=POD_SELECTOR, **kwargs)

        self.pods: Store[tuple[str, str], PodGpus | None] = Store(
            "pods", pods, key=namespaced_key, value=pod_gpus, metrics=self.metrics, timeout=timeout
        )
        self.claims: Store[tuple[str, str], ClaimDevices] = Store(
            "resourceclaims",
            resource.list_resource_claim_for_all_namespaces,
            key=namespaced_key,
            value=claim_devices,
            metrics=self.metrics,
            timeout=timeout,
        )
        self.slices: Store[str, SliceDevices] = Store(
            "resourceslices",
            resource.list_resource_slice,
            key=name_key,
            value=slice_devices,
            metrics=self.metrics,
            timeout=timeout,
            on_change=lambda: self.info.slices_changed(),
        )
        self.info = PodGpuInfo(self.pods, self.claims, self.slices, frozenset(drivers))
        # Its own registry: /metrics writes it through render(), the rest through
        # prometheus_client.
        self.info_registry = CollectorRegistry()
        self.info_registry.register(self.info)
        self._stop = threading.Event()

    @property
    def stores(self) -> tuple[Store[Any, Any], ...]:
        return (self.pods, self.claims, self.slices)

    @property
    def ready(self) -> bool:
        return all(store.synced.is_set() for store in self.stores)

    def start(self) -> None:
        for store in self.stores:
            threading.Thread(
                target=store.run, args=(self._stop,), name=f"watch-{store.name}", daemon=True
            ).start()

    def stop(self) -> None:
        self._stop.set()

    def app(self, environ: dict[str, Any], respond: Callable[..., Any]) -> Iterable[bytes]:
        """WSGI: /metrics (under `access`, its answer when it refuses); /readyz (503 until
        every cache has synced); /healthz."""
        path = environ.get("PATH_INFO", "")
        if path == "/metrics" and self.access is not None:
            answer = self.access.check(environ.get("HTTP_AUTHORIZATION"))
            if answer.status != 200:
                headers = [("Content-Type", "text/plain")]
                if answer.status == 401:
                    headers.append(("WWW-Authenticate", 'Bearer realm="gpu2dra exporter"'))
                respond(f"{answer.status} {_REASONS[answer.status]}", headers)
                return [answer.reason.encode() + b"\n"]
        if path == "/metrics":
            body = generate_latest(self.metrics.registry) + self.info.render()
            respond("200 OK", [("Content-Type", CONTENT_TYPE_LATEST)])
            return [body]
        if path == "/healthz" or (path == "/readyz" and self.ready):
            respond("200 OK", [("Content-Type", "text/plain")])
            return [b"ok\n"]
        if path == "/readyz":
            respond("503 Service Unavailable", [("Content-Type", "text/plain")])
            return [b"caches not synced\n"]
        respond("404 Not Found", [("Content-Type", "text/plain")])
        return [b"not found\n"]


_REASONS = {
    401: "Unauthorized",
    403: "Forbidden",
    429: "Too Many Requests",
    503: "Service Unavailable",
}


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _Quiet(WSGIRequestHandler):
    timeout = 10  # seconds a client may take to send its request (and, over TLS, to shake hands)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # a line per scrape would drown the log


def serve(exporter: Exporter, host: str, port: int, tls: ssl.SSLContext | None = None) -> None:
    """Serve until SIGTERM or SIGINT: plain HTTP, or HTTPS with `tls`. The chart's
    NetworkPolicy can restrict who scrapes, and the exporter's `Access` who reads /metrics."""
    server = make_server(host, port, exporter.app, _Server, _Quiet)
    if tls is not None:
        # The handshake happens on the request's first read, in its own thread and under the
        # handler's timeout, never in the thread that accepts connections.
        server.socket = tls.wrap_socket(
            server.socket, server_side=True, do_handshake_on_connect=False
        )

    def stop(*_: object) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    exporter.start()
    log.info(
        "exporter listening on %s:%d (%s, /metrics %s)",
        host,
        port,
        "HTTPS" if tls else "HTTP",
        "for callers allowed to get /metrics" if exporter.access else "open",
    )
    try:
        server.serve_forever()
    finally:
        exporter.stop()
        server.server_close()

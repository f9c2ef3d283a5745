"""The HTTP face of gpu2dra: FastAPI on uvicorn, built by `create_app(settings)`."""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections.abc import AsyncIterator, Callable, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Annotated, Any, Protocol, TypeVar

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from app.core.catalog import Catalog
from app.core.outcomes import Code, Finding
from app.core.policy import MODES, Policy
from app.kubeconfig import NoCluster
from app.manifests.documents import ManifestError
from app.manifests.render import Output, translate_text
from app.watch.client import serving_client
from app.webhook.cluster import LiveCluster, OfflineCluster
from app.webhook.clusterview import ClusterView
from app.webhook.endpoint import (
    Admission,
    ASGIReceive,
    ASGISend,
    Disconnected,
    TooLarge,
    answer,
    closing,
    read_body,
)
from app.webhook.metrics import Latencies, Metrics
from app.webhook.mutate import Mutator
from app.webhook.reviews import AdmissionRequest
from app.webhook.settings import Settings
from app.webhook.validate import validate
from app.webhook.verdicts import Decision, Verdict, allow

log = logging.getLogger("gpu2dra")

T = TypeVar("T")

# What each port serves when /translate and /metrics have one of their own (--internal-port):
# the admission port, which only the API server need reach, and the other.
ADMISSION_PATHS = frozenset({"/mutate", "/validate", "/healthz", "/readyz"})
INTERNAL_PATHS = frozenset({"/translate", "/metrics", "/healthz", "/readyz"})
# Requests /translate holds per worker thread, running or waiting, before it answers 503.
TRANSLATE_QUEUE = 4
# Manifests up to this size are translated on a thread of their own, beside the large ones:
# a few milliseconds of work never waits behind seconds of it.
SMALL_MANIFEST = 64 * 1024


class NotServing(RuntimeError):
    """gpu2dra must not start: it would admit pods it cannot translate."""


class Cluster(ClusterView, Protocol):
    @property
    def ready(self) -> bool: ...

    def start(self) -> None: ...

    def stop(self) -> None: ...


def make_cluster(settings: Settings, metrics: Metrics) -> Cluster:
    if settings.offline:
        return _offline(settings.policy)
    try:
        api = serving_client()
    except NoCluster as err:
        if settings.in_pod:  # `gpu2dra serve` says so before it starts: see app/cli/commands.py
            raise NotServing(f"running in a pod, but no in-cluster client: {err}") from None
        log.info("offline mode: %s", err)
        return _offline(settings.policy)
    return LiveCluster(api, metrics, timeout=settings.api_timeout)


def _offline(policy: Policy) -> OfflineCluster:
    """The offline cluster, and a first line that says what it means for /mutate."""
    if policy.default_mode == "disabled":
        log.warning(
            "offline: no namespace's labels are read, so every namespace has the policy's "
            "defaultMode, disabled: /mutate admits pods unchanged, each answer saying why "
            "(outcome namespace-unseen); a policy with defaultMode: enabled translates them. "
            "POST /translate translates as enabled unless given ?mode="
        )
    return OfflineCluster(policy)


def _translate_body(
    body: bytes,
    policy: Policy,
    catalog: Catalog,
    *,
    namespace: str | None,
    mode: Any,
    as_yaml: bool,
) -> tuple[int, bytes]:
    """POST /translate's work: the status and the answer."""
    try:
        output: Output = "yaml" if as_yaml else "json"
        rendered = translate_text(
            body.decode(), policy, catalog, namespace=namespace, mode=mode, output=output
        )
        if not as_yaml:
            return 200, rendered.body
        # A warning quotes names from the manifest: a line break in one would end the comment.
        head = "".join(f"# warning: {' '.join(w.splitlines())}\n" for w in rendered.warnings)
        return 200, head.encode() + rendered.body
    except ManifestError as err:
        return 400, f"{err}\n".encode()
    except UnicodeDecodeError:
        return 400, b"the manifest is not UTF-8 text\n"


LAG_INTERVAL = 0.25  # seconds between the event loop's lag samples


async def sample_loop_lag(lag: Latencies, interval: float = LAG_INTERVAL) -> None:
    """How late each timer runs: a starved process (no free core, the GIL held by a watch
    thread, a slow handler) delays every answer by as much, unseen by the handler's own time."""
    while True:
        start = time.perf_counter()
        await asyncio.sleep(interval)
        lag.observe(max(0.0, time.perf_counter() - start - interval))


class Busy(Exception):
    """/translate holds as many requests as it may."""


class Late(Exception):
    """A translation took longer than its deadline."""


class TranslatePool:
    """/translate's threads, apart from the default executor whose threads admission's
    template creates and /validate's reads use: a flood of large manifests waits here, or is
    refused, and never delays an admission. A translation past the deadline is answered 503;
    one already running cannot be stopped and keeps its place until it ends, so that slow
    requests cannot pile up beyond the pool's room."""

    def __init__(self, name: str, *, workers: int, deadline: float) -> None:
        self.executor = ThreadPoolExecutor(workers, thread_name_prefix=name)
        self.room, self.deadline = workers * TRANSLATE_QUEUE, deadline
        self.in_hand = 0

    async def run(self, call: Callable[[], T]) -> T:
        if self.in_hand >= self.room:
            raise Busy
        self.in_hand += 1
        future = asyncio.get_running_loop().run_in_executor(self.executor, call)
        future.add_done_callback(self._done)
        try:
            async with asyncio.timeout(self.deadline):
                return await future  # a timeout cancels a call still waiting for a thread
        except TimeoutError:
            raise Late from None

    def _done(self, _: object) -> None:
        self.in_hand -= 1

    def shutdown(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)


def serving_only(app: App, paths: frozenset[str]) -> Callable[..., Any]:
    """`app` as one port serves it: other paths are 404."""

    async def port(scope: MutableMapping[str, Any], receive: ASGIReceive, send: ASGISend) -> None:
        if scope["type"] == "http" and scope["path"] not in paths:
            return await answer(send, 404, b"not served on this port\n")
        await app(scope, receive, send)

    return port


def get_cluster(request: Request) -> Cluster:
    return request.app.cluster  # type: ignore[no-any-return]


ClusterDep = Annotated[Cluster, Depends(get_cluster)]


class App(FastAPI):
    admission: dict[str, Admission]
    cluster: Cluster  # set at startup; an attribute, not app.state: read on every admission
    draining = False  # set on SIGTERM: not ready, and every answer closes its connection

    async def __call__(
        self, scope: MutableMapping[str, Any], receive: ASGIReceive, send: ASGISend
    ) -> None:
        if scope["type"] == "http":
            if self.draining:
                send = closing(send)
            if scope["method"] == "POST" and (endpoint := self.admission.get(scope["path"])):
                return await endpoint(scope, receive, send)
        await super().__call__(scope, receive, send)


def create_app(settings: Settings, cluster: Cluster | None = None) -> App:
    metrics = Metrics()
    pools = (
        TranslatePool("gpu2dra-translate-small", workers=1, deadline=settings.translate_deadline),
        TranslatePool(
            "gpu2dra-translate",
            workers=settings.translate_workers,
            deadline=settings.translate_deadline,
        ),
    )

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        app.cluster = cluster or make_cluster(settings, metrics)
        app.cluster.start()
        # What exists now (modules, the app, the API client) lives as long as the process:
        # out of the collector's sight, full collections stay short and do not stall answers.
        gc.collect()
        gc.freeze()
        sampler = asyncio.create_task(sample_loop_lag(metrics.loop_lag))
        yield
        sampler.cancel()
        for pool in pools:
            pool.shutdown()
        app.cluster.stop()

    app = App(title="gpu2dra", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.settings, app.state.metrics = settings, metrics
    app.admission = _admission(app, settings, metrics)
    _add_translate(app, settings, metrics, pools)
    _add_probes(app, metrics)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> PlainTextResponse:
        return PlainTextResponse(f"{exc.detail}\n", status_code=exc.status_code)

    return app


def _admission(app: App, settings: Settings, metrics: Metrics) -> dict[str, Admission]:
    """POST /mutate and /validate, each deciding on the cluster the app holds when asked."""
    mutator = Mutator(settings.policy)
    deadline = settings.deadline

    def mutate(adm: AdmissionRequest) -> Decision:
        return mutator(adm, app.cluster)

    def mutate_late(adm: AdmissionRequest) -> Verdict:
        return mutator.failed(Finding(Code.LATE, seconds=deadline))

    def validate_(adm: AdmissionRequest) -> Decision:
        return validate(adm, app.cluster, settings.template_writers)

    def validate_late(adm: AdmissionRequest) -> Verdict:
        return allow([f"gpu2dra could not check DeviceClasses within {deadline:g}s"])

    max_body = settings.max_body
    return {
        "/mutate": Admission(
            "mutate",
            decide=mutate,
            late=mutate_late,
            deadline=deadline,
            max_body=max_body,
            metrics=metrics,
        ),
        "/validate": Admission(
            "validate",
            decide=validate_,
            late=validate_late,
            deadline=deadline,
            max_body=max_body,
            metrics=metrics,
        ),
    }


def _add_translate(
    app: App, settings: Settings, metrics: Metrics, pools: tuple[TranslatePool, TranslatePool]
) -> None:
    """POST /translate: a manifest in, the manifest translated out (404 when turned off)."""
    tally = metrics.tally("translate", ("ok", "bad-request", "too-large", "busy", "late"))

    @app.post("/translate")
    async def translate_(
        request: Request, cluster: ClusterDep, namespace: str | None = None, mode: str = "enabled"
    ) -> Response:
        if not settings.translate_enabled:
            raise HTTPException(404, "the /translate endpoint is turned off")
        start = time.perf_counter()
        if mode not in MODES:
            tally.count("bad-request", time.perf_counter() - start)
            raise HTTPException(400, f"mode must be one of {', '.join(MODES)}")
        try:
            body = await read_body(request.headers.raw, request.receive, settings.max_body)
        except TooLarge:
            tally.count("too-large", time.perf_counter() - start)
            raise HTTPException(413, f"body over {settings.max_body} bytes") from None
        except Disconnected:
            return Response(status_code=400)  # nobody reads it
        as_yaml = "yaml" in request.headers.get("accept", "")
        catalog = cluster.catalog
        pool = pools[0] if len(body) <= SMALL_MANIFEST else pools[1]
        # Parsing and writing a large manifest takes a while: off the event loop, and on
        # threads of its own, so that admission answers and probes are not held up behind it.
        try:
            status, text = await pool.run(
                lambda: _translate_body(
                    body, settings.policy, catalog, namespace=namespace, mode=mode, as_yaml=as_yaml
                )
            )
        except Busy:
            tally.count("busy", time.perf_counter() - start)
            return PlainTextResponse(
                f"{pool.room} translations in progress or waiting; retry later\n",
                status_code=503,
                headers={"Retry-After": "1"},
            )
        except Late:
            tally.count("late", time.perf_counter() - start)
            raise HTTPException(
                503, f"the translation took longer than {settings.translate_deadline:g}s"
            ) from None
        tally.count("ok" if status == 200 else "bad-request", time.perf_counter() - start)
        if status != 200:
            return PlainTextResponse(text, status_code=status)
        return Response(text, media_type="application/yaml" if as_yaml else "application/json")


def _add_probes(app: App, metrics: Metrics) -> None:
    """GET /healthz, /readyz (not while caches sync or the replica drains) and /metrics."""

    @app.get("/healthz")
    async def healthz() -> PlainTextResponse:
        return PlainTextResponse("ok\n")

    @app.get("/readyz")
    async def readyz(cluster: ClusterDep) -> PlainTextResponse:
        if app.draining:
            return PlainTextResponse("shutting down\n", status_code=503)
        if not cluster.ready:
            return PlainTextResponse("caches not synced\n", status_code=503)
        return PlainTextResponse("ok\n")

    @app.get("/metrics")
    async def metrics_() -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

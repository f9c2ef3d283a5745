"""The HTTP face of gpu2dra: FastAPI on uvicorn, built by `create_app(settings)`."""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, MutableMapping
from contextlib import asynccontextmanager
from typing import Annotated, Any, Protocol

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from app.core.catalog import Catalog
from app.core.policy import MODES, Policy
from app.manifests.documents import ManifestError, Output, translate_text
from app.webhook.caches import LiveCluster, OfflineCluster, load_api_client
from app.webhook.metrics import Metrics
from app.webhook.mutate import ClusterView, Decision, Mutator, validate
from app.webhook.reviews import (
    AdmissionRequest,
    AdmissionResponse,
    ReviewError,
    allowed,
    denied,
    parse_review,
    review,
)
from app.webhook.settings import Settings

log = logging.getLogger("gpu2dra")


class Cluster(ClusterView, Protocol):
    @property
    def ready(self) -> bool: ...

    def start(self) -> None: ...

    def stop(self) -> None: ...


def make_cluster(settings: Settings, metrics: Metrics) -> Cluster:
    api = None if settings.offline else load_api_client()
    if api is None:
        log.info("no kubeconfig or in-cluster config: offline mode")
        return OfflineCluster(settings.policy)
    return LiveCluster(api, metrics, timeout=settings.api_timeout)


def _translate_body(
    body: bytes, policy: Policy, catalog: Catalog, namespace: str | None, mode: Any, as_yaml: bool
) -> tuple[int, bytes]:
    """POST /translate's work: the status and the answer."""
    try:
        output: Output = "yaml" if as_yaml else "json"
        rendered = translate_text(body.decode(), policy, catalog, namespace, mode, output)
        if not as_yaml:
            return 200, rendered.body
        # A warning quotes names from the manifest: a line break in one would end the comment.
        head = "".join(f"# warning: {' '.join(w.splitlines())}\n" for w in rendered.warnings)
        return 200, head.encode() + rendered.body
    except ManifestError as err:
        return 400, f"{err}\n".encode()
    except UnicodeDecodeError:
        return 400, b"the manifest is not UTF-8 text\n"


def get_cluster(request: Request) -> Cluster:
    return request.app.state.cluster  # type: ignore[no-any-return]


ClusterDep = Annotated[Cluster, Depends(get_cluster)]


ASGIReceive = Callable[[], Awaitable[MutableMapping[str, Any]]]
ASGISend = Callable[[MutableMapping[str, Any]], Awaitable[None]]
_JSON = [(b"content-type", b"application/json")]
_TEXT = [(b"content-type", b"text/plain; charset=utf-8")]


class Admission:
    """POST /mutate or /validate as a bare ASGI endpoint: on every GPU pod's create path, so
    it skips the framework's routing, dependency injection and middleware."""

    def __init__(
        self,
        endpoint: str,
        decide: Callable[[AdmissionRequest], Decision],
        late: Callable[[AdmissionRequest], AdmissionResponse],
        settings: Settings,
        metrics: Metrics,
    ) -> None:
        self.endpoint, self.decide, self.late = endpoint, decide, late
        self.deadline, self.max_body = settings.deadline, settings.max_body
        self.latency = metrics.latency.labels(endpoint)
        self.results = {
            r: metrics.requests.labels(endpoint, r)
            for r in ("patched", "allowed", "denied", "bad-request")
        }

    async def __call__(
        self, scope: MutableMapping[str, Any], receive: ASGIReceive, send: ASGISend
    ) -> None:
        start = time.perf_counter()
        body = await self._body(scope, receive)
        if body is None:
            return await _answer(send, 413, f"body over {self.max_body} bytes\n".encode(), _TEXT)
        try:
            adm = parse_review(body)
        except ReviewError as err:
            self.results["bad-request"].inc()
            return await _answer(send, 400, f"{err}\n".encode(), _TEXT)
        try:
            response = self.decide(adm)
            if isinstance(response, Coroutine):  # the API server is asked: bounded
                try:
                    async with asyncio.timeout(self.deadline):
                        response = await response
                except TimeoutError:
                    response = self.late(adm)
        except Exception:
            log.exception(
                "%s failed", self.endpoint, extra={"uid": adm["uid"], "endpoint": self.endpoint}
            )
            response = denied(adm["uid"], "gpu2dra internal error", code=500)
        await _answer(send, 200, review(response), _JSON)
        elapsed = time.perf_counter() - start
        result = (
            "patched" if "patch" in response else ("allowed" if response["allowed"] else "denied")
        )
        self.results[result].inc()
        self.latency.observe(elapsed)
        if result != "allowed" or "warnings" in response:
            log.info(
                "%s %s",
                self.endpoint,
                result,
                extra={
                    "uid": adm["uid"],
                    "endpoint": self.endpoint,
                    "result": result,
                    "namespace": adm.get("namespace"),
                    "kind": adm["kind"].get("kind"),
                    "operation": adm["operation"],
                    "ms": round(elapsed * 1000, 3),
                },
            )

    async def _body(self, scope: MutableMapping[str, Any], receive: ASGIReceive) -> bytes | None:
        """The request body, or None when it is over the cap."""
        for name, value in scope["headers"]:
            if name == b"content-length" and value.isdigit() and int(value) > self.max_body:
                return None
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                return None
            chunks.append(chunk)
            more = message.get("more_body", False)
        return b"".join(chunks)


async def _answer(send: ASGISend, status: int, body: bytes, headers: list[Any]) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _closing(send: ASGISend) -> ASGISend:
    """`send` with `Connection: close` on the response: the client opens a new connection
    for its next request, which reaches a replica that is not shutting down. A kept-alive
    connection would otherwise be cut when this one stops, failing the request sent on it."""

    async def closing(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            headers = [*message.get("headers", ()), (b"connection", b"close")]
            message = {**message, "headers": headers}
        await send(message)

    return closing


class App(FastAPI):
    admission: dict[str, Admission]

    async def __call__(
        self, scope: MutableMapping[str, Any], receive: ASGIReceive, send: ASGISend
    ) -> None:
        if scope["type"] == "http" and self.state.draining:
            send = _closing(send)
        if scope["type"] == "http" and scope["method"] == "POST":
            endpoint = self.admission.get(scope["path"])
            if endpoint is not None:
                return await endpoint(scope, receive, send)
        await super().__call__(scope, receive, send)


def create_app(settings: Settings, cluster: Cluster | None = None) -> App:
    metrics = Metrics()
    mutator = Mutator(settings.policy)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.cluster = cluster or make_cluster(settings, metrics)
        app.state.cluster.start()
        # What exists now (modules, the app, the API client) lives as long as the process:
        # out of the collector's sight, full collections stay short and do not stall answers.
        gc.collect()
        gc.freeze()
        yield
        app.state.cluster.stop()

    app = App(title="gpu2dra", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.settings, app.state.metrics, app.state.draining = settings, metrics, False

    async def body_of(request: Request) -> bytes:
        length = request.headers.get("content-length", "")
        if length.isdigit() and int(length) > settings.max_body:
            raise HTTPException(413, f"body over {settings.max_body} bytes")
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > settings.max_body:
                raise HTTPException(413, f"body over {settings.max_body} bytes")
            chunks.append(chunk)
        return b"".join(chunks)

    def mutate(adm: AdmissionRequest) -> Decision:
        decision = mutator(adm, app.state.cluster)
        if not isinstance(decision, Coroutine):
            count_translation(decision)
            return decision

        async def counted() -> AdmissionResponse:
            return count_translation(await decision)

        return counted()

    translated = {m: metrics.translations.labels(m) for m in ("enabled", "audit")}

    def count_translation(response: AdmissionResponse) -> AdmissionResponse:
        if "patch" in response:
            translated["enabled"].inc()
        elif "auditAnnotations" in response:
            translated["audit"].inc()
        return response

    def mutate_late(adm: AdmissionRequest) -> AdmissionResponse:
        return mutator.failed(adm["uid"], f"did not answer within {settings.deadline:g}s")

    def validate_(adm: AdmissionRequest) -> Decision:
        return validate(adm, app.state.cluster)

    def validate_late(adm: AdmissionRequest) -> AdmissionResponse:
        why = f"gpu2dra could not check DeviceClasses within {settings.deadline:g}s"
        return allowed(adm["uid"], [why])

    app.admission = {
        "/mutate": Admission("mutate", mutate, mutate_late, settings, metrics),
        "/validate": Admission("validate", validate_, validate_late, settings, metrics),
    }

    @app.post("/translate")
    async def translate_(
        request: Request, cluster: ClusterDep, namespace: str | None = None, mode: str = "enabled"
    ) -> Response:
        if not settings.translate_enabled:
            raise HTTPException(404, "the /translate endpoint is turned off")
        if mode not in MODES:
            raise HTTPException(400, f"mode must be one of {', '.join(MODES)}")
        body = await body_of(request)
        as_yaml = "yaml" in request.headers.get("accept", "")
        # Parsing and writing a large manifest takes a while: off the event loop, so that
        # admission answers and probes are not held up behind it.
        status, answer = await asyncio.to_thread(
            _translate_body, body, settings.policy, cluster.catalog, namespace, mode, as_yaml
        )
        metrics.requests.labels("translate", "ok" if status == 200 else "bad-request").inc()
        if status != 200:
            return PlainTextResponse(answer, status_code=status)
        return Response(answer, media_type="application/yaml" if as_yaml else "application/json")

    @app.get("/healthz")
    async def healthz() -> PlainTextResponse:
        return PlainTextResponse("ok\n")

    @app.get("/readyz")
    async def readyz(request: Request, cluster: ClusterDep) -> PlainTextResponse:
        if request.app.state.draining:
            return PlainTextResponse("shutting down\n", status_code=503)
        if not cluster.ready:
            return PlainTextResponse("caches not synced\n", status_code=503)
        return PlainTextResponse("ok\n")

    @app.get("/metrics")
    async def metrics_() -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> PlainTextResponse:
        return PlainTextResponse(f"{exc.detail}\n", status_code=exc.status_code)

    return app

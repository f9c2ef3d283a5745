"""The HTTP face of gpu2dra: FastAPI on uvicorn, built by `create_app(settings)`."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Annotated, Protocol

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from app.admission import ClusterView, Mutator, validate
from app.cluster import LiveCluster, OfflineCluster, load_api_client
from app.manifests import (
    ManifestError,
    iter_output,
    load_documents,
    to_json,
    to_yaml,
    translate_documents,
)
from app.metrics import Metrics
from app.policy import MODES, Policy
from app.reviews import (
    AdmissionRequest,
    AdmissionResponse,
    ReviewError,
    allowed,
    denied,
    parse_review,
    review,
)

log = logging.getLogger("gpu2dra")

MiB = 1024 * 1024


@dataclass(frozen=True)
class Settings:
    policy: Policy
    offline: bool = False
    max_body: int = 7 * MiB
    translate_enabled: bool = True
    api_timeout: float = 2.0  # each API call on the admission path
    deadline: float = 3.0  # each admission answer; well under the webhook's timeoutSeconds


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


def get_cluster(request: Request) -> Cluster:
    return request.app.state.cluster  # type: ignore[no-any-return]


ClusterDep = Annotated[Cluster, Depends(get_cluster)]


def create_app(settings: Settings, cluster: Cluster | None = None) -> FastAPI:
    metrics = Metrics()
    mutator = Mutator(settings.policy)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.cluster = cluster or make_cluster(settings, metrics)
        app.state.cluster.start()
        yield
        app.state.cluster.stop()

    app = FastAPI(title="gpu2dra", lifespan=lifespan, docs_url=None, redoc_url=None)
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

    async def answer(
        endpoint: str,
        request: Request,
        decide: Callable[[AdmissionRequest], Awaitable[AdmissionResponse]],
        late: Callable[[AdmissionRequest], AdmissionResponse],
    ) -> Response:
        start = time.perf_counter()
        try:
            adm = parse_review(await body_of(request))
        except ReviewError as err:
            metrics.requests.labels(endpoint, "bad-request").inc()
            return PlainTextResponse(f"{err}\n", status_code=400)
        try:
            response = await asyncio.wait_for(decide(adm), settings.deadline)
        except TimeoutError:
            response = late(adm)
        except Exception:
            log.exception("%s failed", endpoint, extra={"uid": adm["uid"], "endpoint": endpoint})
            response = denied(adm["uid"], "gpu2dra internal error", code=500)
        elapsed = time.perf_counter() - start
        result = (
            "patched" if "patch" in response else ("allowed" if response["allowed"] else "denied")
        )
        metrics.requests.labels(endpoint, result).inc()
        metrics.latency.labels(endpoint).observe(elapsed)
        if result != "allowed" or response.get("warnings"):
            log.info(
                "%s %s",
                endpoint,
                result,
                extra={
                    "uid": adm["uid"],
                    "endpoint": endpoint,
                    "result": result,
                    "namespace": adm.get("namespace"),
                    "kind": adm["kind"].get("kind"),
                    "operation": adm["operation"],
                    "ms": round(elapsed * 1000, 3),
                },
            )
        return Response(review(response), media_type="application/json")

    @app.post("/mutate")
    async def mutate(request: Request, cluster: ClusterDep) -> Response:
        async def decide(adm: AdmissionRequest) -> AdmissionResponse:
            response = await mutator(adm, cluster)
            if "patch" in response:
                metrics.translations.labels("enabled").inc()
            elif "auditAnnotations" in response:
                metrics.translations.labels("audit").inc()
            return response

        def late(adm: AdmissionRequest) -> AdmissionResponse:
            return mutator.failed(adm["uid"], f"did not answer within {settings.deadline:g}s")

        return await answer("mutate", request, decide, late)

    @app.post("/validate")
    async def validate_(request: Request, cluster: ClusterDep) -> Response:
        def late(adm: AdmissionRequest) -> AdmissionResponse:
            why = f"gpu2dra could not check DeviceClasses within {settings.deadline:g}s"
            return allowed(adm["uid"], [why])

        return await answer("validate", request, lambda adm: validate(adm, cluster), late)

    @app.post("/translate")
    async def translate_(
        request: Request, cluster: ClusterDep, namespace: str | None = None, mode: str = "enabled"
    ) -> Response:
        if not settings.translate_enabled:
            raise HTTPException(404, "the /translate endpoint is turned off")
        if mode not in MODES:
            raise HTTPException(400, f"mode must be one of {', '.join(MODES)}")
        try:
            docs = load_documents(await body_of(request))
            result = translate_documents(docs, settings.policy, cluster.catalog, namespace, mode)
        except (ManifestError, UnicodeDecodeError) as err:
            metrics.requests.labels("translate", "bad-request").inc()
            return PlainTextResponse(f"{err}\n", status_code=400)
        metrics.requests.labels("translate", "ok").inc()
        accept = request.headers.get("accept", "")
        if "yaml" in accept:
            head = "".join(f"# warning: {w}\n" for w in result.warnings)
            return Response(head + to_yaml(iter_output(result)), media_type="application/yaml")
        return Response(to_json(result), media_type="application/json")

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

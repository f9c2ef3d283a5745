"""POST /mutate and /validate as bare ASGI endpoints: on every GPU pod's create path, so they
skip the framework's routing, dependency injection and middleware."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any, Literal, get_args

from app.webhook.metrics import Metrics
from app.webhook.reviews import AdmissionRequest, ReviewError, parse_review, review
from app.webhook.verdicts import Decision, Result, Verdict

log = logging.getLogger("gpu2dra")

ASGIReceive = Callable[[], Awaitable[MutableMapping[str, Any]]]
ASGISend = Callable[[MutableMapping[str, Any]], Awaitable[None]]
_JSON = [(b"content-type", b"application/json")]
_TEXT = [(b"content-type", b"text/plain; charset=utf-8")]
# What the endpoint answers itself, without a verdict: 400, 413 and 500.
Failure = Literal["bad-request", "too-large", "error"]
# Every result an endpoint counts in gpu2dra_requests_total (docs/reference/metrics.md): the
# verdicts' and its own.
RESULTS: tuple[Result | Failure, ...] = (*get_args(Result), *get_args(Failure))
_TRANSLATED = {"patched": "enabled", "audit": "audit"}


class TooLarge(Exception):
    """The body is over the cap."""


class Disconnected(Exception):
    """The client went, or was cut off for sending too slowly, before its body was whole."""


async def read_body(
    headers: Iterable[tuple[bytes, bytes]], receive: ASGIReceive, max_body: int
) -> bytes:
    """The request body; TooLarge as soon as it is known to be over `max_body` bytes,
    Disconnected if the connection closes first."""
    for name, value in headers:
        if name == b"content-length" and value.isdigit() and int(value) > max_body:
            raise TooLarge
    chunks, size, more = [], 0, True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise Disconnected
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > max_body:
            raise TooLarge
        chunks.append(chunk)
        more = message.get("more_body", False)
    return b"".join(chunks)


async def answer(send: ASGISend, status: int, body: bytes, headers: list[Any] = _TEXT) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def closing(send: ASGISend) -> ASGISend:
    """`send` with `Connection: close` on the response: the client opens a new connection
    for its next request, which reaches a replica that is not shutting down. A kept-alive
    connection would otherwise be cut when this one stops, failing the request sent on it."""

    async def closing_send(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            headers = [*message.get("headers", ()), (b"connection", b"close")]
            message = {**message, "headers": headers}
        await send(message)

    return closing_send


class Admission:
    """One admission endpoint: the review parsed, the verdict decided within the deadline,
    counted and logged from what it is."""

    def __init__(
        self,
        endpoint: str,
        *,
        decide: Callable[[AdmissionRequest], Decision],
        late: Callable[[AdmissionRequest], Verdict],
        deadline: float,
        max_body: int,
        metrics: Metrics,
    ) -> None:
        self.endpoint, self.decide, self.late = endpoint, decide, late
        self.deadline, self.max_body = deadline, max_body
        self.tally = metrics.tally(endpoint, RESULTS)
        self.translations = metrics.translations
        self.outcomes = metrics.outcomes

    async def __call__(
        self, scope: MutableMapping[str, Any], receive: ASGIReceive, send: ASGISend
    ) -> None:
        start = time.perf_counter()
        try:
            body = await read_body(scope["headers"], receive, self.max_body)
        except TooLarge:
            self.tally.count("too-large", time.perf_counter() - start)
            return await answer(send, 413, f"body over {self.max_body} bytes\n".encode())
        except Disconnected:
            return  # nobody to answer
        try:
            adm = parse_review(body)
        except ReviewError as err:
            self.tally.count("bad-request", time.perf_counter() - start)
            return await answer(send, 400, f"{err}\n".encode())
        try:
            verdict = self.decide(adm)
            if not isinstance(verdict, Verdict):  # a coroutine: the API server is asked, bounded
                try:
                    async with asyncio.timeout(self.deadline):
                        verdict = await verdict
                except TimeoutError:
                    verdict = self.late(adm)
        except RecursionError:  # only from a request nested deeper than Python compares
            self.tally.count("bad-request", time.perf_counter() - start)
            return await answer(send, 400, b"request nested too deeply\n")
        except Exception:
            # A fault of gpu2dra's own fails the call, so that the registration's failurePolicy
            # decides (Ignore: the pod is admitted untranslated). A 200 with allowed: false
            # would be a rejection the API server applies whatever the policy says.
            self.tally.count("error", time.perf_counter() - start)
            log.exception(
                "%s failed",
                self.endpoint,
                extra={"uid": adm["uid"], "endpoint": self.endpoint, "result": "error"},
            )
            return await answer(send, 500, f"gpu2dra internal error (uid {adm['uid']})\n".encode())
        await answer(send, 200, review(adm["uid"], verdict.response), _JSON)
        self._record(adm, verdict, time.perf_counter() - start)

    def _record(self, adm: AdmissionRequest, verdict: Verdict, elapsed: float) -> None:
        """The answer counted in the metrics, and logged."""
        self.tally.count(verdict.result, elapsed)
        if (mode := _TRANSLATED.get(verdict.result)) is not None:
            self.translations[mode] += 1
        for code in verdict.codes:
            self.outcomes[code] += 1
        # Notable answers at info; a routine patch or allow (the metrics count those, and the
        # API server's audit log records every patch) at debug, so that building its record, a
        # large part of a remembered pod's answer (docs/performance.md), is paid only when
        # asked for.
        routine = verdict.result in ("patched", "allowed") and "warnings" not in verdict.response
        level = logging.DEBUG if routine else logging.INFO
        if log.isEnabledFor(level):
            log.log(
                level,
                "%s %s",
                self.endpoint,
                verdict.result,
                extra={
                    "uid": adm["uid"],
                    "endpoint": self.endpoint,
                    "result": verdict.result,
                    "codes": list(verdict.codes),
                    "namespace": adm.get("namespace"),
                    "kind": adm["kind"].get("kind"),
                    "operation": adm["operation"],
                    "ms": round(elapsed * 1000, 3),
                },
            )

"""Running the webhook: TLS, certificate reloads, uvicorn on its own loop, read deadlines for
slow clients, a second port for what is not admission, a graceful drain."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import ssl
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from app.webhook.application import ADMISSION_PATHS, INTERNAL_PATHS, App, create_app, serving_only
from app.webhook.certs import make_certs
from app.webhook.settings import Listen, Settings
from app.webhook.tls import harden, peer_names, reload_certificates

log = logging.getLogger("gpu2dra")

# The API server keeps an idle connection to a webhook for 90 s (Go's IdleConnTimeout) and
# does not resend a POST sent on a connection the server has just closed: it fails the
# admission with EOF. Kept open longer than that, an idle connection is always closed by the
# API server first (uvicorn's default, 5 s, lost pod creates: docs/performance.md).
KEEP_ALIVE_SECONDS = 120


def _protocol(*, read_timeout: float, client_names: frozenset[str]) -> type[asyncio.Protocol]:
    """uvicorn's HTTP/1.1 (httptools) with a read deadline, and the client's names checked.

    uvicorn times out only idle kept-alive connections: one that sends half its headers or
    half its body, a byte now and then, stays open for good. Here a connection must send a
    whole request within `read_timeout` of opening, or of its request's first byte; between
    requests uvicorn's keep-alive applies as before."""
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class Protocol(HttpToolsProtocol):
        _reading: asyncio.TimerHandle | None = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            if client_names and not self._named(transport):
                transport.abort()
                return
            self._arm()

        def on_message_begin(self) -> None:
            super().on_message_begin()
            if self._reading is None:
                self._arm()

        def on_message_complete(self) -> None:
            super().on_message_complete()
            self._disarm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._reading = self.loop.call_later(read_timeout, self._too_slow)

        def _disarm(self) -> None:
            if self._reading is not None:
                self._reading.cancel()
                self._reading = None

        def _too_slow(self) -> None:
            self._reading = None
            if not self.transport.is_closing():
                log.info(
                    "closed a connection from %s that sent no whole request within %gs",
                    _peer(self.client),
                    read_timeout,
                )
                # Not close(): that would wait up to 30 s for the client's TLS close_notify.
                self.transport.abort()

        def _named(self, transport: Any) -> bool:
            tls = transport.get_extra_info("ssl_object")
            names = peer_names(tls.getpeercert() if tls is not None else None)
            if names & client_names:
                return True
            log.warning(
                "refused a client from %s: its certificate names %s, none of --client-name",
                _peer(self.client),
                ", ".join(sorted(names)) or "nothing",
            )
            return False

    return Protocol


def _peer(client: tuple[str, int] | None) -> str:
    return f"{client[0]}:{client[1]}" if client else "an unknown address"


def _server(config: Any, app: App, drain_seconds: float) -> Any:
    import uvicorn

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            # On SIGTERM, first report not-ready for `drain_seconds` so that endpoints stop
            # sending, then stop accepting and finish what is in flight. uvicorn would re-raise
            # the signal after shutdown; a clean stop exits 0 instead.
            loop = asyncio.get_running_loop()

            def stop(sig: signal.Signals) -> None:
                if app.draining or not drain_seconds:
                    self.handle_exit(sig, None)
                    return
                app.draining = True
                loop.call_later(drain_seconds, self.handle_exit, sig, None)

            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, stop, sig)
            try:
                yield
            finally:
                for sig in (signal.SIGINT, signal.SIGTERM):
                    loop.remove_signal_handler(sig)

    return Server(config)


def _internal_server(config: Any) -> Any:
    """The server of the second port: it stops when the admission server does."""
    import uvicorn

    class Internal(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield  # the admission server handles the signals, and stops this one

    return Internal(config)


async def _run(
    server: Any,
    internal: Any | None,
    contexts: list[ssl.SSLContext],
    *,
    cert: Path,
    key: Path,
    interval: float,
) -> None:
    reloader = asyncio.create_task(reload_certificates(contexts, cert, key, interval))
    second: asyncio.Task[None] | None = None
    try:
        main = asyncio.create_task(server.serve())
        if internal is not None:
            # After the lifespan has started the caches /translate reads.
            while not server.started and not main.done():
                await asyncio.sleep(0.05)
            if not main.done():
                second = asyncio.create_task(internal.serve())
        await main
    finally:
        if second is not None and internal is not None:
            internal.should_exit = True
            await second
        reloader.cancel()


@contextlib.contextmanager
def _certificate(listen: Listen) -> Iterator[tuple[Path, Path]]:
    """The serving certificate and key: those given, else a self-signed pair in a temporary
    directory of its own, removed when serving stops."""
    if listen.cert is not None and listen.key is not None:
        yield listen.cert, listen.key
        return
    with tempfile.TemporaryDirectory(prefix="gpu2dra-certs-") as out:
        paths = make_certs(["localhost", socket.gethostname()], ["127.0.0.1"]).write(Path(out))
        log.info(
            "self-signed certificate; CA bundle at %s (removed when serve stops)", paths["ca.crt"]
        )
        yield paths["tls.crt"], paths["tls.key"]


def serve(settings: Settings, listen: Listen) -> None:
    """Serve until SIGTERM or SIGINT."""
    with _certificate(listen) as (cert, key):
        _serve(settings, listen, cert=cert, key=key)


def _serve(settings: Settings, listen: Listen, *, cert: Path, key: Path) -> None:
    import uvicorn

    app = create_app(settings)
    split = listen.internal_port is not None

    def config_for(asgi: Any, port: int, *, client_names: frozenset[str], **extra: Any) -> Any:
        config = uvicorn.Config(
            asgi,
            host=listen.host,
            port=port,
            ssl_certfile=str(cert),
            ssl_keyfile=str(key),
            log_level=listen.log_level,
            log_config=None,  # uvicorn's records go through gpu2dra's handler: one format
            access_log=False,
            http=_protocol(read_timeout=listen.read_timeout, client_names=client_names),
            timeout_keep_alive=KEEP_ALIVE_SECONDS,
            timeout_graceful_shutdown=20,
            limit_concurrency=listen.max_concurrency,
            **extra,
        )
        config.load()
        assert config.ssl is not None
        harden(config.ssl)
        return config

    verify: dict[str, Any] = {}
    if listen.client_ca is not None:
        verify = {"ssl_ca_certs": str(listen.client_ca), "ssl_cert_reqs": ssl.CERT_REQUIRED}
    config = config_for(
        serving_only(app, ADMISSION_PATHS) if split else app,
        listen.port,
        client_names=listen.client_names,
        **verify,
    )
    contexts = [config.ssl]
    internal = None
    if listen.internal_port is not None:
        internal_config = config_for(
            serving_only(app, INTERNAL_PATHS),
            listen.internal_port,
            client_names=frozenset(),
            lifespan="off",  # the admission server's lifespan starts what both serve
        )
        contexts.append(internal_config.ssl)
        internal = _internal_server(internal_config)
    # A thread that holds the GIL (a large /translate, a watch decoding a big list) keeps the
    # event loop, and every admission, waiting up to the switch interval at each handoff: 1 ms,
    # not Python's 5 (what that saves: docs/performance.md). An uncontended GIL is never
    # switched: the admission path pays nothing.
    sys.setswitchinterval(0.001)
    app.state.metrics.count_handshakes(config.ssl)
    # The loop uvicorn would pick itself (uvloop when installed): asyncio.run would not.
    with asyncio.Runner(loop_factory=config.get_loop_factory()) as runner:
        runner.run(
            _run(
                _server(config, app, listen.drain_seconds),
                internal,
                contexts,
                cert=cert,
                key=key,
                interval=listen.cert_reload_interval,
            )
        )

"""Running the webhook: TLS, certificate reloads, uvicorn on its own loop, a graceful drain."""

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

from app.webhook.application import create_app
from app.webhook.certs import make_certs
from app.webhook.settings import Listen, Settings
from app.webhook.tls import harden, reload_certificates

log = logging.getLogger("gpu2dra")

# The API server keeps an idle connection to a webhook for 90 s (Go's IdleConnTimeout) and
# does not resend a POST sent on a connection the server has just closed: it fails the
# admission with EOF. Kept open longer than that, an idle connection is always closed by the
# API server first (uvicorn's default, 5 s, lost pod creates: docs/performance.md).
KEEP_ALIVE_SECONDS = 120


def _server(config: Any, drain_seconds: float) -> Any:
    import uvicorn

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            # On SIGTERM, first report not-ready for `drain_seconds` so that endpoints stop
            # sending, then stop accepting and finish what is in flight. uvicorn would re-raise
            # the signal after shutdown; a clean stop exits 0 instead.
            loop = asyncio.get_running_loop()

            def stop(sig: signal.Signals) -> None:
                if config.app.draining or not drain_seconds:
                    self.handle_exit(sig, None)
                    return
                config.app.draining = True
                loop.call_later(drain_seconds, self.handle_exit, sig, None)

            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, stop, sig)
            try:
                yield
            finally:
                for sig in (signal.SIGINT, signal.SIGTERM):
                    loop.remove_signal_handler(sig)

    return Server(config)


async def _run(
    server: Any, context: ssl.SSLContext, *, cert: Path, key: Path, interval: float
) -> None:
    reloader = asyncio.create_task(reload_certificates(context, cert, key, interval))
    try:
        await server.serve()
    finally:
        reloader.cancel()


def serve(settings: Settings, listen: Listen) -> None:
    """Serve until SIGTERM or SIGINT."""
    import uvicorn

    cert, key = listen.cert, listen.key
    if cert is None or key is None:
        out = Path(tempfile.mkdtemp(prefix="gpu2dra-certs-"))
        paths = make_certs(["localhost", socket.gethostname()], ["127.0.0.1"]).write(out)
        cert, key = paths["tls.crt"], paths["tls.key"]
        log.info("self-signed certificate; CA bundle at %s", paths["ca.crt"])
    app = create_app(settings)
    config = uvicorn.Config(
        app,
        host=listen.host,
        port=listen.port,
        ssl_certfile=str(cert),
        ssl_keyfile=str(key),
        log_level=listen.log_level,
        log_config=None,  # uvicorn's records go through gpu2dra's handler: one format
        access_log=False,
        timeout_keep_alive=KEEP_ALIVE_SECONDS,
        timeout_graceful_shutdown=20,
    )
    config.load()
    # A thread that holds the GIL (a large /translate, a watch decoding a big list) keeps the
    # event loop, and every admission, waiting up to the switch interval at each handoff: 1 ms,
    # not Python's 5 (what that saves: docs/performance.md). An uncontended GIL is never
    # switched: the admission path pays nothing.
    sys.setswitchinterval(0.001)
    assert config.ssl is not None
    app.state.metrics.count_handshakes(config.ssl)
    # The loop uvicorn would pick itself (uvloop when installed): asyncio.run would not.
    with asyncio.Runner(loop_factory=config.get_loop_factory()) as runner:
        runner.run(
            _run(
                _server(config, listen.drain_seconds),
                harden(config.ssl),
                cert=cert,
                key=key,
                interval=listen.cert_reload_interval,
            )
        )

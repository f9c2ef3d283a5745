"""The webhook's TLS: modern protocols only, certificates renewed without a restart, and the
names a client's certificate holds."""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
from collections.abc import Sequence
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

# TLS 1.2 with forward-secret AEAD ciphers; TLS 1.3 suites are always modern.
CIPHERS = "ECDHE+AESGCM:ECDHE+CHACHA20"


def harden(context: ssl.SSLContext) -> ssl.SSLContext:
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.set_ciphers(CIPHERS)
    return context


def _stamp(*paths: Path) -> tuple[float, ...]:
    # Secret volumes swap a symlink: stat follows it, so a renewal changes the stamp.
    return tuple(os.stat(p).st_mtime_ns for p in paths)


def peer_names(cert: dict[str, Any] | None) -> frozenset[str]:
    """The names a verified peer certificate (`SSLSocket.getpeercert()`) holds: its subject's
    common names and its DNS names, as the API server's client certificate carries them."""
    if not cert:
        return frozenset()
    names = {value for rdn in cert.get("subject", ()) for key, value in rdn if key == "commonName"}
    names.update(value for kind, value in cert.get("subjectAltName", ()) if kind == "DNS")
    return frozenset(names)


async def reload_certificates(
    contexts: Sequence[ssl.SSLContext], cert: Path, key: Path, interval: float = 5.0
) -> None:
    """Load renewed files into the live contexts: new handshakes present the new certificate,
    connections already open keep theirs."""
    seen = _stamp(cert, key)
    while True:
        await asyncio.sleep(interval)
        try:
            now = _stamp(cert, key)
            if now != seen:
                for context in contexts:
                    context.load_cert_chain(cert, key)
                seen = now
                log.info("loaded renewed certificate %s", cert)
        except (OSError, ssl.SSLError) as err:
            # A half-written pair (key updated, certificate not yet): keep the old one.
            log.warning("certificate not reloaded: %s", err)

"""The TLS handshake the API server makes with a webhook, made from here: where its
clientConfig sends requests, and whether the caBundle verifies the certificate served there."""

from __future__ import annotations

import base64
import binascii
import socket
import ssl
from dataclasses import dataclass
from urllib.parse import urlsplit

from app.core.kube import Obj
from app.readers.client import ReadError


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where the API server sends a webhook's requests, and the name it verifies."""

    host: str
    port: int
    server_name: str

    def __str__(self) -> str:
        return f"{self.server_name}:{self.port}"


def endpoint_of(client_config: Obj) -> Endpoint | None:
    if url := client_config.get("url"):
        parts = urlsplit(str(url))
        if not parts.hostname:
            return None
        return Endpoint(parts.hostname, parts.port or 443, parts.hostname)
    svc = client_config.get("service")
    if isinstance(svc, dict):
        name = f"{svc.get('name')}.{svc.get('namespace')}.svc"
        return Endpoint(name, int(svc.get("port") or 443), name)
    return None


def verify_tls(endpoint: Endpoint, ca_pem: str, timeout: float = 3.0) -> str | None:
    """None when the server's certificate verifies against `ca_pem` for the name the API
    server uses; else why not. ReadError when the server cannot be reached from here."""
    try:
        context = ssl.create_default_context(cadata=ca_pem)
    except (ssl.SSLError, ValueError) as err:
        return f"the caBundle is not a usable PEM CA certificate ({err})"
    try:
        with (
            socket.create_connection((endpoint.host, endpoint.port), timeout=timeout) as sock,
            context.wrap_socket(sock, server_hostname=endpoint.server_name),
        ):
            return None
    except ssl.SSLCertVerificationError as err:
        return f"the serving certificate does not verify: {err.verify_message}"
    except (OSError, ssl.SSLError) as err:
        raise ReadError(f"cannot reach {endpoint}: {err}") from None


def base64_pem(bundle: str) -> str:
    """A clientConfig's caBundle as PEM text; ValueError when it is none."""
    try:
        return base64.b64decode(bundle, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        raise ValueError("the caBundle is not base64 PEM") from None

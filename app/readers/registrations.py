"""gpu2dra as the cluster knows it: its webhook registrations, the policy ConfigMap beside its
Service, and the TLS handshake the API server makes with it."""

from __future__ import annotations

import socket
import ssl
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import yaml

from app.core.kube import Obj
from app.core.policy import Policy, PolicyError, load_policy, parse_policy
from app.readers.client import Reader, ReadError

# The webhooks the chart registers, whatever the release is called.
MUTATING_WEBHOOK = "pods.mutate.gpu2dra.io"
VALIDATING_WEBHOOKS = ("claims.validate.gpu2dra.io", "pods.validate.gpu2dra.io")


@dataclass(frozen=True, slots=True)
class Registration:
    """A webhook configuration holding gpu2dra webhooks."""

    kind: str  # MutatingWebhookConfiguration | ValidatingWebhookConfiguration
    name: str
    webhooks: tuple[Obj, ...]


def registrations(reader: Reader) -> list[Registration]:
    found = []
    for kind, plural, names in (
        ("MutatingWebhookConfiguration", "mutatingwebhookconfigurations", (MUTATING_WEBHOOK,)),
        ("ValidatingWebhookConfiguration", "validatingwebhookconfigurations", VALIDATING_WEBHOOKS),
    ):
        for obj in reader.items(f"/apis/admissionregistration.k8s.io/v1/{plural}"):
            hooks = tuple(w for w in obj.get("webhooks") or [] if w.get("name") in names)
            if hooks:
                found.append(Registration(kind, obj["metadata"]["name"], hooks))
    return found


def service_of(regs: list[Registration]) -> tuple[str, str] | None:
    """(namespace, name) of the Service gpu2dra is reached through, if any."""
    for reg in regs:
        for hook in reg.webhooks:
            svc = (hook.get("clientConfig") or {}).get("service")
            if isinstance(svc, dict):
                return str(svc.get("namespace")), str(svc.get("name"))
    return None


def cluster_policy(reader: Reader, path: Path | None) -> tuple[Policy, str]:
    """The policy to judge by, and where it came from: the file given, else the chart's
    ConfigMap beside gpu2dra's Service, else the embedded default."""
    if path is not None:
        return load_policy(path), str(path)
    try:
        service = service_of(registrations(reader))
    except ReadError:
        service = None
    if service is not None:
        namespace, name = service
        where = f"ConfigMap {namespace}/{name}"
        try:
            cm = reader.find(f"/api/v1/namespaces/{namespace}/configmaps/{name}")
        except ReadError as err:
            return load_policy(None).with_skipped(namespace), f"embedded default ({err})"
        text = ((cm or {}).get("data") or {}).get("policy.yaml")
        if text:
            try:
                policy = parse_policy(yaml.safe_load(text))
            except (PolicyError, yaml.YAMLError) as err:
                raise PolicyError(f"{where}: {err}") from None
            return policy.with_skipped(namespace), where
        return load_policy(None).with_skipped(namespace), f"embedded default (no {where})"
    return load_policy(None), "embedded default"


# ---- TLS ---------------------------------------------------------------------------------


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

"""Read-only access to the cluster for `gpu2dra doctor`, `explain` and `report`.

Every call here is a GET (or a TLS handshake with the webhook): the commands need only read
permissions (the chart's optional read-only ClusterRole). Objects come back as plain dicts.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar
from urllib.parse import urlsplit

import orjson
import yaml
from kubernetes import client, config

from app.core.kube import Obj
from app.core.policy import Policy, PolicyError, load_policy, parse_policy

T = TypeVar("T")
RESOURCE = "/apis/resource.k8s.io/v1"
# The webhooks the chart registers, whatever the release is called.
MUTATING_WEBHOOK = "pods.mutate.gpu2dra.io"
VALIDATING_WEBHOOKS = ("claims.validate.gpu2dra.io", "pods.validate.gpu2dra.io")


class ReadError(Exception):
    """The cluster could not be read; the message is one line."""


class NotFound(ReadError):
    pass


class Unreachable(ReadError):
    """No answer from the API server at all: nothing else is worth trying."""


def attempt(read: Callable[[], T]) -> T | ReadError:
    """What `read` returns, or the ReadError it raised, so that a command can say what it
    could not read and go on; an API server that does not answer still ends it."""
    try:
        return read()
    except Unreachable:
        raise
    except ReadError as err:
        return err


def connect(kubeconfig: Path | None = None, timeout: float = 10.0) -> Reader:
    """A reader for the kubeconfig's current context (or the pod's service account)."""
    if kubeconfig is not None and not kubeconfig.is_file():
        raise ReadError(f"kubeconfig {kubeconfig}: no such file")
    try:
        api = config.new_client_from_config(config_file=str(kubeconfig) if kubeconfig else None)
    except Exception as err:  # the loader raises YAML, key and value errors as well
        if kubeconfig is not None:
            raise ReadError(f"kubeconfig {kubeconfig}: {_first_line(err)}") from None
        try:
            config.load_incluster_config()
        except config.ConfigException:
            raise ReadError(f"no usable kubeconfig: {_first_line(err)}") from None
        api = client.ApiClient()
    return Reader(api, timeout)


def _first_line(err: BaseException) -> str:
    return (str(err).strip().splitlines() or [type(err).__name__])[0]


class Reader:
    """GETs against the API server, answered as JSON dicts."""

    def __init__(self, api: client.ApiClient, timeout: float = 10.0) -> None:
        self.api, self.timeout = api, timeout

    def get(self, path: str, **query: str) -> Obj:
        method, url, headers, _, _ = self.api.param_serialize(
            "GET",
            path,
            query_params=list(query.items()),
            header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"],
        )
        try:
            resp = self.api.call_api(
                method, url, header_params=headers, _request_timeout=self.timeout
            )
            resp.read()
        except Exception as err:  # urllib3 raises many kinds; all mean "cannot reach it"
            reason = _first_line(getattr(err, "reason", None) or err)
            reason = reason.rsplit("Failed to establish a new connection: ", 1)[-1]
            host = self.api.configuration.host
            raise Unreachable(f"cannot reach the API server at {host}: {reason}") from None
        if resp.status == 404:
            raise NotFound(f"GET {path}: not found")
        if resp.status >= 400:
            try:
                message = orjson.loads(resp.data).get("message") or resp.reason
            except (orjson.JSONDecodeError, AttributeError):
                message = resp.reason
            raise ReadError(f"GET {path}: {resp.status} {message}")
        return orjson.loads(resp.data)  # type: ignore[no-any-return]

    def find(self, path: str) -> Obj | None:
        try:
            return self.get(path)
        except NotFound:
            return None

    def items(self, path: str, **query: str) -> list[Obj]:
        """All items of a list, page by page."""
        found: list[Obj] = []
        token = ""
        while True:
            page = self.get(path, limit="500", **query, **({"continue": token} if token else {}))
            found.extend(page.get("items") or [])
            token = (page.get("metadata") or {}).get("continue") or ""
            if not token:
                return found


def namespaced(prefix: str, plural: str, namespace: str | None) -> str:
    """`/api/v1/pods` or `/api/v1/namespaces/<ns>/pods`."""
    return f"{prefix}/namespaces/{namespace}/{plural}" if namespace else f"{prefix}/{plural}"


# ---- gpu2dra's own registration ----------------------------------------------------------


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

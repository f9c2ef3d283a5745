"""Read-only access to the cluster for the commands that read it (`doctor`, `explain`, ...).

Every call here is a GET: the commands need only read permissions (the chart's optional
read-only ClusterRole). Objects come back as plain dicts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import orjson
from kubernetes import client

from app.core.kube import Obj
from app.kubeconfig import Kubeconfig, NoCluster, api_client, first_line

T = TypeVar("T")
RESOURCE = "/apis/resource.k8s.io/v1"


class ReadError(Exception):
    """The cluster could not be read; the message is one line."""


class NotFound(ReadError):
    pass


class Unreachable(ReadError):
    """No answer from the API server at all: nothing else is worth trying."""


# What was read; a ReadError in place of what could not be.
Listed = list[Obj] | ReadError


def cannot_read(err: ReadError, what: str = "") -> str:
    """The one way every command says what it could not read."""
    return f"cannot read {what}: {err}" if what else f"cannot read: {err}"


def attempt(read: Callable[[], T]) -> T | ReadError:
    """What `read` returns, or the ReadError it raised, so that a command can say what it
    could not read and go on; an API server that does not answer still ends it."""
    try:
        return read()
    except Unreachable:
        raise
    except ReadError as err:
        return err


def connect(kubeconfig: Kubeconfig, timeout: float = 10.0) -> Reader:
    """A reader for the kubeconfig's context (or the pod's service account)."""
    try:
        return Reader(api_client(kubeconfig.path, context=kubeconfig.context), timeout)
    except NoCluster as err:
        raise ReadError(str(err)) from None


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
            reason = first_line(getattr(err, "reason", None) or err)
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

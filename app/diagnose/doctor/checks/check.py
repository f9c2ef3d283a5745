"""A doctor check's verdict, what the checks judge, and the one way a check says it could
not read what it judges."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from app.core.kube import Obj
from app.readers.client import Listed, ReadError, cannot_read
from app.readers.registrations import Registration
from app.readers.tlsprobe import Endpoint

Status = Literal["PASS", "WARN", "FAIL"]
READ_FIX = "grant read access (the chart's readOnlyRole.create=true ClusterRole)"


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    status: Status
    summary: str
    fix: str = ""
    details: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Reached:
    """The TLS handshake with one webhook endpoint, checked against one caBundle."""

    endpoint: Endpoint
    configurations: tuple[str, ...]
    problem: str | None  # None: the caBundle verifies the serving certificate
    unreachable: str | None = None


@dataclass(frozen=True, slots=True)
class Facts:
    version: Obj | ReadError
    resource_versions: list[str] | ReadError
    device_classes: Listed
    slices: Listed
    nodes: Listed
    namespaces: Listed
    registrations: list[Registration] | ReadError
    tls: list[Reached] = field(default_factory=list)
    ready_endpoints: dict[tuple[str, str], int | ReadError] = field(default_factory=dict)
    quotas: Listed = field(default_factory=list)  # every namespace's ResourceQuotas
    kueue: Obj | ReadError | None = None  # Kueue's ConfigMap; None: not installed
    kueue_manager: Obj | ReadError | None = None  # its Deployment; None: not there
    priority_classes: Listed = field(default_factory=list)
    pods: Listed = field(default_factory=list)  # every namespace's pods
    daemonsets: Listed = field(default_factory=list)  # every namespace's
    deployments: Listed = field(default_factory=list)  # every namespace's
    cluster_roles: Listed = field(default_factory=list)
    cluster_role_bindings: Listed = field(default_factory=list)


class NotServed(ReadError):
    """The API the check reads is not served: the kubernetes check says why."""


def unreadable(name: str, err: ReadError) -> Check:
    """The check's WARN when what it judges could not be read."""
    if isinstance(err, NotServed):
        return Check(name, "WARN", f"not checked: {err}", "see the kubernetes check")
    return Check(name, "WARN", cannot_read(err), READ_FIX)

"""What `doctor` judges, as read: every part a ReadError where it could not be read. Each part
defaults to what an empty cluster answers, so that a table of facts names only what it is
about."""

from __future__ import annotations

from dataclasses import dataclass, field

from app.core.kube import Obj
from app.readers.client import Listed, ReadError
from app.readers.registrations import Registration
from app.readers.tlsprobe import Endpoint


class NotServed(ReadError):
    """The API the check reads is not served: the kubernetes check says why."""


@dataclass(frozen=True, slots=True)
class Reached:
    """The TLS handshake with one webhook endpoint, checked against one caBundle."""

    endpoint: Endpoint
    configurations: tuple[str, ...]
    problem: str | None  # None: the caBundle verifies the serving certificate
    unreachable: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Facts:
    version: Obj | ReadError = field(default_factory=dict)  # GET /version
    resource_versions: list[str] | ReadError = field(default_factory=list)  # resource.k8s.io's
    device_classes: Listed = field(default_factory=list)
    slices: Listed = field(default_factory=list)
    claims: Listed = field(default_factory=list)  # every namespace's ResourceClaims
    nodes: Listed = field(default_factory=list)
    namespaces: Listed = field(default_factory=list)
    registrations: list[Registration] | ReadError = field(default_factory=list)
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

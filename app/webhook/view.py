"""The cluster as admission sees it: a protocol that the watch caches implement, and the
offline mode, and the tests' fakes, so that the admission logic is the same for all."""

from __future__ import annotations

from collections.abc import Coroutine, Iterable, Mapping, Sequence
from typing import Any, Literal, NamedTuple, Protocol

from app.core.catalog import Catalog
from app.core.kube import Obj
from app.core.quota import Quota
from app.core.resources import DraRequest
from app.webhook.reviews import AdmissionResponse, allowed, denied


class TemplateError(Exception):
    """A ResourceClaimTemplate could not be made sure of (RBAC, API down, too slow)."""


class ReadFailed(Exception):
    """A referenced template or claim could not be read (API down, too slow, forbidden)."""


class ClusterView(Protocol):
    @property
    def catalog(self) -> Catalog: ...

    @property
    def ready(self) -> bool:
        """The caches have synced: namespace modes and the catalog can be trusted."""

    def namespace_labels(self, name: str) -> Mapping[str, str] | None: ...

    def namespace_quotas(self, namespace: str) -> Sequence[Quota]:
        """The namespace's ResourceQuotas (from the cache: no API call); () for none."""

    def has_templates(self, namespace: str, templates: Iterable[Obj]) -> bool:
        """Each template is known to exist in `namespace` (from the cache: no API call)."""

    async def ensure_templates(self, namespace: str, templates: Iterable[Obj]) -> None:
        """Make sure each template exists in `namespace`; raise TemplateError if not."""

    async def template_requests(self, namespace: str, name: str) -> list[DraRequest] | None:
        """The requests of a ResourceClaimTemplate; None if absent;
        ReadFailed if it could not be read."""

    async def claim_requests(self, namespace: str, name: str) -> list[DraRequest] | None:
        """The requests of a ResourceClaim; None if absent; ReadFailed if
        it could not be read."""


# "quota": left on the device plugin, because translating would lift a GPU quota;
# "reapplied": an update that re-added what gpu2dra replaced, patched back to a no-op.
Result = Literal["patched", "audit", "allowed", "denied", "quota", "reapplied"]


class Verdict(NamedTuple):
    """What admission decided, and the answer that says it: metrics and logs read `result`,
    never the keys of the encoded answer."""

    result: Result
    response: AdmissionResponse


def allow(uid: str, warnings: Iterable[str] = ()) -> Verdict:
    return Verdict("allowed", allowed(uid, warnings))


def deny(uid: str, message: str, code: int = 403, warnings: Iterable[str] = ()) -> Verdict:
    return Verdict("denied", denied(uid, message, code=code, warnings=warnings))


# The verdict, or, only when the API server must be asked first, a coroutine that gives it:
# most answers need no await, and so no timer for the deadline either.
Decision = Verdict | Coroutine[Any, Any, Verdict]

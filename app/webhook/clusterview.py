"""The cluster as admission sees it: a protocol that the watch caches implement, and the
offline mode, and the tests' fakes, so that the admission logic is the same for all."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from app.core.catalog import Catalog
from app.core.kueue import Kueue
from app.core.quota import Quota
from app.core.resources import DraRequest
from app.core.templates import Owned


class TemplateError(Exception):
    """A ResourceClaimTemplate could not be made sure of (RBAC, API down, too slow)."""


class TemplateSquatted(TemplateError):
    """A template under the name gpu2dra would use is not gpu2dra's: another spec, or not
    its managed-by label. It is never referenced; the message names it and what it holds."""


class ReadFailed(Exception):
    """A referenced template or claim could not be read (API down, too slow, forbidden)."""


class ClusterView(Protocol):
    @property
    def catalog(self) -> Catalog: ...

    @property
    def ready(self) -> bool:
        """The caches have synced: namespace modes and the catalog can be trusted."""

    @property
    def offline(self) -> bool:
        """No cluster behind it: no namespace's labels are known, so each namespace has the
        policy's defaultMode."""

    def namespace_labels(self, name: str) -> Mapping[str, str] | None: ...

    def namespace_quotas(self, namespace: str) -> Sequence[Quota]:
        """The namespace's ResourceQuotas (from the cache: no API call); () for none."""

    @property
    def kueue(self) -> Kueue | None:
        """Kueue as its ConfigMap and Deployment say (from the cache); None: not installed."""

    def has_templates(self, namespace: str, templates: Iterable[Owned]) -> bool:
        """Each template is known to exist in `namespace` as gpu2dra writes it: its name,
        gpu2dra's label and exactly its spec (from the cache: no API call)."""

    def template_count(self, namespace: str) -> int:
        """How many of gpu2dra's templates `namespace` holds (from the cache: no API call)."""

    async def ensure_templates(self, namespace: str, templates: Iterable[Owned]) -> None:
        """Make sure each template exists in `namespace` as gpu2dra writes it; raise
        TemplateSquatted if one of the name is not gpu2dra's, TemplateError if it could not
        be made sure of."""

    async def template_requests(self, namespace: str, name: str) -> list[DraRequest] | None:
        """The requests of a ResourceClaimTemplate; None if absent;
        ReadFailed if it could not be read."""

    async def claim_requests(self, namespace: str, name: str) -> list[DraRequest] | None:
        """The requests of a ResourceClaim; None if absent; ReadFailed if
        it could not be read."""

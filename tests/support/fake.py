"""An in-memory ClusterView for the admission tests."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from app.core.catalog import Catalog
from app.core.kueue import Kueue
from app.core.quota import Quota
from app.core.resources import DraRequest
from app.core.templates import Owned
from app.webhook.clusterview import TemplateError, TemplateSquatted


@dataclass
class FakeCluster:
    catalog: Catalog = field(
        default_factory=lambda: Catalog.of(["gpu.nvidia.com", "mig.nvidia.com"])
    )
    labels: dict[str, dict[str, str]] = field(default_factory=dict)
    templates: dict[tuple[str, str], list[DraRequest]] = field(default_factory=dict)
    claims: dict[tuple[str, str], list[DraRequest]] = field(default_factory=dict)
    quotas: dict[str, list[Quota]] = field(default_factory=dict)
    created: list[tuple[str, str]] = field(default_factory=list)
    fail_with: str | None = None
    # (namespace, name) of templates someone else made under gpu2dra's name
    squatted: set[tuple[str, str]] = field(default_factory=set)
    ready: bool = True
    kueue: Kueue | None = None
    offline: bool = False

    def namespace_labels(self, name: str) -> Mapping[str, str] | None:
        return self.labels.get(name)

    def namespace_quotas(self, namespace: str) -> Sequence[Quota]:
        return self.quotas.get(namespace, ())

    def has_templates(self, namespace: str, templates: Iterable[Owned]) -> bool:
        return False  # every pod's templates are "created", and recorded in `created`

    def template_count(self, namespace: str) -> int:
        return len({name for ns, name in self.created if ns == namespace})

    async def ensure_templates(self, namespace: str, templates: Iterable[Owned]) -> None:
        if self.fail_with:
            raise TemplateError(self.fail_with)
        for tpl in templates:
            if (namespace, tpl.name) in self.squatted:
                raise TemplateSquatted(
                    f"ResourceClaimTemplate {namespace}/{tpl.name} is not gpu2dra's"
                )
            self.created.append((namespace, tpl.name))

    async def template_requests(self, namespace: str, name: str) -> list[DraRequest] | None:
        return self.templates.get((namespace, name))

    async def claim_requests(self, namespace: str, name: str) -> list[DraRequest] | None:
        return self.claims.get((namespace, name))

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

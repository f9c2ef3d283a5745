"""gpu2dra's webhook registrations as the cluster holds them: the configurations that name its
webhooks, whatever the release is called, and the Service they reach it through."""

from __future__ import annotations

from dataclasses import dataclass

from app.core.kube import Obj
from app.readers.client import Reader

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

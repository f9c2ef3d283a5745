"""What `gpu2dra serve` runs with: one place for every default, read by its flags too."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from app.core.policy import Policy

MiB = 1024 * 1024


@dataclass(frozen=True)
class Settings:
    policy: Policy
    offline: bool = False
    max_body: int = 7 * MiB
    translate_enabled: bool = True
    api_timeout: float = 2.0  # each API call on the admission path
    deadline: float = 3.0  # each admission answer; well under the webhook's timeoutSeconds
    # Who may create or update ResourceClaimTemplates named gpu2dra-* or labelled as
    # gpu2dra's: its own identity and any the operator adds. Empty: nobody is known to be
    # gpu2dra, and /validate reserves nothing.
    template_writers: frozenset[str] = frozenset()
    # In a pod (KUBERNETES_SERVICE_HOST is set) a cluster that cannot be reached is a fault,
    # never a reason to serve the policy alone: pods would pass untranslated.
    in_pod: bool = False


@dataclass(frozen=True)
class Listen:
    """Where and how the server listens; `gpu2dra serve` takes its flag defaults from here."""

    host: str = "0.0.0.0"
    port: int = 8443
    cert: Path | None = None  # with `key`; neither: a self-signed pair for local runs
    key: Path | None = None
    cert_reload_interval: float = 5.0
    drain_seconds: float = 0.0  # on SIGTERM, report not-ready this long before stopping
    log_level: str = "info"

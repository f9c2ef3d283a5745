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
    # /translate runs on threads of its own, never those admission's API calls use (one more
    # for small manifests, so that they do not wait behind large ones); past 4 requests in
    # hand per thread, or past its deadline, it answers 503. A 7 MiB manifest takes a few
    # seconds of a core.
    translate_workers: int = 2
    translate_deadline: float = 30.0
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
    # A connection must send a whole request (headers and body) this long after it opens or
    # its request starts, else it is closed: a client that sends half and waits holds nothing.
    read_timeout: float = 10.0
    # Requests in progress and open connections, each, past which a request is answered 503.
    max_concurrency: int = 1000
    # /translate and /metrics on a port of their own (the admission port then refuses them),
    # so that a NetworkPolicy can let the API server alone reach admission. None: one port.
    internal_port: int | None = None
    # Verify the client's certificate on the admission port: only clients that present one
    # signed by this CA (and, if any are named, whose certificate names one of
    # `client_names`, as CN or DNS name) are served.
    client_ca: Path | None = None
    client_names: frozenset[str] = frozenset()

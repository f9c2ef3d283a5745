"""`gpu2dra version` run: the client's version; then, unless told the client alone, the
cluster's Kubernetes version and gpu2dra's webhooks there. A cluster that cannot be reached
is said, never an error: the client's version is still worth printing."""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass, field
from typing import Literal

import orjson

from app.diagnose.version.webhooks import SELECTOR, Webhook, webhooks
from app.kubeconfig import Kubeconfig
from app.readers.client import ReadError, Unreachable, cannot_read, connect
from app.readers.output import structured

TIMEOUT = 5.0  # seconds for each call: a version is asked for in a hurry


@dataclass
class Versions:
    client: str
    server: str | None = None  # the API server's address
    kubernetes: str | None = None  # its gitVersion
    cluster_error: str | None = None  # why the cluster could not be reached
    webhooks: list[Webhook] = field(default_factory=list)
    webhooks_error: str | None = None  # why its Deployments could not be listed


def gather(kubeconfig: Kubeconfig, client: str) -> Versions:
    found = Versions(client)
    try:
        reader = connect(kubeconfig, TIMEOUT)
        found.server = str(reader.api.configuration.host)
        found.kubernetes = str(reader.get("/version").get("gitVersion") or "") or None
    except Unreachable as err:
        found.cluster_error = str(err)
        return found
    except ReadError as err:  # no kubeconfig; or /version refused, by an API server that answers
        if found.server is None:
            found.cluster_error = str(err)
            return found
    try:
        listed = reader.items("/apis/apps/v1/deployments", labelSelector=SELECTOR)
    except ReadError as err:
        found.webhooks_error = cannot_read(err, "Deployments")
        return found
    found.webhooks = webhooks(listed)
    return found


def render_text(found: Versions, *, client_only: bool) -> str:
    lines = [f"client: gpu2dra {found.client}"]
    if client_only:
        return lines[0] + "\n"
    if found.cluster_error is not None:
        lines.append(f"cluster: not reached: {found.cluster_error}")
        lines.append("webhook: unknown (no cluster)")
        return "\n".join(lines) + "\n"
    lines.append(f"cluster: {found.server}, Kubernetes {found.kubernetes or 'unknown'}")
    if found.webhooks_error is not None:
        lines.append(f"webhook: unknown ({found.webhooks_error})")
    elif not found.webhooks:
        lines.append(f"webhook: not found (no Deployment labelled {SELECTOR})")
    for w in found.webhooks:
        version = w.version or "unknown (no app.kubernetes.io/version label)"
        lines.append(
            f"webhook: {w.namespace}/{w.name}: {version} (image {w.image or 'unknown'}), "
            f"{w.ready}/{w.replicas} ready"
        )
    return "\n".join(lines) + "\n"


def render_json(found: Versions, *, client_only: bool) -> bytes:
    body: dict[str, object] = {"client": {"version": found.client}}
    if not client_only:
        body["cluster"] = {
            "server": found.server,
            "kubernetes": found.kubernetes,
            "error": found.cluster_error,
        }
        body["webhook"] = {
            "found": [asdict(w) for w in found.webhooks],
            "error": found.webhooks_error
            or ("no cluster" if found.cluster_error is not None else None),
        }
    return orjson.dumps(body, option=orjson.OPT_INDENT_2)


def run(
    *,
    kubeconfig: Kubeconfig,
    client: str,
    client_only: bool,
    output: Literal["text", "json", "yaml"],
) -> int:
    """`client`: this program's version, as the command line says it. Always 0."""
    found = Versions(client) if client_only else gather(kubeconfig, client)
    if output == "json" or output == "yaml":
        sys.stdout.buffer.write(structured(render_json(found, client_only=client_only), output))
    else:
        sys.stdout.write(render_text(found, client_only=client_only))
    return 0

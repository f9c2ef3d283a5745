"""The cluster's node autoscalers as the commands read them: the Deployments their charts and
manifests label (app/core/autoscalers.py's selectors) and the nodes of GKE's DRA pools."""

from __future__ import annotations

from app.core import autoscalers
from app.core.autoscalers import Autoscaler
from app.readers.client import Reader


def node_autoscalers(reader: Reader) -> tuple[Autoscaler, ...]:
    """Every node autoscaler the cluster shows; raises ReadError as Reader does."""
    deployments = [
        d
        for selector in autoscalers.SELECTORS
        for d in reader.items("/apis/apps/v1/deployments", labelSelector=selector)
    ]
    nodes = reader.items("/api/v1/nodes", labelSelector=f"{autoscalers.GKE_DRA_LABEL}=true")
    return autoscalers.read(deployments, nodes)

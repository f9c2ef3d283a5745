"""The client a serving process watches the cluster with."""

from __future__ import annotations

from pathlib import Path

from kubernetes import client

from app.kubeconfig import api_client


def serving_client(kubeconfig: Path | None = None) -> client.ApiClient:
    """A client for `kubeconfig` when one is named, else for the pod's service account (a
    serving process runs in the cluster), else for $KUBECONFIG or ~/.kube/config; NoCluster
    when none can be used."""
    return api_client(kubeconfig, in_cluster_first=kubeconfig is None)

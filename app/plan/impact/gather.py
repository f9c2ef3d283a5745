"""What `impact` reads (GETs only): the webhook configurations, Deployments, DaemonSets, custom
resource definitions, ResourceQuotas and Kueue's ClusterQueues, each a ReadError where it
could not be read; and the namespace about to be enabled, which must exist."""

from __future__ import annotations

from collections.abc import Mapping

from app.plan.impact.analyse import Inputs
from app.readers.client import Listed, NotFound, Reader, ReadError, Unreachable, cannot_read

ADMISSION = "/apis/admissionregistration.k8s.io/v1"


# Kueue's ClusterQueues, newest version first.
CLUSTER_QUEUES = (
    "/apis/kueue.x-k8s.io/v1beta2/clusterqueues",
    "/apis/kueue.x-k8s.io/v1beta1/clusterqueues",
)


def _listed(reader: Reader, path: str) -> Listed:
    try:
        return reader.items(path)
    except ReadError as err:
        return err


def _cluster_queues(reader: Reader) -> Listed | None:
    for path in CLUSTER_QUEUES:
        try:
            return reader.items(path)
        except NotFound:
            continue  # this version is not served, or Kueue is not installed
        except ReadError as err:
            return err
    return None


def gather(reader: Reader, namespace: str | None) -> Inputs:
    unreadable: list[str] = []
    quotas = (
        f"/api/v1/namespaces/{namespace}/resourcequotas" if namespace else "/api/v1/resourcequotas"
    )
    return Inputs(
        mutating=_listed(reader, f"{ADMISSION}/mutatingwebhookconfigurations"),
        validating=_listed(reader, f"{ADMISSION}/validatingwebhookconfigurations"),
        deployments=_listed(reader, "/apis/apps/v1/deployments"),
        daemonsets=_listed(reader, "/apis/apps/v1/daemonsets"),
        crds=_listed(reader, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"),
        quotas=_listed(reader, quotas),
        cluster_queues=_cluster_queues(reader),
        namespace=_labels(reader, namespace, unreadable),
        unreadable=unreadable,
    )


def _labels(
    reader: Reader, namespace: str | None, unreadable: list[str]
) -> tuple[str, Mapping[str, str]] | None:
    """The namespace's name and labels; an unknown namespace ends the command."""
    if namespace is None:
        return None
    try:
        found = reader.get(f"/api/v1/namespaces/{namespace}")
    except NotFound:
        raise ReadError(f"namespace {namespace} not found") from None
    except Unreachable:
        raise
    except ReadError as err:
        unreadable.append(cannot_read(err, f"namespace {namespace}"))
        return None
    return namespace, (found.get("metadata") or {}).get("labels") or {}

"""One unused template deleted, after a last look at its namespace's pods and workloads, and
only if it is still the object that was listed."""

from __future__ import annotations

from collections.abc import Callable

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from app.core.kube import Obj
from app.maintain.prune.fates import Fate, Workload, named, named_by, users
from app.readers.client import ReadError


def delete(
    fate: Fate,
    live_pods: Callable[[str], list[Obj]],
    remove: Callable[[str, str, client.V1DeleteOptions], None],
    *,
    workloads: Callable[[str], list[Workload]] = lambda namespace: [],
) -> Fate:
    """Delete one unused template, after a last look at its namespace's pods and workloads'
    pod templates, and only if it is still the object that was listed (uid and
    resourceVersion as preconditions)."""
    key = (fate.namespace, fate.name)
    if by := users(live_pods(fate.namespace)).get(key):
        return Fate(fate.namespace, fate.name, "keep", f"used by pod {', '.join(sorted(by))} now")
    if by := named_by(workloads(fate.namespace)).get(key):
        return Fate(fate.namespace, fate.name, "keep", f"{named(by)} now")
    options = client.V1DeleteOptions(
        preconditions=client.V1Preconditions(uid=fate.uid, resource_version=fate.resource_version)
    )
    try:
        remove(fate.name, fate.namespace, options)
    except ApiException as err:
        if err.status == 404:
            return Fate(fate.namespace, fate.name, "keep", "already gone")
        if err.status == 409:
            return Fate(fate.namespace, fate.name, "keep", "changed since it was listed")
        raise ReadError(f"delete {fate.key}: {err.status} {err.reason}") from None
    return Fate(fate.namespace, fate.name, "delete", "no live pod used it")

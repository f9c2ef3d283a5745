"""What `capacity` reads (GETs only), every namespace's: namespaces, DeviceClasses,
ResourceSlices, ResourceClaims and their templates, nodes, pods and the workloads that keep
pods; each a ReadError where it could not be read."""

from __future__ import annotations

from functools import partial

from app.plan.capacity.analyse import Inputs
from app.readers.client import RESOURCE, Listed, Reader, attempt

# Kind -> where its objects are listed, every namespace's.
WORKLOADS = {
    "Deployment": "/apis/apps/v1/deployments",
    "StatefulSet": "/apis/apps/v1/statefulsets",
    "ReplicaSet": "/apis/apps/v1/replicasets",
    "DaemonSet": "/apis/apps/v1/daemonsets",
    "Job": "/apis/batch/v1/jobs",
    "CronJob": "/apis/batch/v1/cronjobs",
}


def gather(reader: Reader) -> Inputs:
    """Every part, each a ReadError where it could not be read; an API server that does not
    answer ends it (`attempt`)."""

    def listed(path: str) -> Listed:
        return attempt(partial(reader.items, path))

    return Inputs(
        namespaces=listed("/api/v1/namespaces"),
        device_classes=listed(f"{RESOURCE}/deviceclasses"),
        slices=listed(f"{RESOURCE}/resourceslices"),
        claims=listed(f"{RESOURCE}/resourceclaims"),
        templates=listed(f"{RESOURCE}/resourceclaimtemplates"),
        nodes=listed("/api/v1/nodes"),
        pods=listed("/api/v1/pods"),
        workloads={kind: listed(path) for kind, path in WORKLOADS.items()},
    )

"""The memo key of a pod: everything translate() reads of it, so that the pods of one
workload, which differ in names, images and ranks, are translated once.

It lives beside the translator and names what it reads field by field: a test
(tests/unit/core/test_shape.py) runs translate() on pods that record every field it reads
and fails when one is missing here.
"""

from __future__ import annotations

from typing import Any

import orjson

from app.core.claims import VISIBLE_DEVICES
from app.core.failclosed import Annotations
from app.core.kube import Obj

# What translate() reads of a pod spec, besides its containers.
SPEC_READS = (
    "resourceClaims",
    "nodeSelector",
    "affinity",
    "priorityClassName",
    "preemptionPolicy",
    "schedulerName",
)
CONTAINER_FIELDS = ("containers", "initContainers")
# Of the volumes it reads only the hostPath ones (a mount of /dev/nvidia* is named): the
# others carry per-pod names (kube-api-access-<random>) that must not split the key.
VOLUMES = "volumes"
# What it reads of a container: the rest (image, mounts, a per-pod volume name) differs
# between replicas without changing their translation.
CONTAINER_READS = ("name", "resources", "restartPolicy")
# Of these it only asks whether they name NVIDIA_VISIBLE_DEVICES.
CONTAINER_WORDS = ("env", "command", "args")
_VISIBLE_DEVICES = VISIBLE_DEVICES.encode()  # as JSON writes it: ASCII letters are never escaped


def shape_of(spec: Obj, annotations: Annotations = (), yunikorn: str | None = None) -> bytes:
    """Everything translate() reads of a pod spec, of its `watched_annotations` and of what
    marks it for YuniKorn, as bytes: replicas of a workload share it, and so do the workers of
    a training job, which differ in the rank in their env or args (and in annotations of no
    GPU vendor's domain)."""
    parts: list[Any] = [*map(spec.get, SPEC_READS), annotations]
    said: list[Any] = []  # the containers' env, command and args
    for name in CONTAINER_FIELDS:
        items = spec.get(name)
        if isinstance(items, list):
            read: list[Any] = []
            for c in items:
                if isinstance(c, dict):
                    read.append(tuple(map(c.get, CONTAINER_READS)))
                    said.append(tuple(map(c.get, CONTAINER_WORDS)))
                else:
                    read.append((c,))  # one item, where a container's read is three
            items = read
        parts.append(items)
    volumes = spec.get(VOLUMES)
    host = (
        [_host_path(v) for v in volumes if _host_path(v) is not None]
        if isinstance(volumes, list)
        else volumes
    )
    if host:  # most pods mount no hostPath: their key stays as it was
        parts.append(host)
    if yunikorn is not None:  # nor carry YuniKorn's marks (tagged: no hostPath list reads so)
        parts.append({"yunikorn": yunikorn})
    # When no env, command or args names NVIDIA_VISIBLE_DEVICES, they are left out (one JSON
    # document, where the key is two otherwise).
    shape, words = orjson.dumps(parts), orjson.dumps(said)
    return shape + words if _VISIBLE_DEVICES in words else shape


def _host_path(volume: Any) -> Any:
    """What translate() reads of one volume: its name and hostPath, where it has one."""
    if isinstance(volume, dict) and "hostPath" in volume:
        return (volume.get("name"), volume["hostPath"])
    return None

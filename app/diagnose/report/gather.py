"""What `report` reads (GETs only): namespaces, the DeviceClasses and ResourceSlices behind the
catalog, and every object of each kind that holds pod templates, built-in or custom. Nothing
unreadable is fatal: each is named in what is returned."""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial

import orjson

from app.core.catalog import Catalog
from app.core.kube import Obj
from app.core.policy import Policy
from app.readers.autoscalers import node_autoscalers
from app.readers.client import RESOURCE, Reader, ReadError, attempt, namespaced

# Built-in kinds whose objects hold pod templates, listed directly; pods last.
BUILTIN = (
    ("/apis/apps/v1", "deployments"),
    ("/apis/apps/v1", "statefulsets"),
    ("/apis/apps/v1", "daemonsets"),
    ("/apis/apps/v1", "replicasets"),
    ("/apis/batch/v1", "cronjobs"),
    ("/apis/batch/v1", "jobs"),
    ("/api/v1", "pods"),
)


def _custom_kinds(reader: Reader) -> list[tuple[str, str, str]]:
    """(api prefix, plural, Kind) of custom resources whose schema embeds containers."""
    found = []
    for crd in reader.items("/apis/apiextensions.k8s.io/v1/customresourcedefinitions"):
        spec = crd.get("spec") or {}
        versions = [v for v in spec.get("versions") or [] if v.get("served")]
        version = next((v for v in versions if v.get("storage")), versions[0] if versions else None)
        if version is None or b'"containers"' not in orjson.dumps(version.get("schema") or {}):
            continue
        names = spec.get("names") or {}
        if spec.get("scope") == "Namespaced":
            prefix = f"/apis/{spec.get('group')}/{version.get('name')}"
            found.append((prefix, str(names.get("plural")), str(names.get("kind"))))
    return found


def gather(
    reader: Reader, namespace: str | None, policy: Policy
) -> tuple[list[Obj] | None, list[tuple[str, Obj]], Catalog, list[str]]:
    """Namespaces (None: unreadable), (kind, object) of every workload kind, the catalog, and
    what could not be read: each is named, none is fatal."""
    unreadable: list[str] = []
    namespaces = _namespaces(reader, namespace, unreadable)
    classes = attempt(partial(reader.items, f"{RESOURCE}/deviceclasses"))
    if isinstance(classes, ReadError):
        unreadable.append(f"deviceclasses ({classes}): the policy's deviceClasses stand in")
        catalog = Catalog.of(policy.device_classes)
    else:
        catalog = Catalog.from_objects(classes)
    found = attempt(partial(node_autoscalers, reader))
    if isinstance(found, ReadError):
        unreadable.append(f"node autoscalers ({found}): none is taken to add DRA nodes")
        found = ()
    slices = attempt(partial(reader.items, f"{RESOURCE}/resourceslices"))
    if isinstance(slices, ReadError):
        unreadable.append(
            f"resourceslices ({slices}): every driver is taken to share and publish devices"
        )
    else:
        catalog = catalog.seeing(slices, found)
    custom = attempt(partial(_custom_kinds, reader))
    if isinstance(custom, ReadError):
        unreadable.append(f"custom resources ({custom})")
        custom = []
    kinds = [(p, plural, "") for p, plural in BUILTIN[:-1]] + custom + [(*BUILTIN[-1], "")]
    objects: list[tuple[str, Obj]] = []
    for prefix, plural, kind in kinds:
        items = attempt(partial(reader.items, namespaced(prefix, plural, namespace)))
        if isinstance(items, ReadError):
            unreadable.append(f"{plural} ({items})")
            continue
        objects.extend((kind or _kind_of(plural), o) for o in items)
    return namespaces, objects, catalog, unreadable


def _namespaces(reader: Reader, namespace: str | None, unreadable: list[str]) -> list[Obj] | None:
    if not namespace:
        found = attempt(partial(reader.items, "/api/v1/namespaces"))
    else:
        one = attempt(partial(reader.find, f"/api/v1/namespaces/{namespace}"))
        if one is None:
            raise ReadError(f"namespace {namespace} not found")
        found = one if isinstance(one, ReadError) else [one]
    if isinstance(found, ReadError):
        unreadable.append(f"namespaces ({found}): their modes are unknown")
        return None
    return found


_KINDS: Mapping[str, str] = {
    "deployments": "Deployment",
    "statefulsets": "StatefulSet",
    "daemonsets": "DaemonSet",
    "replicasets": "ReplicaSet",
    "cronjobs": "CronJob",
    "jobs": "Job",
    "pods": "Pod",
}


def _kind_of(plural: str) -> str:
    return _KINDS[plural]

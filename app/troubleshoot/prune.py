"""`gpu2dra prune-templates`: delete gpu2dra's ResourceClaimTemplates that no pod uses.

gpu2dra makes a template per shape of pod request and never deletes one: pods use them, and
the next pod of that shape uses it again. Workloads come and go, and templates of shapes no
longer run stay behind. This command finds them; it deletes them only with `--apply`.

A template is in use while a pod that is neither Succeeded nor Failed names it in
spec.resourceClaims[].resourceClaimTemplateName. A template is never deleted while in use:
just before each delete the namespace's pods are listed again, and the delete carries the
template's uid and resourceVersion as preconditions. A template younger than `--min-age` is
kept too: gpu2dra creates it before the pod that needs it is stored. A pod admitted in the
moment between the last look and the delete is the one race left; its claim cannot be made,
`gpu2dra explain` says so, and recreating the pod makes the template again.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from app.core.kube import MANAGED_BY, Obj
from app.core.templates import is_managed, is_reserved_name
from app.readers.client import RESOURCE, ReadError, connect, namespaced
from app.troubleshoot.report import current_namespace

SELECTOR = ",".join(f"{k}={v}" for k, v in MANAGED_BY.items())
# Pods that still run, or will: their claims are (or will be) made from their templates.
LIVE_PODS = "status.phase!=Succeeded,status.phase!=Failed"

Action = Literal["delete", "keep"]


@dataclass(frozen=True, slots=True)
class Fate:
    namespace: str
    name: str
    action: Action
    why: str
    uid: str = ""
    resource_version: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def is_gpu2dras(template: Obj) -> bool:
    return is_managed(template) and is_reserved_name((template.get("metadata") or {}).get("name"))


def users(pods: Iterable[Obj]) -> dict[tuple[str, str], list[str]]:
    """(namespace, template) -> the live pods that name it."""
    found: dict[tuple[str, str], list[str]] = {}
    for pod in pods:
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        for claim in spec.get("resourceClaims") or ():
            if isinstance(claim, dict) and (name := claim.get("resourceClaimTemplateName")):
                key = (str(meta.get("namespace", "")), str(name))
                found.setdefault(key, []).append(str(meta.get("name", "")))
    return found


def _created(template: Obj) -> datetime | None:
    stamp = (template.get("metadata") or {}).get("creationTimestamp")
    try:
        return datetime.fromisoformat(str(stamp))
    except ValueError:
        return None


def plan(
    templates: Iterable[Obj], pods: Iterable[Obj], now: datetime, younger: timedelta
) -> list[Fate]:
    """What to do with each of gpu2dra's templates: a pure function of what was listed."""
    used = users(pods)
    fates = []
    for template in templates:
        if not is_gpu2dras(template):
            continue
        meta = template["metadata"]
        namespace, name = str(meta.get("namespace", "")), str(meta["name"])
        ids = {
            "uid": str(meta.get("uid", "")),
            "resource_version": str(meta.get("resourceVersion", "")),
        }
        if by := used.get((namespace, name)):
            shown = ", ".join(sorted(by)[:3]) + (f" and {len(by) - 3} more" if len(by) > 3 else "")
            fates.append(Fate(namespace, name, "keep", f"used by pod {shown}", **ids))
            continue
        created = _created(template)
        if created is None or now - created < younger:
            age = "of unknown age" if created is None else f"made {_ago(now - created)} ago"
            why = f"unused, but {age}: a pod being admitted may be about to use it"
            fates.append(Fate(namespace, name, "keep", why, **ids))
            continue
        fates.append(Fate(namespace, name, "delete", "no live pod uses it", **ids))
    return sorted(fates, key=lambda f: (f.namespace, f.name))


def _ago(age: timedelta) -> str:
    seconds = max(0, int(age.total_seconds()))
    return f"{seconds // 60}m" if seconds >= 60 else f"{seconds}s"


# ---- against the cluster -----------------------------------------------------------------


def delete(
    fate: Fate,
    live_pods: Callable[[str], list[Obj]],
    remove: Callable[[str, str, client.V1DeleteOptions], None],
) -> Fate:
    """Delete one unused template, after a last look at its namespace's pods, and only if it
    is still the object that was listed (uid and resourceVersion as preconditions)."""
    if by := users(live_pods(fate.namespace)).get((fate.namespace, fate.name)):
        return Fate(fate.namespace, fate.name, "keep", f"used by pod {', '.join(sorted(by))} now")
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


def main(args: argparse.Namespace) -> int:
    reader = connect(args.kubeconfig)
    namespace = None if args.all_namespaces else (args.namespace or current_namespace(args))
    templates = reader.items(
        namespaced(RESOURCE, "resourceclaimtemplates", namespace), labelSelector=SELECTOR
    )
    pods = reader.items(namespaced("/api/v1", "pods", namespace), fieldSelector=LIVE_PODS)
    fates = plan(templates, pods, datetime.now(UTC), args.min_age)
    unused = [f for f in fates if f.action == "delete"]
    if args.apply:
        resource = client.ResourceV1Api(reader.api)

        def live_pods(ns: str) -> list[Obj]:
            return reader.items(namespaced("/api/v1", "pods", ns), fieldSelector=LIVE_PODS)

        def remove(name: str, ns: str, options: client.V1DeleteOptions) -> None:
            resource.delete_namespaced_resource_claim_template(name, ns, body=options)

        done = {f.key: delete(f, live_pods, remove) for f in unused}
        fates = [done.get(f.key, f) for f in fates]
    verbs = {"delete": "deleted", "keep": "kept"} if args.apply else {"delete": "would delete"}
    for fate in fates:
        print(f"{verbs.get(fate.action, fate.action)} {fate.key}: {fate.why}")
    deleted = sum(f.action == "delete" for f in fates) if args.apply else 0
    where = "every namespace" if namespace is None else f"namespace {namespace}"
    summary = f"{len(fates)} gpu2dra template(s) in {where}, {len(unused)} unused"
    if args.apply:
        print(f"{summary}; {deleted} deleted")
    elif unused:
        print(f"{summary}; a dry run: --apply deletes them")
    else:
        print(summary)
    return 0

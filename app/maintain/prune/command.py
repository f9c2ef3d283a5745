"""`gpu2dra prune-templates` run: list gpu2dra's templates, the live pods and the workloads'
pod templates, say what becomes of each template, and delete the unused ones when told to
apply."""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from typing import Literal

from kubernetes import client

from app.core.kube import MANAGED_BY, Obj
from app.kubeconfig import Kubeconfig
from app.maintain.prune.delete import delete
from app.maintain.prune.fates import WORKLOAD_KINDS, Workload, plan
from app.maintain.prune.render import render_json, render_text
from app.readers.client import RESOURCE, connect, namespaced
from app.readers.output import structured

SELECTOR = ",".join(f"{k}={v}" for k, v in MANAGED_BY.items())
# Pods that still run, or will: their claims are (or will be) made from their templates.
LIVE_PODS = "status.phase!=Succeeded,status.phase!=Failed"
# Where each workload kind is listed: its pod template names the templates its next pods use.
WORKLOAD_PATHS = {
    "Deployment": ("/apis/apps/v1", "deployments"),
    "StatefulSet": ("/apis/apps/v1", "statefulsets"),
    "DaemonSet": ("/apis/apps/v1", "daemonsets"),
    "ReplicaSet": ("/apis/apps/v1", "replicasets"),
    "Job": ("/apis/batch/v1", "jobs"),
    "CronJob": ("/apis/batch/v1", "cronjobs"),
}
assert tuple(WORKLOAD_PATHS) == WORKLOAD_KINDS


def run(
    *,
    kubeconfig: Kubeconfig,
    namespace: str | None,
    apply: bool,
    min_age: timedelta,
    output: Literal["text", "json", "yaml"] = "text",
) -> int:
    """`namespace` None: every namespace. Without `apply`, a dry run."""
    reader = connect(kubeconfig)
    templates = reader.items(
        namespaced(RESOURCE, "resourceclaimtemplates", namespace), labelSelector=SELECTOR
    )
    pods = reader.items(namespaced("/api/v1", "pods", namespace), fieldSelector=LIVE_PODS)

    def workloads(ns: str | None) -> list[Workload]:
        return [
            (kind, obj)
            for kind, (prefix, plural) in WORKLOAD_PATHS.items()
            for obj in reader.items(namespaced(prefix, plural, ns))
        ]

    fates = plan(templates, pods, datetime.now(UTC), min_age, workloads=workloads(namespace))
    unused = [f for f in fates if f.action == "delete"]
    if apply:
        resource = client.ResourceV1Api(reader.api)

        def live_pods(ns: str) -> list[Obj]:
            return reader.items(namespaced("/api/v1", "pods", ns), fieldSelector=LIVE_PODS)

        def remove(name: str, ns: str, options: client.V1DeleteOptions) -> None:
            resource.delete_namespaced_resource_claim_template(name, ns, body=options)

        done = {f.key: delete(f, live_pods, remove, workloads=workloads) for f in unused}
        fates = [done.get(f.key, f) for f in fates]
    if output == "json" or output == "yaml":
        body = render_json(fates, namespace=namespace, applied=apply)
        sys.stdout.buffer.write(structured(body, output))
    else:
        shown = render_text(fates, unused=len(unused), namespace=namespace, applied=apply)
        sys.stdout.write(shown)
    return 0

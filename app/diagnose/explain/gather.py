"""What `explain` reads of a pod and what it depends on (GETs only): the pod must be readable,
everything else is a ReadError in `PodFacts` where it could not be read."""

from __future__ import annotations

from functools import partial

from app.core import kueue
from app.core.kube import Obj
from app.core.kueue import queued
from app.diagnose.explain.facts import PodFacts
from app.diagnose.explain.workload import WORKLOAD_VERSIONS, admission_gated, workload_of
from app.readers.autoscalers import node_autoscalers
from app.readers.client import (
    RESOURCE,
    NotFound,
    Reader,
    ReadError,
    Unreachable,
    attempt,
    cannot_read,
)
from app.readers.registrations import MUTATING_WEBHOOK, registrations


def gather(reader: Reader, namespace: str, name: str) -> PodFacts:
    """The pod (which must be readable) and what it depends on, each as far as it can be read."""
    pod = _pod(reader, namespace, name)
    ns = attempt(partial(reader.find, f"/api/v1/namespaces/{namespace}"))
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    in_ns = f"{RESOURCE}/namespaces/{namespace}"
    templates = {
        str(t): attempt(partial(reader.find, f"{in_ns}/resourceclaimtemplates/{t}"))
        for c in spec.get("resourceClaims") or []
        if (t := c.get("resourceClaimTemplateName"))
    }
    claim_names = {
        str(s.get("name")): s.get("resourceClaimName")
        for s in status.get("resourceClaimStatuses") or []
    }
    claims = {
        n: attempt(partial(reader.find, f"{in_ns}/resourceclaims/{n}"))
        for n in sorted(_claims_of(spec, status, claim_names))
    }
    unallocated = not spec.get("nodeName") or any(
        isinstance(c, dict) and not (c.get("status") or {}).get("allocation")
        for c in claims.values()
    )
    return PodFacts(
        pod=pod,
        namespace_labels=ns
        if isinstance(ns, ReadError)
        else ((ns or {}).get("metadata") or {}).get("labels") or {},
        device_classes=attempt(partial(reader.items, f"{RESOURCE}/deviceclasses")),
        templates=templates,
        claim_names=claim_names,
        claims=claims,
        all_claims=attempt(partial(reader.items, f"{RESOURCE}/resourceclaims"))
        if unallocated
        else [],
        # Also for a pod without claims: whether the cluster shares devices decides whether
        # gpu2dra would have moved a pod on shared GPUs.
        slices=attempt(partial(reader.items, f"{RESOURCE}/resourceslices"))
        if unallocated or not spec.get("resourceClaims")
        else [],
        autoscalers=attempt(partial(node_autoscalers, reader))
        if unallocated or not spec.get("resourceClaims")
        else (),
        events=attempt(
            lambda: reader.items(
                f"/api/v1/namespaces/{namespace}/events",
                fieldSelector=f"involvedObject.kind=Pod,involvedObject.name={name}",
            )
        ),
        webhook_registered=_registered(reader),
        quotas=attempt(partial(reader.items, f"/api/v1/namespaces/{namespace}/resourcequotas")),
        kueue=_kueue(reader) if queued(pod.get("metadata")) else None,
        workload=_workload(reader, pod) if admission_gated(spec) else None,
    )


def _pod(reader: Reader, namespace: str, name: str) -> Obj:
    """The pod, or the ReadError that ends explain."""
    try:
        pod = reader.find(f"/api/v1/namespaces/{namespace}/pods/{name}")
    except Unreachable:
        raise
    except ReadError as err:
        raise ReadError(cannot_read(err, f"pod {namespace}/{name}")) from None
    if pod is None:
        raise ReadError(f"pod {namespace}/{name} not found")
    return pod


def _claims_of(spec: Obj, status: Obj, claim_names: dict[str, str | None]) -> set[str]:
    """The names of the pod's ResourceClaims: named, made from its templates, and the one the
    scheduler made for its extended resources (the in-tree path)."""
    wanted = {
        str(n)
        for c in spec.get("resourceClaims") or []
        if (n := c.get("resourceClaimName") or claim_names.get(str(c.get("name"))))
    }
    if extended := (status.get("extendedResourceClaimStatus") or {}).get("resourceClaimName"):
        wanted.add(str(extended))
    return wanted


def _registered(reader: Reader) -> bool | None:
    """Whether gpu2dra's mutating webhook is registered; None when that cannot be read."""
    regs = attempt(lambda: registrations(reader))
    if isinstance(regs, ReadError):
        return None
    return any(h.get("name") == MUTATING_WEBHOOK for r in regs for h in r.webhooks)


def _workload(reader: Reader, pod: Obj) -> Obj | ReadError | None:
    """The Workload Kueue's pod integration made of the pod: the one it owns (v1beta2 from
    Kueue v0.15, v1beta1 before)."""
    namespace = pod["metadata"].get("namespace")
    listed: list[Obj] | ReadError = NotFound("no Workload API")
    for version in WORKLOAD_VERSIONS:
        path = f"/apis/kueue.x-k8s.io/{version}/namespaces/{namespace}/workloads"
        listed = attempt(partial(reader.items, path))
        if not isinstance(listed, NotFound):
            break
    if isinstance(listed, ReadError):
        return listed
    return workload_of(pod, listed)


def _kueue(reader: Reader) -> kueue.Kueue | ReadError | None:
    config = attempt(
        partial(reader.find, f"/api/v1/namespaces/{kueue.NAMESPACE}/configmaps/{kueue.CONFIG}")
    )
    path = f"/apis/apps/v1/namespaces/{kueue.NAMESPACE}/deployments/{kueue.DEPLOYMENT}"
    manager = attempt(partial(reader.find, path))
    if isinstance(config, ReadError):
        return config
    if isinstance(manager, ReadError):
        return manager
    return kueue.read(config, manager)

"""What `doctor` judges, read from the cluster (GETs only): `gather` returns the `Facts` every
check is a pure function of, each part a ReadError where it could not be read."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from functools import partial

from app.core import kueue
from app.core.kube import RESOURCE_GROUP, Obj
from app.diagnose.doctor.facts import Facts, NotServed, Reached
from app.readers.client import RESOURCE, Listed, Reader, ReadError, attempt
from app.readers.registrations import Registration, registrations
from app.readers.tlsprobe import Endpoint, base64_pem, endpoint_of, verify_tls


def gather(reader: Reader) -> Facts:
    """Every part of the facts, each a ReadError where it could not be read; an API server
    that does not answer ends it (`attempt`)."""

    def listed(path: str) -> Listed:
        return attempt(partial(reader.items, path))

    def found(path: str) -> Obj | ReadError | None:
        return attempt(partial(reader.find, path))

    version = attempt(partial(reader.get, "/version"))
    group = found(f"/apis/{RESOURCE_GROUP}")
    # No such group is served at all: no version of it, which the kubernetes check says.
    served = group if isinstance(group, ReadError) else _versions(group)
    regs = attempt(partial(registrations, reader))

    def dra(plural: str) -> Listed:
        # Without v1 every DRA list is a 404, which is no RBAC problem.
        if isinstance(served, list) and "v1" not in served:
            return NotServed(f"{RESOURCE_GROUP}/v1 is not served")
        return listed(f"{RESOURCE}/{plural}")

    return Facts(
        version=version,
        resource_versions=served,
        device_classes=dra("deviceclasses"),
        slices=dra("resourceslices"),
        claims=dra("resourceclaims"),
        nodes=listed("/api/v1/nodes"),
        namespaces=listed("/api/v1/namespaces"),
        registrations=regs,
        tls=[] if isinstance(regs, ReadError) else _reach(regs),
        ready_endpoints={} if isinstance(regs, ReadError) else _ready(reader, regs),
        quotas=listed("/api/v1/resourcequotas"),
        kueue=found(f"/api/v1/namespaces/{kueue.NAMESPACE}/configmaps/{kueue.CONFIG}"),
        kueue_manager=found(
            f"/apis/apps/v1/namespaces/{kueue.NAMESPACE}/deployments/{kueue.DEPLOYMENT}"
        ),
        priority_classes=listed("/apis/scheduling.k8s.io/v1/priorityclasses"),
        pods=listed("/api/v1/pods"),
        daemonsets=listed("/apis/apps/v1/daemonsets"),
        deployments=listed("/apis/apps/v1/deployments"),
        cluster_roles=listed("/apis/rbac.authorization.k8s.io/v1/clusterroles"),
        cluster_role_bindings=listed("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"),
    )


def _versions(group: Obj | None) -> list[str]:
    """The versions an API group's discovery document lists; none when it is not served."""
    return [str(v["version"]) for v in (group or {}).get("versions") or []]


def _reach(regs: Iterable[Registration]) -> list[Reached]:
    targets: dict[tuple[Endpoint, str], list[str]] = defaultdict(list)
    for reg in regs:
        for hook in reg.webhooks:
            cfg = hook.get("clientConfig") or {}
            endpoint = endpoint_of(cfg)
            if endpoint is not None:
                targets[endpoint, str(cfg.get("caBundle") or "")].append(reg.name)
    found = []
    for (endpoint, bundle), names in targets.items():
        configs = tuple(dict.fromkeys(names))
        if not bundle:
            found.append(Reached(endpoint, configs, "no caBundle is set"))
            continue
        try:
            ca = base64_pem(bundle)
        except ValueError as err:
            found.append(Reached(endpoint, configs, str(err)))
            continue
        verified = attempt(partial(verify_tls, endpoint, ca))
        if isinstance(verified, ReadError):  # not reachable from here, which is no verdict
            found.append(Reached(endpoint, configs, None, str(verified)))
        else:
            found.append(Reached(endpoint, configs, verified))
    return found


def _ready(reader: Reader, regs: Iterable[Registration]) -> dict[tuple[str, str], int | ReadError]:
    """How many ready endpoints each Service the webhooks name has."""
    services = {
        (str(svc.get("namespace")), str(svc.get("name")))
        for reg in regs
        for hook in reg.webhooks
        if isinstance(svc := (hook.get("clientConfig") or {}).get("service"), dict)
    }
    ready: dict[tuple[str, str], int | ReadError] = {}
    for namespace, name in services:
        slices = attempt(
            partial(
                reader.items,
                f"/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices",
                labelSelector=f"kubernetes.io/service-name={name}",
            )
        )
        if isinstance(slices, ReadError):
            ready[namespace, name] = slices
            continue
        ready[namespace, name] = sum(
            1
            for s in slices
            for e in s.get("endpoints") or []
            if (e.get("conditions") or {}).get("ready") is not False
        )
    return ready

"""What `doctor` judges, read from the cluster (GETs only): `gather` returns the `Facts` every
check is a pure function of, each part a ReadError where it could not be read."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from app.core import kueue
from app.core.kube import RESOURCE_GROUP, Obj
from app.diagnose.doctor.checks.check import Facts, NotServed, Reached
from app.readers.client import RESOURCE, Listed, NotFound, Reader, ReadError, Unreachable, attempt
from app.readers.registrations import Registration, registrations
from app.readers.tlsprobe import Endpoint, base64_pem, endpoint_of, verify_tls


def gather(reader: Reader) -> Facts:
    def listed(path: str) -> Listed:
        try:
            return reader.items(path)
        except ReadError as err:
            return err

    try:
        version: Obj | ReadError = reader.get("/version")
    except Unreachable:
        raise
    except ReadError as err:
        version = err
    try:
        group = reader.get(f"/apis/{RESOURCE_GROUP}")
        served: list[str] | ReadError = [v["version"] for v in group.get("versions") or []]
    except NotFound:
        served = []
    except ReadError as err:
        served = err
    try:
        regs: list[Registration] | ReadError = registrations(reader)
    except ReadError as err:
        regs = err

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
        nodes=listed("/api/v1/nodes"),
        namespaces=listed("/api/v1/namespaces"),
        registrations=regs,
        tls=[] if isinstance(regs, ReadError) else _reach(regs),
        ready_endpoints={} if isinstance(regs, ReadError) else _ready(reader, regs),
        quotas=listed("/api/v1/resourcequotas"),
        kueue=attempt(
            lambda: reader.find(f"/api/v1/namespaces/{kueue.NAMESPACE}/configmaps/{kueue.CONFIG}")
        ),
        kueue_manager=attempt(
            lambda: reader.find(
                f"/apis/apps/v1/namespaces/{kueue.NAMESPACE}/deployments/{kueue.DEPLOYMENT}"
            )
        ),
        priority_classes=listed("/apis/scheduling.k8s.io/v1/priorityclasses"),
        pods=listed("/api/v1/pods"),
        daemonsets=listed("/apis/apps/v1/daemonsets"),
        deployments=listed("/apis/apps/v1/deployments"),
        cluster_roles=listed("/apis/rbac.authorization.k8s.io/v1/clusterroles"),
        cluster_role_bindings=listed("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"),
    )


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
            found.append(Reached(endpoint, configs, verify_tls(endpoint, ca)))
        except ValueError as err:
            found.append(Reached(endpoint, configs, str(err)))
        except ReadError as err:
            found.append(Reached(endpoint, configs, None, str(err)))
    return found


def _ready(reader: Reader, regs: Iterable[Registration]) -> dict[tuple[str, str], int | ReadError]:
    services = {
        (str(svc.get("namespace")), str(svc.get("name")))
        for reg in regs
        for hook in reg.webhooks
        if isinstance(svc := (hook.get("clientConfig") or {}).get("service"), dict)
    }
    ready: dict[tuple[str, str], int | ReadError] = {}
    for namespace, name in services:
        try:
            slices = reader.items(
                f"/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices",
                labelSelector=f"kubernetes.io/service-name={name}",
            )
        except ReadError as err:
            ready[namespace, name] = err
            continue
        ready[namespace, name] = sum(
            1
            for s in slices
            for e in s.get("endpoints") or []
            if (e.get("conditions") or {}).get("ready") is not False
        )
    return ready

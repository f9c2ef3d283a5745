"""A translation's plan written as claims: a device request per legacy request, a claim per
request (a regular init container reusing its app containers' claims where they cover it),
and the pod spec rewritten to use them, with where it changed."""

from __future__ import annotations

from typing import Any, NamedTuple

from app.core import consumable
from app.core.initclaims import Claim, Legacy, Shape, cover, more_devices
from app.core.kube import Obj, Path
from app.core.names import claim_name, request_name
from app.core.nvidia.gfd import REMOVE, NodeSelection
from app.core.outcomes import Code, Finding
from app.core.resources import LegacyRequest, container_label, containers, is_regular_init
from app.core.templates import DeviceRequest, sharing_config

VISIBLE_DEVICES = "NVIDIA_VISIBLE_DEVICES"


def _reads_visible_devices(container: Obj) -> bool:
    env = container.get("env")
    if isinstance(env, list):
        for entry in env:
            if isinstance(entry, dict) and entry.get("name") == VISIBLE_DEVICES:
                return True
    for field in ("command", "args"):
        words = container.get(field)
        if isinstance(words, list):
            for word in words:
                if isinstance(word, str) and VISIBLE_DEVICES in word:
                    return True
    return False


def _claim_names_in_use(spec: Obj, pod_claims: list[Any]) -> set[str]:
    """The pod's claim names and every name its containers refer to: a dangling reference
    must stay dangling (and the pod invalid), not start to share a claim of ours."""
    entries = list(pod_claims)
    for _, _, container in containers(spec):
        resources = container.get("resources")
        claims = resources.get("claims") if isinstance(resources, dict) else None
        if isinstance(claims, list):
            entries.extend(claims)
    return {e["name"] for e in entries if isinstance(e, dict) and isinstance(e.get("name"), str)}


class Plan(NamedTuple):
    """The devices each request becomes."""

    legacy: Legacy  # as asked, or as MIG requests on a MIG single-strategy node
    used: list[LegacyRequest]  # the requests for one device or more
    selection: NodeSelection
    hami: tuple[str, ...]  # selectors of the HAMi annotations, for whole-GPU requests
    shared: bool  # the pod's node terms pick shared GPUs


def whole(lg: LegacyRequest) -> bool:
    """Whether the request is for whole GPUs: what HAMi's device annotations select."""
    return lg.mapping.node_labels == "gpu"


def device_request(lg: LegacyRequest, plan: Plan) -> DeviceRequest:
    """What one legacy request becomes: its class, count, selectors (its own, the node
    terms', HAMi's for whole GPUs, the capacity it takes) and the driver's sharing config."""
    node: tuple[str, ...] = plan.selection.selectors.get(lg.mapping.node_labels, ())
    if whole(lg):
        node += plan.hami
    config = ""
    if (plan.shared or lg.shared) and lg.mapping.sharing:
        kind = "MigDeviceConfig" if lg.mapping.node_labels == "mig" else "GpuConfig"
        config = sharing_config(kind, lg.mapping.sharing)
    taken = consumable.capacity(lg, plan.shared)
    return DeviceRequest(
        name=request_name(lg.resource),
        device_class=lg.mapping.device_class,
        devices=lg.devices,
        selectors=lg.selectors + node + taken.selectors,
        config=config,
        capacity=taken.requests,
    )


class Claims(NamedTuple):
    made: list[Claim]  # the claims added to the pod, in order
    of: dict[tuple[str, int], list[str]]  # (field, index) -> the claims its container names


def write_claims(spec: Obj, plan: Plan, pod_claims: list[Any], warnings: list[Finding]) -> Claims:
    """A claim per request, named apart from the pod's own; a regular init container reuses
    app containers' claims of its shape where they cover its devices."""
    taken = _claim_names_in_use(spec, pod_claims)
    salts: dict[str, int] = {}
    new_claims: list[Claim] = []
    app_claims: dict[Shape, dict[int, list[Claim]]] = {}
    claims_of: dict[tuple[str, int], list[str]] = {}
    own_init: dict[str, list[str]] = {}  # resource -> init containers with claims of their own
    for (field, index), (container, found) in plan.legacy.items():
        names = claims_of.setdefault((field, index), [])
        for lg in found:
            if not lg.devices:
                continue
            req = device_request(lg, plan)
            shape = (lg.resource, req.device_class, req.selectors, req.config, req.capacity)
            if is_regular_init(field, container):
                # `names`: each device of the container counts once
                if (reused := cover(req.devices, app_claims.get(shape, {}), names)) is not None:
                    names.extend(c.name for c in reused)
                    continue
                own_init.setdefault(lg.resource, []).append(str(container.get("name")))
            name = claim_name(str(container.get("name")), req.name, taken, salts)
            claim = Claim(
                name=name,
                template=req.template(),
                resource=lg.resource,
                device_class=req.device_class,
                devices=req.devices,
            )
            taken.add(claim.name)
            new_claims.append(claim)
            if field == "containers":
                app_claims.setdefault(shape, {}).setdefault(req.devices, []).append(claim)
            names.append(claim.name)
        if names and _reads_visible_devices(container):
            who = container_label(field, container)
            warnings.append(Finding(Code.VISIBLE_DEVICES, who=who))
    if own_init:
        warnings.extend(more_devices(plan.legacy, new_claims, own_init))
    return Claims(new_claims, claims_of)


def rewritten(
    spec: Obj, plan: Plan, pod_claims: list[Any], claims: Claims
) -> tuple[Obj, list[Path]]:
    """The new pod spec (the input's untouched subtrees shared) and where it changed: the
    containers' resources, the pod's claims, the node terms that became device selectors."""
    new_spec = dict(spec)
    touched: list[Path] = []
    for field in ("initContainers", "containers"):
        changed = [(i, c, f) for (fld, i), (c, f) in plan.legacy.items() if fld == field]
        if not changed:
            continue
        items = list(spec[field])
        for index, container, found in changed:
            items[index] = _rewrite(container, found, claims.of[field, index])
            touched.append((field, index, "resources"))
        new_spec[field] = items
    if claims.made:
        new_spec["resourceClaims"] = [
            *pod_claims,
            *({"name": c.name, "resourceClaimTemplateName": c.template_name} for c in claims.made),
        ]
        touched.append(("resourceClaims",))
    for key, value in plan.selection.spec_changes.items():
        if value is REMOVE:
            new_spec.pop(key, None)
        else:
            new_spec[key] = value
        touched.append((key,))
    return new_spec, touched


def _rewrite(container: Obj, found: list[LegacyRequest], claims: list[str]) -> Obj:
    """The container without its legacy resources and with `claims` added."""
    gone = {lg.resource for lg in found}
    gone |= {lg.mapping.consumable.memory for lg in found if lg.memory and lg.mapping.consumable}
    resources = dict(container["resources"])
    for key in ("limits", "requests"):
        amounts = resources.get(key)
        if isinstance(amounts, dict) and gone & amounts.keys():
            kept = {k: v for k, v in amounts.items() if k not in gone}
            if kept:
                resources[key] = kept
            else:
                del resources[key]
    if claims:
        existing = resources.get("claims") or []
        have = {
            c["name"] for c in existing if isinstance(c, dict) and isinstance(c.get("name"), str)
        }
        resources["claims"] = [*existing, *({"name": n} for n in claims if n not in have)]
    return {**container, "resources": resources}

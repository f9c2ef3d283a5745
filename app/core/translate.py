"""Legacy GPU requests -> DRA claims: a pure function of the pod spec, the policy and the catalog.

Nothing here does I/O or changes its input: the result shares every subtree it did not touch
with the input and names the subtrees it replaced, so a patch for only those can be derived.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, NamedTuple

import orjson

from app.core.catalog import Catalog
from app.core.gfd import NO_SELECTION, REMOVE, select_devices
from app.core.kube import MAX_DEVICES_PER_CLAIM, RESOURCE_API_VERSION, Obj, dns_label, is_dns_label
from app.core.policy import Policy, ResourceMapping

MANAGED_BY = {"app.kubernetes.io/managed-by": "gpu2dra"}
TEMPLATE_PREFIX = "gpu2dra-"

Path = tuple[str | int, ...]  # a location under the pod spec


class DeviceRequest(NamedTuple):
    """One `exactly` request: the only shape every 1.34+ cluster (and Kueue) understands."""

    name: str
    device_class: str
    devices: int  # the request's `count`
    selectors: tuple[str, ...]

    @property
    def template_name(self) -> str:
        return _template(self)["metadata"]["name"]  # type: ignore[no-any-return]

    def template(self) -> Obj:
        """The ResourceClaimTemplate (without namespace). Shared: do not mutate."""
        return _template(self)


@lru_cache(maxsize=4096)
def _template(req: DeviceRequest) -> Obj:
    exactly: Obj = {
        "deviceClassName": req.device_class,
        "allocationMode": "ExactCount",
        "count": req.devices,
    }
    if req.selectors:
        exactly["selectors"] = [{"cel": {"expression": s}} for s in req.selectors]
    spec = {"devices": {"requests": [{"name": req.name, "exactly": exactly}]}}
    # Named by content: the same shape always gets the same (immutable) template, and a new
    # shape never collides with an old one.
    digest = hashlib.sha256(orjson.dumps(spec, option=orjson.OPT_SORT_KEYS)).hexdigest()[:10]
    return {
        "apiVersion": RESOURCE_API_VERSION,
        "kind": "ResourceClaimTemplate",
        "metadata": {
            "name": f"{TEMPLATE_PREFIX}{req.name}-x{req.devices}-{digest}",
            "labels": MANAGED_BY,
        },
        "spec": {"spec": spec},
    }


class Translation(NamedTuple):
    spec: Obj  # the translated pod spec; `is` the input when nothing changed
    templates: tuple[Obj, ...]
    warnings: tuple[str, ...]
    touched: tuple[Path, ...]  # what changed under the spec, for deriving a patch

    @property
    def changed(self) -> bool:
        return bool(self.touched)


# ---- reading legacy requests -------------------------------------------------------------

_MIG_BASE = re.compile(r"(?:\d+c\.)?\d+g\.\d+gb")
# The device plugin writes a profile's `+` as `.` (go-nvlib attributes: me, me.all, gfx; -me).
_MIG_ATTRS = ((".me.all", "+me.all"), (".me", "+me"), (".gfx", "+gfx"), ("-me", "-me"))


def mig_profile(spelled: str) -> str | None:
    """`1g.10gb.me` (device-plugin resource suffix) -> `1g.10gb+me` (DRA `profile`)."""
    match = _MIG_BASE.match(spelled)
    if match is None:
        return None
    profile, rest = match.group(), spelled[match.end() :]
    while rest:
        for plugin, dra in _MIG_ATTRS:
            if rest.startswith(plugin):
                profile, rest = profile + dra, rest[len(plugin) :]
                break
        else:
            return None
    return profile


_COUNT = re.compile(r"[0-9]{1,18}")


def parse_count(value: Any) -> int | None:
    """A device count: an integer or a quoted integer; None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float):
        return int(value) if value.is_integer() and 0 <= value < 2**53 else None
    if isinstance(value, str) and _COUNT.fullmatch(value):
        return int(value)
    return None


class _Legacy(NamedTuple):
    resource: str
    devices: int
    mapping: ResourceMapping
    selectors: tuple[str, ...]  # the mapping's, with {profile} filled in


def _is_gpu_resource(name: str) -> bool:
    return name.startswith(("nvidia.com/gpu", "nvidia.com/mig-"))


_NONE: Obj = {}  # a missing limits or requests map; read only


def _legacy_requests(
    field: str, container: Obj, policy: Policy, warn: list[str]
) -> list[_Legacy] | None:
    """The mapped legacy resources of one container; None leaves the container as it is."""
    resources = container.get("resources")
    if not isinstance(resources, dict):
        return None

    def say(why: str) -> None:
        warn.append(f"{field[:-1]} {container.get('name')!r}: {why}")

    limits, requests = resources.get("limits"), resources.get("requests")
    limits = limits if isinstance(limits, dict) else _NONE
    requests = requests if isinstance(requests, dict) else _NONE
    names: Any = limits  # requests name the same resources as limits, as a rule
    if requests and not requests.keys() <= limits.keys():
        names = dict.fromkeys(itertools.chain(limits, requests))
    found: list[_Legacy] = []
    for resource in names:
        if not isinstance(resource, str):
            continue
        hit = policy.mapping_for(resource)
        if hit is None or (hit[0].is_pattern and resource.endswith(".shared")):
            if resource.endswith(".shared") and _is_gpu_resource(resource):
                say(
                    f"{resource} (shared GPU replicas) has no faithful DRA equivalent; "
                    "left as is (map it in the policy to translate it)"
                )
            continue
        mapping, captured = hit
        selectors = mapping.selectors
        if mapping.is_pattern:
            profile = mig_profile(captured)
            if profile is None:
                say(f"{resource} does not name a MIG profile; container left as is")
                return None
            selectors = tuple(s.replace("{profile}", profile) for s in selectors)
        if resource not in limits:
            say(
                f"{resource} is requested without a limit (extended resources need "
                "both, equal); container left as is"
            )
            return None
        count = parse_count(limits[resource])
        if count is None:
            say(
                f"{resource} count {limits[resource]!r} is not a non-negative integer; "
                "container left as is"
            )
            return None
        if resource in requests and parse_count(requests[resource]) != count:
            say(
                f"{resource} request {requests[resource]!r} differs from its limit "
                f"{limits[resource]!r}; container left as is"
            )
            return None
        if count > MAX_DEVICES_PER_CLAIM:
            say(
                f"{resource}: {count} devices exceed the {MAX_DEVICES_PER_CLAIM} a DRA "
                "claim can be allocated; container left as is"
            )
            return None
        found.append(_Legacy(resource, count, mapping, selectors))
    return found


# ---- writing claims ----------------------------------------------------------------------


@lru_cache(maxsize=1024)
def request_name(resource: str) -> str:
    """`nvidia.com/mig-1g.10gb` -> `mig-1g-10gb`: a DNS label naming the request."""
    return dns_label(resource.rsplit("/", 1)[-1])


def claim_name(
    container: str, request: str, taken: set[str], salts: dict[str, int] | None = None
) -> str:
    """A pod claim name: a DNS label, unique among `taken`, readable when it fits.

    `salts` remembers, per base name, the salt after the last one returned: the caller adds
    each name it gets to `taken`, so every smaller salt is still taken, and n containers of
    one name (an invalid pod, yet one we are sent) cost n hashes, not n * n.
    """
    base = f"{container}-{request}"
    if is_dns_label(base) and base not in taken:
        return base
    stem = dns_label(base)[:56].rstrip("-")
    for salt in itertools.count(salts.get(base, 0) if salts is not None else 0):
        digest = hashlib.sha256(f"{base}/{salt}".encode()).hexdigest()[:6]
        name = f"{stem}-{digest}"
        if name not in taken:
            if salts is not None:
                salts[base] = salt + 1
            return name
    raise AssertionError("unreachable")


@dataclass(slots=True)
class _Claim:
    name: str
    template: Obj  # the ResourceClaimTemplate it is made from

    @property
    def template_name(self) -> str:
        return self.template["metadata"]["name"]  # type: ignore[no-any-return]


Shape = tuple[str, tuple[str, ...]]  # DeviceClass and selectors: what makes claims reusable


def _cover(need: int, by_count: dict[int, list[_Claim]], exclude: list[str]) -> list[_Claim] | None:
    """App claims an init container can reuse for `need` devices: the smallest single claim
    that covers it (the first of its count), else the largest ones until they do; None if all
    of them fall short. `by_count` holds the app claims of one shape by count, in pod order:
    at most 32 counts, so a pod with thousands of containers costs no more per container."""
    for count in sorted(c for c in by_count if c >= need):
        for claim in by_count[count]:
            if claim.name not in exclude:
                return [claim]
    chosen: list[_Claim] = []
    total = 0
    for count in sorted(by_count, reverse=True):
        for claim in by_count[count]:
            if claim.name in exclude:
                continue
            chosen.append(claim)
            total += count
            if total >= need:
                return chosen
    return None


def _containers(spec: Obj) -> Iterator[tuple[str, int, Obj]]:
    # App containers first: init containers can only reuse claims that already exist.
    for field in ("containers", "initContainers"):
        items = spec.get(field)
        if isinstance(items, list):
            for index, container in enumerate(items):
                if isinstance(container, dict):
                    yield field, index, container


def _is_regular_init(field: str, container: Obj) -> bool:
    # Sidecars (restartPolicy: Always) run beside the app; regular init containers run
    # before it, and the device plugin hands their GPUs on to the app containers.
    return field == "initContainers" and container.get("restartPolicy") != "Always"


def _reads_visible_devices(container: Obj) -> bool:
    env = container.get("env")
    if isinstance(env, list):
        for entry in env:
            if isinstance(entry, dict) and entry.get("name") == "NVIDIA_VISIBLE_DEVICES":
                return True
    for field in ("command", "args"):
        words = container.get(field)
        if isinstance(words, list):
            for word in words:
                if isinstance(word, str) and "NVIDIA_VISIBLE_DEVICES" in word:
                    return True
    return False


def _claim_names_in_use(spec: Obj, pod_claims: list[Any]) -> set[str]:
    """The pod's claim names and every name its containers refer to: a dangling reference
    must stay dangling (and the pod invalid), not start to share a claim of ours."""
    entries = list(pod_claims)
    for _, _, container in _containers(spec):
        resources = container.get("resources")
        claims = resources.get("claims") if isinstance(resources, dict) else None
        if isinstance(claims, list):
            entries.extend(claims)
    return {e["name"] for e in entries if isinstance(e, dict) and isinstance(e.get("name"), str)}


def _unchanged(spec: Obj, warnings: list[str]) -> Translation:
    return Translation(spec, (), tuple(dict.fromkeys(warnings)), ())


def asks_extended_resources(spec: Obj) -> bool:
    """Whether any container asks for a resource named with a domain (`vendor/name`): every
    mapped resource is, and most pods ask only for cpu and memory."""
    for field in ("containers", "initContainers"):
        items = spec.get(field)
        for container in items if isinstance(items, list) else ():
            resources = container.get("resources") if isinstance(container, dict) else None
            if not isinstance(resources, dict):
                continue
            for key in ("limits", "requests"):
                amounts = resources.get(key)
                if isinstance(amounts, dict) and any(
                    isinstance(name, str) and "/" in name for name in amounts
                ):
                    return True
    return False


def translate(spec: Obj, policy: Policy, catalog: Catalog) -> Translation:
    """Rewrite the legacy GPU requests of one pod spec into DRA claims."""
    if not asks_extended_resources(spec):
        return _unchanged(spec, [])
    warnings: list[str] = []
    legacy: dict[tuple[str, int], tuple[Obj, list[_Legacy]]] = {}
    for field, index, container in _containers(spec):
        found = _legacy_requests(field, container, policy, warnings)
        if not found:
            continue
        if isinstance(container["resources"].get("claims"), (list, type(None))):  # null: none yet
            legacy[field, index] = container, found
        else:
            warnings.append(
                f"{field[:-1]} {container.get('name')!r}: resources.claims is not a list; "
                "container left as is"
            )
    if not legacy:
        return _unchanged(spec, warnings)

    pod_claims = spec.get("resourceClaims")
    pod_claims = [] if pod_claims is None else pod_claims  # `or []` would take false for []
    if not isinstance(pod_claims, list):
        warnings.append("spec.resourceClaims is not a list; pod left as is")
        return _unchanged(spec, warnings)
    used = [lg for _, found in legacy.values() for lg in found if lg.devices]
    missing = sorted({lg.mapping.device_class for lg in used} - catalog.classes.keys())
    if missing:
        warnings.append(
            f"DeviceClass {', '.join(missing)} does not exist; pod left as is so that it can "
            "still schedule through the device plugin"
        )
        return _unchanged(spec, warnings)
    for resource in sorted({lg.resource for lg in used}):
        if owners := catalog.serving_extended_resource(resource):
            warnings.append(
                f"DeviceClass {', '.join(owners)} also serves {resource} as an extended "
                "resource (KEP-5004): pods gpu2dra skips get DRA devices too; pick one owner"
            )

    selection = NO_SELECTION
    if used:
        kinds = sorted({lg.mapping.node_labels for lg in used})
        selection = select_devices(spec, kinds, policy.keep_node_selectors)
        if selection.invalid:
            warnings.append(f"{selection.invalid[0]} (the apiserver rejects it); pod left as is")
            return _unchanged(spec, warnings)
        warnings.extend(selection.warnings)

    def device_request(lg: _Legacy) -> DeviceRequest:
        node: tuple[str, ...] = selection.selectors.get(lg.mapping.node_labels, ())
        return DeviceRequest(
            request_name(lg.resource), lg.mapping.device_class, lg.devices, lg.selectors + node
        )

    taken = _claim_names_in_use(spec, pod_claims)
    salts: dict[str, int] = {}
    new_claims: list[_Claim] = []
    app_claims: dict[Shape, dict[int, list[_Claim]]] = {}
    claims_of: dict[tuple[str, int], list[str]] = {}
    for (field, index), (container, found) in legacy.items():
        names = claims_of.setdefault((field, index), [])
        for lg in found:
            if not lg.devices:
                continue
            req = device_request(lg)
            shape = (req.device_class, req.selectors)
            if _is_regular_init(field, container):
                # `names`: each device of the container counts once
                if (cover := _cover(req.devices, app_claims.get(shape, {}), names)) is not None:
                    names.extend(c.name for c in cover)
                    continue
                warnings.append(
                    f"initContainer {container.get('name')!r}: no app container asks for "
                    f"{req.devices} x {lg.resource}, so it gets a claim of its own and the pod "
                    "needs more devices than under the device plugin"
                )
            name = claim_name(str(container.get("name")), req.name, taken, salts)
            claim = _Claim(name, req.template())
            taken.add(claim.name)
            new_claims.append(claim)
            if field == "containers":
                app_claims.setdefault(shape, {}).setdefault(req.devices, []).append(claim)
            names.append(claim.name)
        if names and _reads_visible_devices(container):
            warnings.append(
                f"{field[:-1]} {container.get('name')!r} sets or reads NVIDIA_VISIBLE_DEVICES; "
                "under DRA it is `void` and devices come through CDI"
            )

    new_spec = dict(spec)
    touched: list[Path] = []
    for field in ("initContainers", "containers"):
        changed = [(i, c, f) for (fld, i), (c, f) in legacy.items() if fld == field]
        if not changed:
            continue
        items = list(spec[field])
        for index, container, found in changed:
            items[index] = _rewrite(container, found, claims_of[field, index])
            touched.append((field, index, "resources"))
        new_spec[field] = items
    if new_claims:
        new_spec["resourceClaims"] = [
            *pod_claims,
            *({"name": c.name, "resourceClaimTemplateName": c.template_name} for c in new_claims),
        ]
        touched.append(("resourceClaims",))
    for key, value in selection.spec_changes.items():
        if value is REMOVE:
            new_spec.pop(key, None)
        else:
            new_spec[key] = value
        touched.append((key,))
    templates = {c.template_name: c.template for c in new_claims}
    return Translation(
        new_spec, tuple(templates.values()), tuple(dict.fromkeys(warnings)), tuple(touched)
    )


def _rewrite(container: Obj, found: list[_Legacy], claims: list[str]) -> Obj:
    """The container without its legacy resources and with `claims` added."""
    gone = {lg.resource for lg in found}
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

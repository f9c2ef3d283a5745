"""The ResourceClaimTemplates gpu2dra generates, and one way to describe any template.

A template is named by its content: the same shape of request always gets the same
(immutable) template, and a new shape never collides with an old one.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from typing import Any, NamedTuple

import orjson

from app.core.kube import MANAGED_BY, RESOURCE_API_VERSION, Obj
from app.core.resources import dra_requests

TEMPLATE_PREFIX = "gpu2dra-"
# The driver that reads the opaque sharing config: NVIDIA's, the only one gpu2dra configures.
CONFIG_DRIVER = "gpu.nvidia.com"
CONFIG_API_VERSION = "resource.nvidia.com/v1beta1"


class Owned(NamedTuple):
    """A template as gpu2dra writes it, and the digest its live copy must have to be used:
    the digest of the spec, computed by gpu2dra from the object, never read from it."""

    name: str
    digest: str
    template: Obj


def owned(template: Obj) -> Owned:
    return Owned(template["metadata"]["name"], spec_digest(template.get("spec")), template)


def spec_digest(spec: Any) -> str:
    """The full SHA-256 of a template's `spec`, canonical JSON: equal exactly when the specs
    are (orjson tells 1 from 1.0 and from true, which == does not). The API server writes
    the claims' empty ObjectMeta as `metadata: {}`, which gpu2dra leaves out: the same."""
    if isinstance(spec, dict) and spec.get("metadata") == {}:
        spec = {k: v for k, v in spec.items() if k != "metadata"}
    return hashlib.sha256(orjson.dumps(spec, option=orjson.OPT_SORT_KEYS)).hexdigest()


def is_managed(obj: Any) -> bool:
    """The object carries gpu2dra's managed-by label."""
    metadata = obj.get("metadata") if isinstance(obj, dict) else None
    labels = metadata.get("labels") if isinstance(metadata, dict) else None
    key, value = next(iter(MANAGED_BY.items()))
    return isinstance(labels, dict) and labels.get(key) == value


def live_digest(obj: Obj) -> str | None:
    """What a live template holds, as `Owned.digest` says it: None when it lacks gpu2dra's
    managed-by label, which no template of gpu2dra's lacks, whatever its spec."""
    return spec_digest(obj.get("spec")) if is_managed(obj) else None


def written_as_named(obj: Any) -> bool:
    """`obj` is a template exactly as gpu2dra writes one under its name: gpu2dra's label and
    a name, `gpu2dra-<request>-x<count>-<hash>`, that its one request and the hash of its
    claim spec give; other labels and annotations aside (kubectl, Argo CD and Flux add
    theirs). Such a template is what `gpu2dra translate` prints, whoever applies it."""
    metadata = obj.get("metadata") if isinstance(obj, dict) else None
    name = metadata.get("name") if isinstance(metadata, dict) else None
    spec = obj.get("spec") if isinstance(obj, dict) else None
    if not is_reserved_name(name) or not is_managed(obj) or not isinstance(spec, dict):
        return False
    if set(spec) - {"spec", "metadata"} or spec.get("metadata", {}) != {}:
        return False
    claim = spec.get("spec")
    devices = claim.get("devices") if isinstance(claim, dict) else None
    requests = devices.get("requests") if isinstance(devices, dict) else None
    if not isinstance(requests, list) or len(requests) != 1 or not isinstance(requests[0], dict):
        return False
    exactly = requests[0].get("exactly")
    count = exactly.get("count") if isinstance(exactly, dict) else None
    if not isinstance(requests[0].get("name"), str) or count.__class__ is not int:
        return False
    try:
        digest = hashlib.sha256(orjson.dumps(claim, option=orjson.OPT_SORT_KEYS)).hexdigest()
    except orjson.JSONEncodeError:
        return False
    return bool(name == f"{TEMPLATE_PREFIX}{requests[0]['name']}-x{count}-{digest[:10]}")


def is_reserved_name(name: Any) -> bool:
    return isinstance(name, str) and name.startswith(TEMPLATE_PREFIX)


class DeviceRequest(NamedTuple):
    """One `exactly` request: the only shape every 1.34+ cluster (and Kueue) understands."""

    name: str
    device_class: str
    devices: int  # the request's `count`
    selectors: tuple[str, ...]
    # The driver's opaque parameters for this request (canonical JSON), "" for none: a
    # hashable string, so that requests stay cache keys.
    config: str = ""
    # What each device gives of a capacity several claims share (KEP-5075), name -> quantity.
    capacity: tuple[tuple[str, str], ...] = ()

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
    if req.capacity:
        exactly["capacity"] = {"requests": dict(req.capacity)}
    devices: Obj = {"requests": [{"name": req.name, "exactly": exactly}]}
    if req.config:
        devices["config"] = [
            {
                "requests": [req.name],
                "opaque": {"driver": CONFIG_DRIVER, "parameters": json.loads(req.config)},
            }
        ]
    spec = {"devices": devices}
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


def sharing_config(kind: str, sharing: str) -> str:
    """The opaque parameters that give a request's devices the sharing of the policy's
    `sharing` (GpuSharing JSON): `GpuConfig` for whole GPUs, `MigDeviceConfig` for MIG
    devices, whose sharing has no time-slice interval."""
    parsed = json.loads(sharing)
    if kind == "MigDeviceConfig":
        parsed.pop("timeSlicingConfig", None)
    params = {"apiVersion": CONFIG_API_VERSION, "kind": kind, "sharing": parsed}
    return json.dumps(params, sort_keys=True)


def _strategies(claim_spec: Obj) -> dict[str, str]:
    """request name -> the sharing strategy the driver's opaque config gives it."""
    devices = claim_spec.get("devices")
    configs = devices.get("config") if isinstance(devices, dict) else None
    found = {}
    for entry in configs if isinstance(configs, list) else ():
        opaque = entry.get("opaque") if isinstance(entry, dict) else None
        params = opaque.get("parameters") if isinstance(opaque, dict) else None
        sharing = params.get("sharing") if isinstance(params, dict) else None
        if isinstance(sharing, dict) and isinstance(sharing.get("strategy"), str):
            for name in entry.get("requests") or ():
                found[str(name)] = sharing["strategy"]
    return found


def describe_template(template: Any) -> str:
    """`2 x gpu.nvidia.com where <CEL>`, a request after another: what a template asks for."""
    spec = template.get("spec") if isinstance(template, dict) else None
    claim_spec = spec.get("spec") if isinstance(spec, dict) else None
    requests = dra_requests(claim_spec)
    shared = _strategies(claim_spec) if isinstance(claim_spec, dict) else {}
    taken = _capacities(claim_spec) if isinstance(claim_spec, dict) else {}
    return "; ".join(
        f"{r.devices or 'all'} x {r.device_class}"
        + (f" where {' && '.join(r.selectors)}" if r.selectors else "")
        + (f", shared by {shared[r.name]}" if r.name in shared else "")
        + (f", taking {taken[r.name]} of each" if r.name in taken else "")
        for r in requests
    )


def _capacities(claim_spec: Obj) -> dict[str, str]:
    """request name -> the consumable capacity its `exactly` takes of each device."""
    devices = claim_spec.get("devices")
    requests = devices.get("requests") if isinstance(devices, dict) else None
    found = {}
    for req in requests if isinstance(requests, list) else ():
        exactly = req.get("exactly") if isinstance(req, dict) else None
        capacity = exactly.get("capacity") if isinstance(exactly, dict) else None
        amounts = capacity.get("requests") if isinstance(capacity, dict) else None
        if isinstance(amounts, dict) and amounts:
            found[str(req.get("name"))] = ", ".join(f"{k} {v}" for k, v in amounts.items())
    return found

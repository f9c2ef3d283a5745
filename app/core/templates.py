"""The ResourceClaimTemplates gpu2dra generates, and one way to describe any template.

A template is named by its content: the same shape of request always gets the same
(immutable) template, and a new shape never collides with an old one.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from typing import Any, NamedTuple

import orjson

from app.core.kube import RESOURCE_API_VERSION, Obj
from app.core.resources import dra_requests

MANAGED_BY = {"app.kubernetes.io/managed-by": "gpu2dra"}
TEMPLATE_PREFIX = "gpu2dra-"


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


def describe_template(template: Any) -> str:
    """`2 x gpu.nvidia.com where <CEL>`, a request after another: what a template asks for."""
    spec = template.get("spec") if isinstance(template, dict) else None
    requests = dra_requests(spec.get("spec") if isinstance(spec, dict) else None)
    return "; ".join(
        f"{r.devices or 'all'} x {r.device_class}"
        + (f" where {' && '.join(r.selectors)}" if r.selectors else "")
        for r in requests
    )

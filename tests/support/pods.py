"""Builders for the pods the tests translate."""

from __future__ import annotations

from typing import Any

from app.core.templates import DeviceRequest

Obj = dict[str, Any]

GPU = "gpu.nvidia.com"
MIG = "mig.nvidia.com"
PRODUCT_A100 = (
    "device.attributes['gpu.nvidia.com'].productName.replace(' ', '-') == 'NVIDIA-A100-SXM4-40GB'"
)


def container(
    name: str, limits: Obj | None = None, requests: Obj | None = None, **extra: Any
) -> Obj:
    resources: Obj = {}
    if limits is not None:
        resources["limits"] = limits
    if requests is not None:
        resources["requests"] = requests
    out: Obj = {"name": name, "image": "cuda:12"}
    if resources:
        out["resources"] = resources
    return {**out, **extra}


def gpu(n: Any) -> Obj:
    return {"nvidia.com/gpu": n}


def tpl(name: str, cls: str, count: int, *selectors: str, config: str = "") -> str:
    return DeviceRequest(name, cls, count, tuple(selectors), config).template_name


def claimed(name: str, *claims: str, limits: Obj | None = None, **extra: Any) -> Obj:
    resources: Obj = {"claims": [{"name": c} for c in claims]}
    if limits:
        resources = {"limits": limits, **resources}
    return {"name": name, "image": "cuda:12", "resources": resources, **extra}


def pod_claim(name: str, template: str) -> Obj:
    return {"name": name, "resourceClaimTemplateName": template}

"""What the tests of DRA selectors share: devices as the NVIDIA DRA driver publishes them (read
back as the scheduler's CEL sees them), the selectors gpu2dra generates for a pod, and the
devices those pick."""

from __future__ import annotations

from typing import Any

from app.core.catalog import Catalog
from app.core.policy import load_policy, parse_policy
from app.core.translate import translate
from app.readers.cel.devices import Device, devices_of, select
from tests.support.cluster import (
    A100_SXM4_40GB,
    A100_SXM4_80GB,
    H100_80GB_HBM3,
    gpu_devices,
    gpu_resource_slice,
)

Obj = dict[str, Any]


def node_devices(name: str, **kwargs: Any) -> list[Device]:
    return devices_of([gpu_resource_slice(name, gpu_devices(name, **kwargs))])


A100 = node_devices("a100", product=A100_SXM4_40GB, gpus=1)[0]
A100_80 = node_devices("a100-80", product=A100_SXM4_80GB, gpus=1)[0]
H100 = node_devices("h100", product=H100_80GB_HBM3, gpus=1)[0]
MIG = node_devices("mig", product=A100_SXM4_40GB, gpus=1, mig={0: ["1g.5gb", "3g.20gb"]})


def generated(limits: Obj, policy: Obj | None = None, **spec: Any) -> list[str]:
    pod = {"containers": [{"name": "c", "resources": {"limits": limits}}], **spec}
    translation = translate(
        pod,
        load_policy(None) if policy is None else parse_policy(policy),
        Catalog.of(["gpu.nvidia.com", "mig.nvidia.com"]),
    )
    (template,) = translation.templates
    exactly = template["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    return [s["cel"]["expression"] for s in exactly.get("selectors", [])]


def chosen(selectors: list[str], devices: list[Device]) -> list[Device]:
    picked = select(devices, selectors)
    assert picked.errors == ()
    return list(picked.selected)

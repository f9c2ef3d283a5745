"""Pods too big or too deep for a careless webhook, made in code so that the corpus stays small."""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]


def gpu(name: Any, n: Any = 1, **extra: Any) -> Obj:
    return {"name": name, "image": "x", "resources": {"limits": {"nvidia.com/gpu": n}}, **extra}


def deep(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


BIG_PODS: dict[str, Obj] = {
    "10,000 containers": {"containers": [gpu(f"c{i}") for i in range(10_000)]},
    "10,000 containers of one name": {"containers": [gpu("a") for _ in range(10_000)]},
    "10,000 containers without a name": {"containers": [gpu(None) for _ in range(10_000)]},
    "5,000 app and 5,000 init containers": {
        "containers": [gpu(f"c{i}") for i in range(5_000)],
        "initContainers": [gpu(f"i{i}", 2) for i in range(5_000)],
    },
    "10,000 existing claims named as ours": {
        "containers": [gpu("a")],
        "resourceClaims": [{"name": "a-gpu", "resourceClaimName": "x"}]
        + [{"name": f"a-gpu-{i:06x}", "resourceClaimName": "x"} for i in range(10_000)],
    },
    "a 1 MB container name": {"containers": [gpu("é" * 500_000)]},
    "a 1 MB count": {"containers": [gpu("a", "9" * 1_000_000)]},
    "a 1 MB GFD label value": {
        "containers": [gpu("a")],
        "nodeSelector": {"nvidia.com/gpu.product": "A" * 1_000_000},
    },
    "10,000 GFD affinity values": {
        "containers": [gpu("a")],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {
                                    "key": "nvidia.com/gpu.product",
                                    "operator": "In",
                                    "values": [f"NVIDIA-{i}" for i in range(10_000)],
                                }
                            ]
                        }
                    ]
                }
            }
        },
    },
    # Echoed in the patch, which orjson writes only 254 levels deep.
    "250 levels deep in a translated container": {
        "containers": [{**gpu("a"), "resources": {"limits": {"nvidia.com/gpu": 1}, "x": deep(250)}}]
    },
}

"""Plain dict ResourceSlices of partitionable devices (KEP-4815) for unit tests: two 1g MIG
placements and a 2g one that overlaps both, on one counter set of memory slices."""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]
DRIVER = "gpu.nvidia.com"
CLASS = {
    "metadata": {"name": "mig.nvidia.com"},
    "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}]},
}


def placement(name: str, slices: range, profile: str) -> Obj:
    return {
        "name": name,
        "attributes": {"profile": {"string": profile}},
        "consumesCounters": [
            {
                "counterSet": "gpu-0-counter-set",
                "counters": {f"memory-slice-{i}": {"value": "1"} for i in slices},
            }
        ],
    }


def mig_slices(pool: str = "node-a") -> list[Obj]:
    """The counter set in one slice of the pool, the placements in another, as the driver
    publishes them."""
    common = {"driver": DRIVER, "pool": {"name": pool, "generation": 1}, "nodeName": pool}
    counters = {f"memory-slice-{i}": {"value": "1"} for i in range(2)}
    return [
        {
            "spec": {
                **common,
                "sharedCounters": [{"name": "gpu-0-counter-set", "counters": counters}],
            }
        },
        {
            "spec": {
                **common,
                "devices": [
                    placement("gpu-0-mig-1g-0", range(1), "1g"),
                    placement("gpu-0-mig-1g-1", range(1, 2), "1g"),
                    placement("gpu-0-mig-2g-0", range(2), "2g"),
                ],
            }
        },
    ]


def claim(device: str, pool: str = "node-a") -> Obj:
    result = {"driver": DRIVER, "pool": pool, "device": device, "request": "gpu"}
    return {
        "metadata": {"namespace": "ns", "name": "x"},
        "status": {"allocation": {"devices": {"results": [result]}}},
    }

"""The DRA requests read from a claim's spec: v1 (exactly, firstAvailable) and v1beta1."""

from __future__ import annotations

from typing import Any

from app.core.resources import DraRequest, dra_requests

CLAIM_SPEC: dict[str, Any] = {
    "devices": {
        "requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}},
            {
                "name": "any",
                "firstAvailable": [
                    {"name": "big", "deviceClassName": "gpu.nvidia.com"},
                    {"name": "small", "deviceClassName": "nope.example.com"},
                ],
            },
        ]
    }
}


def test_dra_requests_reads_v1_and_v1beta1() -> None:
    found = dra_requests(CLAIM_SPEC)
    assert [(r.name, r.device_class) for r in found] == [
        ("gpu", "gpu.nvidia.com"),
        ("any/big", "gpu.nvidia.com"),
        ("any/small", "nope.example.com"),
    ]
    beta = {"devices": {"requests": [{"name": "gpu", "deviceClassName": "x", "count": 2}]}}
    assert dra_requests(beta) == [DraRequest("gpu", "x", 2, ())]
    assert dra_requests({"devices": {"requests": "bad"}}) == []

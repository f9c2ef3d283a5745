"""explain on partitionable devices (KEP-4815), plain dict slices: a placement whose shared
counters another claim's placement takes matches, but is not free."""

from __future__ import annotations

from app.core.resources import DraRequest
from app.diagnose.explain.allocation import allocated_to, analyse_request
from app.readers.cel.devices import devices_of
from tests.support.counters import CLASS, claim, mig_slices

CLASSES = {"mig.nvidia.com": CLASS}
TWO_G = "device.attributes['gpu.nvidia.com'].profile == '2g'"


def test_a_placement_whose_counters_are_spent_is_not_free() -> None:
    step = analyse_request(
        DraRequest("gpu", "mig.nvidia.com", 1, (TWO_G,)),
        claim="ns/whole",
        classes=CLASSES,
        devices=devices_of(mig_slices()),
        owners=allocated_to([claim("gpu-0-mig-1g-0")]),
    )
    assert step.state == "FAIL"
    assert "is enough" not in step.text
    assert "shared counters they consume are taken by other devices" in step.text, step.text
    assert (
        "node-a/gpu-0-mig-2g-0: matches, but its counters are spent: "
        "memory-slice-0 taken by claim ns/x"
    ) in step.details


def test_the_claims_own_allocation_does_not_spend_its_counters() -> None:
    step = analyse_request(
        DraRequest("gpu", "mig.nvidia.com", 1, (TWO_G,)),
        claim="ns/x",
        classes=CLASSES,
        devices=devices_of(mig_slices()),
        owners=allocated_to([claim("gpu-0-mig-1g-0")]),
    )
    assert step.state == "info", step.text
    assert "node-a/gpu-0-mig-2g-0: matches and is free" in step.details

"""GFD node labels as CEL (app/core/nvidia/gfd_cel.py): the selectors gpu2dra generates from a
pod's node terms pick, evaluated as the scheduler evaluates them, the devices the label picked
nodes by."""

from __future__ import annotations

import pytest

from app.core.quantity import parse_quantity
from app.readers.cel.devices import Device, class_selectors
from tests.support.cluster import A100_SXM4_40GB, device_class
from tests.unit.selectors import A100, A100_80, H100, MIG, chosen, generated, node_devices

TIME_SLICING = {
    "mappings": {"nvidia.com/gpu": {"deviceClassName": "gpu.nvidia.com", "sharing": "TimeSlicing"}}
}


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        ({"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"}, [A100]),
        ({"nvidia.com/gpu.family": "hopper"}, [H100]),
        ({"nvidia.com/gpu.family": "ampere"}, [A100, A100_80]),
        ({"nvidia.com/gpu.memory": "40960"}, [A100]),  # GFD: MiB, rounded down
        # The driver's mock H100 has an A100 80GB's memory; a real H100 80GB HBM3 has 81559 MiB.
        ({"nvidia.com/gpu.memory": "81920"}, [A100_80, H100]),
        ({"nvidia.com/gpu.memory": "81559"}, []),
        ({"nvidia.com/gpu.memory": "40959"}, []),
        ({"nvidia.com/gpu.compute.major": "9"}, [H100]),
        (
            {"nvidia.com/gpu.compute.major": "8", "nvidia.com/gpu.compute.minor": "0"},
            [A100, A100_80],
        ),
        ({"nvidia.com/cuda.driver-version.full": "580.82.07"}, [A100, A100_80, H100]),
        ({"nvidia.com/cuda.driver-version.full": "550.107.02"}, []),
        ({"nvidia.com/cuda.driver-version.major": "580"}, [A100, A100_80, H100]),
        ({"nvidia.com/cuda.driver.rev": "7"}, [A100, A100_80, H100]),
        ({"nvidia.com/cuda.runtime-version.full": "13.0"}, [A100, A100_80, H100]),
        ({"nvidia.com/cuda.runtime-version.minor": "1"}, []),
    ],
)
def test_generated_node_selectors_pick_the_same_gpus(
    labels: dict[str, str], expected: list[Device]
) -> None:
    selectors = generated({"nvidia.com/gpu": 1}, nodeSelector=labels)
    assert selectors
    assert chosen(selectors, [A100, A100_80, H100]) == expected


def test_shared_product_picks_the_model_under_a_sharing_policy() -> None:
    labels = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-SHARED"}
    selectors = generated({"nvidia.com/gpu": 1}, TIME_SLICING, nodeSelector=labels)
    assert chosen(selectors, [A100, A100_80, H100]) == [H100]


def test_a_device_without_memory_is_passed_over_not_an_error() -> None:
    (bare,) = node_devices("bare", product=A100_SXM4_40GB, gpus=1, memory=False)
    selectors = generated({"nvidia.com/gpu": 1}, nodeSelector={"nvidia.com/gpu.memory": "40960"})
    assert chosen(selectors, [bare, A100]) == [A100]
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "nvidia.com/gpu.memory", "operator": "Gt", "values": ["50000"]}
                        ]
                    }
                ]
            }
        }
    }
    selectors = generated({"nvidia.com/gpu": 1}, affinity=affinity)
    assert chosen(selectors, [bare, A100, A100_80]) == [A100_80]


def _mib(device: Device) -> int:
    return int(parse_quantity(device.capacity["memory"]["value"]).value) // 2**20


def test_mig_single_strategy_picks_the_mig_device() -> None:
    """GFD labels a single-strategy node's gpu.memory with the MIG device's NVML
    MemorySizeMB (k8s-device-plugin internal/resource/nvml-mig-device.go GetAttributes):
    19968 for an A100-40GB's 3g.20gb, which the driver publishes as the GPU-instance
    profile's MemorySizeMB in Mi (cmd/gpu-kubelet-plugin/mig.go)."""
    assert _mib(MIG[1]) == 19968, MIG[1].capacity
    mig_class = class_selectors(device_class("mig.nvidia.com"))
    selectors = generated(
        {"nvidia.com/gpu": 1},
        nodeSelector={
            "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-3g.20gb",
            "nvidia.com/gpu.memory": "19968",
        },
    )
    picked = chosen([*mig_class, *selectors], [A100, *MIG])
    assert [d.name for d in picked] == ["gpu-0-mig-3g20gb-9-4"]


def test_generated_affinity_in_and_not_in() -> None:
    term = {
        "matchExpressions": [
            {"key": "nvidia.com/gpu.family", "operator": "In", "values": ["ampere", "hopper"]},
            {
                "key": "nvidia.com/gpu.product",
                "operator": "NotIn",
                "values": ["NVIDIA-H100-80GB-HBM3"],
            },
        ]
    }
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
        }
    }
    selectors = generated({"nvidia.com/gpu": 1}, affinity=affinity)
    assert len(selectors) == 2
    assert chosen(selectors, [A100, A100_80, H100]) == [A100, A100_80]


@pytest.mark.parametrize(
    ("resource", "device"),
    [
        ("nvidia.com/mig-1g.5gb", "gpu-0-mig-1g5gb-19-0"),
        ("nvidia.com/mig-3g.20gb", "gpu-0-mig-3g20gb-9-4"),
    ],
)
def test_generated_mig_profile_selector(resource: str, device: str) -> None:
    mig_class = class_selectors(device_class("mig.nvidia.com", "mig"))
    selectors = generated(
        {resource: 1}, nodeSelector={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"}
    )
    picked = chosen([*mig_class, *selectors], [A100, *MIG])
    assert [d.name for d in picked] == [device]

"""The suite's devices are NVIDIA's DRA driver's (tests/support/cluster.py gpu_devices): the
golden files tests/e2e/test_driver_inventory.py checks against the driver's own code, with
only the UUIDs made the node's own."""

from __future__ import annotations

import dataclasses
import json

import pytest

from tests.support.cluster import (
    A100_SXM4_40GB,
    A100_SXM4_80GB,
    H100_80GB_HBM3,
    H200_141GB,
    GpuProduct,
    driver_layout,
    driver_layouts,
    golden,
    gpu_devices,
    quantity_bytes,
)

PRODUCTS = [A100_SXM4_40GB, A100_SXM4_80GB, H100_80GB_HBM3, H200_141GB]
MACHINE = {"uuid", "parentUUID"}


def without_uuids(devices: list[dict[str, object]]) -> str:
    out = json.loads(json.dumps(devices))
    for device in out:
        for name in MACHINE:
            device["attributes"].pop(name, None)
    return json.dumps(out, sort_keys=True)


@pytest.mark.parametrize("product", PRODUCTS, ids=lambda p: p.inventory)
def test_the_products_are_what_the_driver_publishes(product: GpuProduct) -> None:
    (device,) = gpu_devices("n", product, gpus=1)
    attributes = {name: next(iter(v.values())) for name, v in device["attributes"].items()}
    assert attributes["productName"] == product.name
    assert attributes["architecture"] == product.architecture
    assert attributes["cudaComputeCapability"] == product.compute_capability
    assert attributes["brand"] == product.brand
    assert quantity_bytes(device["capacity"]["memory"]["value"]) == product.memory_mib * 2**20


@pytest.mark.parametrize(
    ("product", "gpus", "mig", "layout"),
    [
        (A100_SXM4_40GB, 1, {}, "a100-x8"),
        (A100_SXM4_40GB, 8, {}, "a100-x8"),
        (H100_80GB_HBM3, 1, {}, "h100-x1"),
        (H100_80GB_HBM3, 4, {}, "dgx-h100"),  # its MIG GPU is the eighth
        (A100_SXM4_40GB, 2, {1: ["3g.20gb"]}, "a100-x2-mig1-3g20gb"),
        (
            A100_SXM4_40GB,
            2,
            {0: ["3g.20gb", "2g.10gb", "1g.5gb"], 1: ["1g.10gb", "1g.10gb"]},
            "dgx-a100",
        ),
    ],
)
def test_a_layout_is_the_golden_file_with_as_many_gpus(
    product: GpuProduct, gpus: int, mig: dict[int, list[str]], layout: str
) -> None:
    assert driver_layout(product, gpus, mig) == layout
    devices = gpu_devices("n", product, gpus, mig)
    expected = [d for d in golden(layout) if int(d["name"].split("-")[1]) < gpus]
    assert without_uuids(devices) == without_uuids(expected)


def test_every_static_layout_is_found_from_its_own_arguments() -> None:
    products = {p.inventory: p for p in PRODUCTS}
    for name, args in driver_layouts().items():
        if "--dynamic-mig" in args:
            continue
        flags = dict(arg.split("=", 1) for arg in args if not arg.startswith("--mig="))
        mig = {
            int(index): [p for p in profiles.split(",") if p]
            for index, profiles in (
                a.removeprefix("--mig=").split("=", 1) for a in args if a.startswith("--mig=")
            )
        }
        consumable = flags.get("--consumable-shares")
        product, gpus = products[flags["--product"]], int(flags["--gpus"])
        found = driver_layout(product, gpus, mig, consumable)
        assert golden(found) == golden(name), (name, found)


def test_mig_devices_are_the_drivers_own() -> None:
    devices = {d["name"]: d for d in gpu_devices("n", gpus=2, mig={1: ["1g.5gb", "3g.20gb"]})}
    assert sorted(devices) == ["gpu-0", "gpu-1-mig-1g5gb-19-0", "gpu-1-mig-3g20gb-9-4"]
    three = devices["gpu-1-mig-3g20gb-9-4"]["capacity"]
    # NVML's MemorySizeMB, not the nominal size: what a MIG memory selector compares.
    assert three["memory"] == {"value": "19968Mi"}
    assert three["multiprocessors"] == {"value": "42"}
    assert [name for name in three if name.startswith("memorySlice")] == [
        f"memorySlice{i}" for i in range(4, 8)
    ]
    assert devices["gpu-0"]["capacity"] == {"memory": {"value": "40Gi"}}


def test_uuids_are_the_nodes_own() -> None:
    a = gpu_devices("a", gpus=2, mig={1: ["3g.20gb"]})
    b = gpu_devices("b", gpus=2, mig={1: ["3g.20gb"]})
    uuids = [d["attributes"]["uuid"]["string"] for d in a + b]
    assert len(set(uuids)) == len(uuids) == 4
    assert uuids[0].startswith("GPU-") and uuids[1].startswith("MIG-")
    assert a[1]["attributes"]["parentUUID"] != b[1]["attributes"]["parentUUID"]
    assert gpu_devices("a", gpus=2, mig={1: ["3g.20gb"]}) == a


def test_a_renamed_product_publishes_its_inventory_products_devices() -> None:
    renamed = dataclasses.replace(A100_SXM4_80GB, name="NVIDIA E2E-1")
    (device,) = gpu_devices("n", renamed)
    assert device["attributes"]["productName"] == {"string": "NVIDIA E2E-1"}
    assert device["capacity"] == {"memory": {"value": "80Gi"}}


def test_a_layout_without_golden_devices_says_how_to_add_it() -> None:
    with pytest.raises(ValueError, match=r"--mig=0=2g\.10gb.*layouts\.json"):
        gpu_devices("n", gpus=1, mig={0: ["2g.10gb"]})


def test_no_memory_leaves_it_out_of_whole_gpus() -> None:
    (device,) = gpu_devices("n", memory=False)
    assert device["capacity"] == {}


def test_consumable_shares_are_the_drivers_own() -> None:
    (device,) = gpu_devices("n", consumable="4")
    assert device["allowMultipleAllocations"] is True
    assert device["capacity"]["memory"] == {
        "value": "40Gi",
        "requestPolicy": {
            "default": "0",
            "validRange": {"min": "0", "max": "40Gi", "step": "1Mi"},
        },
    }
    assert device["capacity"]["shares"]["value"] == "4"
    assert device["attributes"]["uuid"] == gpu_devices("n")[0]["attributes"]["uuid"]
    with pytest.raises(ValueError, match=r"--consumable-shares=8.*layouts\.json"):
        gpu_devices("n", consumable="8")
    assert quantity_bytes("40Gi") == 40 * 2**30
    assert quantity_bytes("4864Mi") == 4864 * 2**20
    with pytest.raises(ValueError, match="whole number"):
        quantity_bytes("1m")

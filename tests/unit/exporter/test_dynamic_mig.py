"""The exporter on NVIDIA's DynamicMIG devices (tests/driver/golden/h200-x1-dynamic-mig-slices.json,
as tests/support/cluster.py dynamic_mig_slices publishes them): a MIG placement has a
`parentUUID` and a profile but no `uuid` of its own (the driver makes the MIG device when it
prepares the claim), so its row carries the GPU's UUID and the profile, and `mig_uuid` empty;
the slice that holds only the shared counters has no devices."""

from __future__ import annotations

from app.exporter.gpuinfo import Identity, device_index, slice_devices
from tests.support.cluster import dynamic_mig_slices

DRIVER = "gpu.nvidia.com"


def test_dynamic_mig_devices_are_their_gpus_with_a_profile() -> None:
    counters, devices = dynamic_mig_slices("node-a")
    assert slice_devices(counters).devices == {}
    index = device_index([slice_devices(counters), slice_devices(devices)])
    gpu = devices["spec"]["devices"][0]["attributes"]["uuid"]["string"]
    assert index[DRIVER, "node-a", "gpu-0"] == Identity(gpu, "", "")
    assert index[DRIVER, "node-a", "gpu-0-mig-1g18gb-19-3"] == Identity(gpu, "", "1g.18gb")
    assert index[DRIVER, "node-a", "gpu-0-mig-7g141gb-0-0"] == Identity(gpu, "", "7g.141gb")
    assert len(index) == 26
    assert all(identity.uuid == gpu for identity in index.values())

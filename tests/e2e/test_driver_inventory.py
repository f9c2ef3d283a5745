"""The devices NVIDIA's DRA driver publishes, built by its own code: tests/driver/build.sh
builds the driver's kubelet-plugin package (sigs.k8s.io/dra-driver-nvidia-gpu at the version
tests/driver/go.mod pins) with an inventory main and a mocked NVML, into
<bin>/driver/inventory. Each layout below is run and compared, field by field, with its golden
file in tests/driver/golden/, so a new driver release, go-nvml mock or fix shows here as a
list of the fields that changed.

    GPU2DRA_REGENERATE_GOLDEN=1 .venv/bin/python -m pytest tests/e2e/test_driver_inventory.py

rewrites the golden files from the built tool (then review the diff).

tests/driver/real/ holds what the same inventory printed on real GPUs (tests/driver/on-gpu.sh);
the mock of each such product is compared with it, field by field, but for the fields that
belong to the machine (UUIDs, PCI addresses, driver versions)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.controlplane import REPO_ROOT, find_bin_dir
from tests.support.tools import missing

BUILD_HINT = "tests/driver/build.sh"
GOLDEN = REPO_ROOT / "tests" / "driver" / "golden"
REGENERATE = os.environ.get("GPU2DRA_REGENERATE_GOLDEN") == "1"

# Golden file name -> the inventory's arguments, in tests/driver/layouts.json: the layouts the
# suite's devices come from (tests/support/cluster.py gpu_devices) and a few more. The static
# layouts are the driver's default (a MIG-enabled GPU publishes the MIG devices that exist,
# not itself); --dynamic-mig is its DynamicMIG gate (every possible placement, counters in the
# slices).
LAYOUTS: dict[str, list[str]] = json.loads(
    (REPO_ROOT / "tests" / "driver" / "layouts.json").read_text()
)


@pytest.fixture(scope="module")
def inventory() -> Path:
    """The built tool; fails where Go could build it (always in CI), skips elsewhere."""
    path = find_bin_dir() / "driver" / "inventory"
    if not os.access(path, os.X_OK):
        where = f"driver/inventory missing in {find_bin_dir()}"
        if shutil.which("go") is not None:
            pytest.fail(f"{where}: run `bash {BUILD_HINT}`", pytrace=False)
        missing(f"Go is not installed to build the driver's inventory: {where}")
    return path


def run(inventory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(inventory), *args], capture_output=True, text=True, timeout=60, check=False
    )


def differences(golden: Any, actual: Any, where: str = "") -> Iterator[str]:
    """Each field where actual differs from golden, as 'path: golden X, driver Y'; lists of
    named objects (devices, counter sets) are matched by name."""
    if isinstance(golden, dict) and isinstance(actual, dict):
        for key in sorted(golden.keys() | actual.keys()):
            path = f"{where}.{key}" if where else key
            if key not in actual:
                yield f"{path}: golden {json.dumps(golden[key])}, driver has none"
            elif key not in golden:
                yield f"{path}: golden has none, driver {json.dumps(actual[key])}"
            else:
                yield from differences(golden[key], actual[key], path)
    elif isinstance(golden, list) and isinstance(actual, list):
        if all(isinstance(item, dict) and "name" in item for item in golden + actual):
            yield from differences(
                {item["name"]: item for item in golden},
                {item["name"]: item for item in actual},
                where,
            )
            order = [item["name"] for item in actual]
            if order != [item["name"] for item in golden] and set(order) == {
                item["name"] for item in golden
            }:
                yield f"{where or '.'}: same names in another order: {order}"
        elif len(golden) != len(actual):
            yield f"{where}: golden {len(golden)} items, driver {len(actual)}"
        else:
            for i, (g, a) in enumerate(zip(golden, actual, strict=True)):
                yield from differences(g, a, f"{where}[{i}]")
    elif golden != actual:
        yield f"{where}: golden {json.dumps(golden)}, driver {json.dumps(actual)}"


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_driver_publishes_the_golden_devices(inventory: Path, layout: str) -> None:
    result = run(inventory, *LAYOUTS[layout])
    assert result.returncode == 0, result.stderr
    actual = json.loads(result.stdout)
    golden_file = GOLDEN / f"{layout}.json"
    if REGENERATE:
        golden_file.parent.mkdir(parents=True, exist_ok=True)
        golden_file.write_text(json.dumps(actual, indent=2) + "\n")
    assert golden_file.exists(), f"no {golden_file}: run with GPU2DRA_REGENERATE_GOLDEN=1"
    found = list(differences(json.loads(golden_file.read_text()), actual))
    assert not found, f"{layout}: the driver's devices differ from {golden_file.name}:\n" + (
        "\n".join(found)
    )


def test_dumps_are_deterministic(inventory: Path) -> None:
    first, second = (run(inventory, *LAYOUTS["dgx-a100"]).stdout for _ in range(2))
    assert first == second


def test_a_mig_layout_that_does_not_fit_is_refused(inventory: Path) -> None:
    result = run(inventory, "--product=A100-SXM4-40GB", "--mig=0=3g.20gb,3g.20gb,3g.20gb")
    assert result.returncode == 1
    assert result.stderr.strip() == "inventory: GPU 0: no free placement left for 3g.20gb"


def test_an_unknown_profile_names_the_known_ones(inventory: Path) -> None:
    result = run(inventory, "--product=H100-SXM5-80GB", "--mig=0=1g.5gb")
    assert result.returncode == 1
    assert 'no MIG profile "1g.5gb" on NVIDIA H100 80GB HBM3 (it has 1g.10gb,' in result.stderr


def test_real_nvml_without_a_driver_says_what_is_missing(inventory: Path, tmp_path: Path) -> None:
    result = run(inventory, "--real", f"--driver-root={tmp_path}")
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"inventory: failed to locate driver libraries under {tmp_path}:"
        ' error locating "libnvidia-ml.so.1"'
    )


# -- The mock against a real GPU ------------------------------------------------------------------

REAL = REPO_ROOT / "tests" / "driver" / "real"

# The attributes that belong to the machine the real dump ran on, not to its product: the
# GPU's UUID (and its MIG devices' parentUUID), where it sits on the PCI bus (the mock puts
# GPUs at a DGX's bus IDs; pcieRoot and, since v0.5.0, numaNode are read from the machine's
# sysfs, which a mock cannot give), and the driver's and CUDA's versions.
MACHINE_ATTRIBUTES = frozenset(
    {
        "uuid",
        "parentUUID",
        "resource.kubernetes.io/pciBusID",
        "resource.kubernetes.io/pcieRoot",
        "resource.kubernetes.io/numaNode",
        "driverVersion",
        "cudaDriverVersion",
    }
)

# Real GPU -> the inventory's arguments for its mock, and the dumps on-gpu.sh wrote.
REAL_GPUS: dict[str, list[str]] = {"h200": ["--product=H200-SXM5-141GB", "--gpus=1"]}
REAL_DUMPS: dict[str, list[str]] = {
    "devices": [],
    "devices-dynamic-mig": ["--dynamic-mig"],
    "slices-dynamic-mig": ["--dynamic-mig", "--slices"],
}


def without_machine(value: Any) -> Any:
    """value with MACHINE_ATTRIBUTES left out of every device's attributes."""
    if isinstance(value, list):
        return [without_machine(item) for item in value]
    if not isinstance(value, dict):
        return value
    out = {key: without_machine(item) for key, item in value.items()}
    if isinstance(value.get("attributes"), dict):
        out["attributes"] = {
            name: attribute
            for name, attribute in value["attributes"].items()
            if name not in MACHINE_ATTRIBUTES
        }
    return out


def test_without_machine_leaves_out_exactly_the_machine_attributes() -> None:
    device = {
        "name": "gpu-0",
        "attributes": {name: {"string": "x"} for name in [*MACHINE_ATTRIBUTES, "productName"]},
        "capacity": {"memory": {"value": "16Gi"}},
    }
    assert without_machine([{"devices": [device]}]) == [
        {
            "devices": [
                {
                    "name": "gpu-0",
                    "attributes": {"productName": {"string": "x"}},
                    "capacity": {"memory": {"value": "16Gi"}},
                }
            ]
        }
    ]


@pytest.mark.parametrize(
    ("gpu", "dump"), [(gpu, dump) for gpu in sorted(REAL_GPUS) for dump in sorted(REAL_DUMPS)]
)
def test_the_mock_publishes_what_the_real_gpu_does(inventory: Path, gpu: str, dump: str) -> None:
    real_file = REAL / gpu / f"{dump}.json"
    real = json.loads(real_file.read_text())
    result = run(inventory, *REAL_GPUS[gpu], *REAL_DUMPS[dump])
    assert result.returncode == 0, result.stderr
    mock = json.loads(result.stdout)
    assert mock, "the mock published nothing"
    found = list(differences(without_machine(real), without_machine(mock)))
    assert not found, (
        f"the mock {gpu} differs from the real one ({real_file.relative_to(REPO_ROOT)},"
        " 'golden' below):\n" + "\n".join(found)
    )


# -- The DeviceClasses the driver's chart installs ------------------------------------------------

CLASSES_GOLDEN = GOLDEN / "deviceclasses.yaml"
# The chart refuses to render GPU resources without gpuResourcesEnabledOverride (its guard
# against running beside the device plugin) or in the default namespace; --api-versions is
# what helm install finds on a v1 cluster (its resourceApiVersion helper reads it).
CHART_ARGS = [
    "--namespace=nvidia-dra-driver-gpu",
    "--set=gpuResourcesEnabledOverride=true",
    "--api-versions=resource.k8s.io/v1",
    *(f"--show-only=templates/deviceclass-{name}.yaml" for name in ("gpu", "mig", "vfio-gpu")),
]


def test_the_suite_uses_the_classes_the_driver_chart_installs(inventory: Path) -> None:
    chart, helm = inventory.parent / "chart", find_bin_dir() / "helm"
    assert chart.is_dir(), f"no {chart}: run `bash {BUILD_HINT}`"
    assert os.access(helm, os.X_OK), f"no {helm}: run `bash tests/k8s/build.sh`"
    result = subprocess.run(
        [str(helm), "template", "dra", str(chart), *CHART_ARGS],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    rendered = [doc for doc in yaml.safe_load_all(result.stdout) if doc]
    if REGENERATE:
        header = "".join(
            line for line in CLASSES_GOLDEN.read_text().splitlines(True) if line.startswith("#")
        )
        body = "".join(
            line for line in result.stdout.splitlines(True) if not line.startswith("# Source")
        )
        CLASSES_GOLDEN.write_text(header + body)
    golden = [doc for doc in yaml.safe_load_all(CLASSES_GOLDEN.read_text()) if doc]
    assert [c["metadata"]["name"] for c in rendered] == [
        "gpu.nvidia.com",
        "mig.nvidia.com",
        "vfio.gpu.nvidia.com",
    ]
    found = list(differences(golden, rendered))
    assert not found, f"the driver chart's DeviceClasses differ from {CLASSES_GOLDEN.name}:\n" + (
        "\n".join(found)
    )
    assert rendered[0]["spec"]["extendedResourceName"] == "nvidia.com/gpu"

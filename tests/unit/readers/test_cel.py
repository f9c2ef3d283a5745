"""DRA device selectors evaluated as the scheduler does: quantities, versions, the attribute
and capacity maps, and a MIG profile's selector; the selectors made of GFD node labels are
tests/unit/core/test_gfd_cel.py's."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from app.core.quantity import parse_quantity
from app.core.resources import parse_count
from app.readers.cel.devices import (
    SelectorError,
    class_selectors,
    devices_of,
    matches,
    select,
)
from app.readers.cel.semver import parse_semver
from tests.support.cluster import (
    device_class,
    gpu_devices,
    gpu_resource_slice,
)
from tests.unit.selectors import A100, H100, MIG, chosen, generated, node_devices

Obj = dict[str, Any]
GI = 2**30


# ---- quantities --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("40Gi", 40 * GI),
        ("1Ki", 1024),
        ("-1Mi", -(2**20)),
        ("1.5", Fraction(3, 2)),
        ("500m", Fraction(1, 2)),
        ("1e3", 1000),
        ("1E3", 1000),
        ("1E", 10**18),
        ("+2k", 2000),
        ("0.1n", Fraction(1, 10**9)),  # rounded up to a whole nano, as Kubernetes does
        ("0", 0),
        ("1.", 1),
        ("9Ei", 2**63 - 1),  # binary quantities are capped at the int64 maximum
        # exponents far past any count or capacity: saturated, not computed in full
        ("1e999999999", 10**400),
        ("1e-999999999", Fraction(1, 10**9)),
    ],
)
def test_quantity_values(text: str, value: Fraction | int) -> None:
    assert parse_quantity(text).value == value


@pytest.mark.parametrize("text", ["", "1x", "Gi", "1ki", "1.2.3", "1 Gi", "e3", "1e2147483648"])
def test_quantity_errors(text: str) -> None:
    with pytest.raises(ValueError, match="quantity"):
        parse_quantity(text)


def test_quantities_compare_by_value() -> None:
    assert parse_quantity("1Gi") == parse_quantity("1073741824")
    assert parse_quantity("1G").compare(parse_quantity("1Gi")) == -1
    assert parse_quantity("40960Mi") == parse_quantity("40Gi")
    # Python's equality: a quantity is no number; in CEL the same is an error (below).
    assert parse_quantity("1") != 1


# ---- versions ----------------------------------------------------------------------------


def test_semver_precedence() -> None:
    ordered = [
        "1.0.0-alpha",
        "1.0.0-alpha.1",
        "1.0.0-alpha.beta",
        "1.0.0-beta",
        "1.0.0-beta.2",
        "1.0.0-beta.11",
        "1.0.0-rc.1",
        "1.0.0",
        "1.0.1",
        "550.107.2",
        "580.82.7",
    ]
    versions = [parse_semver(v) for v in ordered]
    assert sorted(reversed(versions)) == versions
    assert parse_semver("1.0.0+build.5") == parse_semver("1.0.0")


@pytest.mark.parametrize("text", ["01.2.3", "1.2", "1.2.3-", "1.2.3-01", "v1.2.3", "1.2.x", ""])
def test_semver_errors(text: str) -> None:
    with pytest.raises(ValueError, match="semver"):
        parse_semver(text)


def test_semver_normalize() -> None:
    assert str(parse_semver("v1.2", normalize=True)) == "1.2.0"
    assert str(parse_semver("01.02.3", normalize=True)) == "1.2.3"


# ---- the device variable -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("device.driver == 'gpu.nvidia.com'", True),
        ("device.attributes['gpu.nvidia.com'].type == 'gpu'", True),
        # A qualified attribute name: its domain, not the driver's.
        ("device.attributes['resource.kubernetes.io'].pciBusID == '0000:07:00.0'", True),
        ("has(device.attributes['gpu.nvidia.com'].profile)", False),
        ("'productName' in device.attributes['gpu.nvidia.com']", True),
        ("device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) == 0", True),
        ("device.capacity['gpu.nvidia.com'].memory.isGreaterThan(quantity('39Gi'))", True),
        ("device.capacity['gpu.nvidia.com'].memory == quantity('40960Mi')", True),
        ("device.capacity['gpu.nvidia.com'].memory.add(quantity('1Gi')).asInteger() > 0", True),
        (
            "device.attributes['gpu.nvidia.com'].driverVersion.compareTo(semver('550.0.0')) > 0",
            True,
        ),
        ("device.attributes['gpu.nvidia.com'].driverVersion.isLessThan(semver('580.82.10'))", True),
        ("device.attributes['gpu.nvidia.com'].cudaComputeCapability.major() == 8", True),
        (
            "device.attributes['gpu.nvidia.com'].productName.lowerAscii().matches('^.*a100.*$')",
            True,
        ),
        ("device.attributes['gpu.nvidia.com'].productName.split(' ')[1] == 'A100-SXM4-40GB'", True),
        (
            "device.attributes['gpu.nvidia.com'].productName.replace('A', 'B', 1)"
            " == 'NVIDIB A100-SXM4-40GB'",
            True,
        ),
        ("device.attributes['gpu.nvidia.com'].architecture in ['Ampere', 'Hopper']", True),
        ("isQuantity('1Gi') && !isQuantity('1gi') && isSemver('1.0.0') && !isSemver('1.0')", True),
    ],
)
def test_selectors_see_the_device_as_dra_does(expression: str, expected: bool) -> None:
    assert matches(expression, A100) is expected


@pytest.mark.parametrize(
    ("expression", "error"),
    [
        # An unknown domain is an empty map; a missing attribute is an error, not false.
        ("device.attributes['other.com'].model == 'x'", "no such key: model"),
        ("device.attributes['gpu.nvidia.com'].profile == '1g.5gb'", "no such key: profile"),
        ("device.capacity['gpu.nvidia.com'].memory < quantity('1Gi')", "no such overload"),
        # A quantity compared with a string is an error, not false.
        ("device.capacity['gpu.nvidia.com'].memory == '40Gi'", "no such overload"),
        ("quantity('1').add(1) != '2'", "no such overload"),
        ("device.attributes['gpu.nvidia.com'].productName", "the result is String, not bool"),
        ("quantity('lots') == quantity('1')", "quantity 'lots'"),
        ("device.driver ==", "syntax error"),
        ("cel.bind(a, device.driver, a == 'x')", "cel.bind() is not supported"),
    ],
)
def test_selector_errors(expression: str, error: str) -> None:
    with pytest.raises(SelectorError, match=error.replace("(", r"\(").replace(")", r"\)")):
        matches(expression, A100)


def test_and_or_absorb_errors_like_cel() -> None:
    assert matches("device.driver == 'x' && device.attributes['a'].b == 1", A100) is False
    assert matches("device.attributes['a'].b == 1 || device.driver == 'gpu.nvidia.com'", A100)


def test_device_classes_split_whole_gpus_from_mig() -> None:
    gpu = class_selectors(device_class("gpu.nvidia.com", "gpu"))
    mig = class_selectors(device_class("mig.nvidia.com", "mig"))
    devices = [A100, H100, *MIG]
    assert select(devices, gpu).selected == (A100, H100)
    assert [d.name for d in select(devices, mig).selected] == [
        "gpu-0-mig-1g5gb-19-0",
        "gpu-0-mig-3g20gb-9-4",
    ]
    assert select(devices, mig).errors == ()


def test_stale_pool_generations_and_v1beta1_devices() -> None:
    old = gpu_resource_slice("n", gpu_devices("n", gpus=2))
    new = gpu_resource_slice("n", gpu_devices("n", gpus=1))
    new["spec"]["pool"]["generation"] = 2
    beta = gpu_resource_slice("b", [])
    beta["spec"]["devices"] = [{"name": "d", "basic": {"attributes": {"type": {"string": "gpu"}}}}]
    found = devices_of([old, new, beta])
    assert [(d.pool, d.name) for d in found] == [("n", "gpu-0"), ("b", "d")]
    assert matches("device.attributes['gpu.nvidia.com'].type == 'gpu'", found[1])


# ---- what gpu2dra generates ----------------------------------------------------------------


def test_mig_profile_with_attributes() -> None:
    me = node_devices("me", gpus=1, mig={0: ["1g.5gb+me"]})
    (selector,) = generated({"nvidia.com/mig-1g.5gb.me": 1})
    assert chosen([selector], me) == me


def test_a_count_with_a_huge_exponent_is_no_count() -> None:
    # found by the fuzzer: 10**(10**47) in full never finishes
    assert parse_count("9" * 200 + "E99999999999999999900000000003943196028257173503") is None
    assert parse_count("1e999999999") is None

"""Every `doctor` check as a pure function of what was read: tables of facts -> verdict.

The same checks run on the real control plane in tests/e2e/test_doctor.py; here each branch
is reached without one.
"""

from __future__ import annotations

from typing import Any

import pytest

from app.core.policy import load_policy, parse_policy
from app.diagnose.doctor.checks import CHECKS
from app.diagnose.doctor.checks.cluster import (
    check_coexistence,
    check_deviceclasses,
    check_resourceslices,
)
from app.diagnose.doctor.checks.paths import check_paths
from app.diagnose.doctor.checks.sharing import check_sharing
from app.diagnose.doctor.checks.webhooks import (
    check_webhook_service,
    check_webhook_tls,
    check_webhooks,
)
from app.diagnose.doctor.facts import Facts, NotServed, Reached
from app.readers.client import ReadError
from app.readers.registrations import Registration
from app.readers.tlsprobe import Endpoint
from tests.support.cluster import (
    device_class,
    gpu_devices,
    gpu_resource_slice,
)

POLICY = load_policy(None)
CLASSES = [device_class("gpu.nvidia.com", "gpu"), device_class("mig.nvidia.com", "mig")]
MUTATING = Registration("MutatingWebhookConfiguration", "gpu2dra", ())
VALIDATING = Registration("ValidatingWebhookConfiguration", "gpu2dra", ())
SVC = Endpoint("gpu2dra.gpu2dra-system.svc", 443, "gpu2dra.gpu2dra-system.svc")
URL = Endpoint("10.0.0.5", 8443, "10.0.0.5")


def slices(*nodes: str, mig: dict[int, list[str]] | None = None) -> list[dict[str, Any]]:
    return [gpu_resource_slice(n, gpu_devices(n, gpus=2, mig=mig)) for n in nodes]


def node(name: str, **allocatable: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": {"allocatable": allocatable}}


def served(name: str, ext: str) -> dict[str, Any]:
    cls = device_class(name, "gpu")
    return {**cls, "spec": {**cls["spec"], "extendedResourceName": ext}}


FORBIDDEN = ReadError("GET /apis/resource.k8s.io/v1/deviceclasses: 403 forbidden")


@pytest.mark.parametrize(
    ("classes", "status", "says"),
    [
        (CLASSES, "PASS", "2 DeviceClass(es): gpu.nvidia.com, mig.nvidia.com; every mapped"),
        (CLASSES[:1], "FAIL", "missing mig.nvidia.com (for nvidia.com/mig-*)"),
        ([], "FAIL", "0 DeviceClass(es): none; missing gpu.nvidia.com (for nvidia.com/gpu)"),
        (
            [served("gpu.nvidia.com", "nvidia.com/gpu"), CLASSES[1]],
            "PASS",
            "every mapped class exists",
        ),
        ([*CLASSES, served("other", "example.com/fpga")], "PASS", "every mapped class exists"),
        (FORBIDDEN, "WARN", "cannot read: GET /apis/resource.k8s.io/v1/deviceclasses"),
        (NotServed("resource.k8s.io/v1 is not served"), "WARN", "not checked"),
    ],
)
def test_device_classes(classes: Any, status: str, says: str) -> None:
    check = check_deviceclasses(Facts(device_classes=classes), POLICY)
    assert check.status == status
    assert says in check.summary


@pytest.mark.parametrize(
    ("published", "classes", "status", "says"),
    [
        ([], CLASSES, "FAIL", "no ResourceSlice publishes a device"),
        (slices("a"), CLASSES, "WARN", "no device for mig.nvidia.com (for nvidia.com/mig-*)"),
        (
            slices("a", mig={1: ["3g.20gb", "1g.5gb"]}),
            CLASSES,
            "PASS",
            "3 device(s) in 1 pool(s); gpu.nvidia.com selects 1, mig.nvidia.com selects 2",
        ),
        (
            slices("a"),
            [device_class("gpu.nvidia.com", "vfio"), device_class("mig.nvidia.com", "vfio")],
            "FAIL",
            "no device belongs to a DeviceClass gpu2dra maps to",
        ),
        (FORBIDDEN, CLASSES, "WARN", "cannot read"),
    ],
)
def test_slices(published: Any, classes: Any, status: str, says: str) -> None:
    check = check_resourceslices(Facts(slices=published, device_classes=classes), POLICY)
    assert check.status == status
    assert says in check.summary


def test_slices_a_failing_class_selector_is_a_warning_naming_the_device() -> None:
    broken = device_class("gpu.nvidia.com", "gpu")
    broken["spec"]["selectors"] = [{"cel": {"expression": "device.attributes['x.com'].y == 1"}}]
    facts = Facts(slices=slices("a", mig={1: ["7g.40gb"]}), device_classes=[broken, CLASSES[1]])
    check = check_resourceslices(facts, POLICY)
    assert check.status == "WARN"
    assert "a DeviceClass selector fails on 2 device(s)" in check.summary
    assert any("no such key" in line for line in check.details)


@pytest.mark.parametrize(
    ("nodes", "status", "says"),
    [
        ([node("a"), node("b", **{"nvidia.com/gpu": "8"})], "PASS", "(1 through the device"),
        ([node("a", **{"nvidia.com/gpu": "0"})], "PASS", "(0 through the device plugin, 1"),
        ([node("a", **{"nvidia.com/gpu": "2"})], "FAIL", "offer the same GPUs twice"),
        (ReadError("GET /api/v1/nodes: 403 forbidden"), "WARN", "cannot read"),
    ],
)
def test_coexistence(nodes: Any, status: str, says: str) -> None:
    check = check_coexistence(
        Facts(nodes=nodes, slices=slices("a"), device_classes=CLASSES), POLICY
    )
    assert check.status == status
    assert says in check.summary


@pytest.mark.parametrize(
    ("regs", "status", "says"),
    [
        ([MUTATING, VALIDATING], "PASS", "MutatingWebhookConfiguration gpu2dra, Validating"),
        ([MUTATING], "FAIL", "no gpu2dra ValidatingWebhookConfiguration (found: Mutating"),
        ([], "FAIL", "no gpu2dra MutatingWebhookConfiguration or ValidatingWebhook"),
        (ReadError("403"), "WARN", "cannot read: 403"),
    ],
)
def test_registration(regs: Any, status: str, says: str) -> None:
    check = check_webhooks(Facts(registrations=regs), POLICY)
    assert check.status == status
    assert says in check.summary


@pytest.mark.parametrize(
    ("reached", "status", "says"),
    [
        ([Reached(SVC, ("gpu2dra",), None)], "PASS", "verifies the serving certificate"),
        (
            [Reached(SVC, ("gpu2dra",), "the serving certificate does not verify: expired")],
            "FAIL",
            "gpu2dra -> gpu2dra.gpu2dra-system.svc:443: the serving certificate does not",
        ),
        ([Reached(SVC, ("gpu2dra",), None, "cannot reach it")], "WARN", "cannot reach it"),
    ],
)
def test_tls(reached: list[Reached], status: str, says: str) -> None:
    check = check_webhook_tls(Facts(registrations=[MUTATING, VALIDATING], tls=reached), POLICY)
    assert check.status == status
    assert says in check.summary


def test_tls_and_service_without_registrations_fail() -> None:
    assert check_webhook_tls(Facts(registrations=[], tls=[]), POLICY).status == "FAIL"
    none = Facts(registrations=[], ready_endpoints={}, tls=[])
    assert check_webhook_service(none, POLICY).status == "FAIL"


@pytest.mark.parametrize(
    ("ready", "reached", "status", "says"),
    [
        ({("gpu2dra-system", "gpu2dra"): 2}, [], "PASS", "2 ready endpoint(s)"),
        ({("gpu2dra-system", "gpu2dra"): 0}, [], "FAIL", "0 ready endpoint(s): the webhook"),
        ({("gpu2dra-system", "gpu2dra"): ReadError("403")}, [], "WARN", "cannot read: 403"),
        ({}, [Reached(URL, ("gpu2dra",), None)], "PASS", "URL 10.0.0.5:8443: answers TLS"),
        ({}, [Reached(URL, ("gpu2dra",), None, "refused")], "FAIL", "URL 10.0.0.5:8443: refused"),
        ({}, [], "PASS", "no Service (reached by URL)"),
    ],
)
def test_endpoints(ready: Any, reached: list[Reached], status: str, says: str) -> None:
    facts = Facts(registrations=[MUTATING, VALIDATING], ready_endpoints=ready, tls=reached)
    check = check_webhook_service(facts, POLICY)
    assert check.status == status
    assert says in check.summary


def namespaces(**modes: str) -> list[dict[str, Any]]:
    return [
        {"metadata": {"name": n, "labels": {"gpu2dra.io/migration": m} if m else {}}}
        for n, m in modes.items()
    ]


MIG_SLICES = slices("a", mig={1: ["1g.5gb", "3g.20gb"]})


@pytest.mark.parametrize(
    ("classes", "spaces", "status", "says"),
    [
        (CLASSES, namespaces(a="enabled", b=""), "PASS", "nvidia.com/gpu: gpu2dra in 1 enabled"),
        (CLASSES, namespaces(b=""), "PASS", "nvidia.com/gpu: the device plugin everywhere"),
        (
            [served("gpu.nvidia.com", "nvidia.com/gpu"), CLASSES[1]],
            namespaces(a="enabled", b=""),
            "WARN",  # the MIG profiles the slices publish have no class of their own
            "MIG profiles published without a class to serve them in-tree: 1g.5gb, 3g.20gb",
        ),
        (
            [
                served("gpu.nvidia.com", "nvidia.com/gpu"),
                CLASSES[1],
                served("mig-1g-5gb.nvidia.com", "nvidia.com/mig-1g.5gb"),
                served("mig-3g-20gb.nvidia.com", "nvidia.com/mig-3g.20gb"),
            ],
            namespaces(a="enabled"),
            "PASS",
            "2 mapped resource(s)",
        ),
        (
            [served("gpu.nvidia.com", "nvidia.com/gpu"), served("other", "nvidia.com/gpu")],
            namespaces(),
            "WARN",
            "one name, several DeviceClasses (nvidia.com/gpu: gpu.nvidia.com, other)",
        ),
        (FORBIDDEN, namespaces(), "WARN", "cannot read"),
    ],
)
def test_paths(classes: Any, spaces: Any, status: str, says: str) -> None:
    check = check_paths(Facts(device_classes=classes, namespaces=spaces, slices=MIG_SLICES), POLICY)
    assert check.status == status, check
    assert says in " | ".join((check.summary, *check.details))


def test_paths_say_how_they_were_found() -> None:
    classes = [
        served("gpu.nvidia.com", "nvidia.com/gpu"),
        CLASSES[1],
        served("mig-1g-5gb.nvidia.com", "nvidia.com/mig-1g.5gb"),
    ]
    spaces = namespaces(a="enabled", b="")
    facts = Facts(device_classes=classes, namespaces=spaces, slices=slices("a"))
    check = check_paths(facts, POLICY)
    assert check.details == (
        "nvidia.com/gpu: gpu2dra in 1 enabled namespace(s) (pods that gain nothing from it go "
        "in-tree); in-tree elsewhere (nvidia.com/gpu by gpu.nvidia.com: DeviceClass "
        "extendedResourceName)",
        "nvidia.com/mig-*: gpu2dra in 1 enabled namespace(s) (pods that gain nothing from it "
        "go in-tree); in-tree elsewhere (nvidia.com/mig-1g.5gb by mig-1g-5gb.nvidia.com: "
        "DeviceClass extendedResourceName)",
    )


# ---- sharing --------------------------------------------------------------------------------


def shared_slice(node_name: str, option: str) -> dict[str, Any]:
    return gpu_resource_slice(node_name, gpu_devices(node_name, gpus=2, consumable=option))


def consumable(**fields: Any) -> Any:
    mapping = {"deviceClassName": "gpu.nvidia.com", "consumable": fields}
    return parse_policy({"mappings": {"nvidia.com/gpu": mapping}})


@pytest.mark.parametrize(
    ("published", "policy", "status", "says", "detail"),
    [
        (slices("a"), POLICY, "PASS", "no pool shares devices; no mapping moves", ""),
        (
            [shared_slice("a", "4")],
            POLICY,
            "PASS",
            "1 pool(s) share devices; no mapping moves pods",
            "gpu.nvidia.com pool a: 2 of 2 device(s) shared; gpu-0 offers memory 40Gi "
            "(default 0), shares 4 (default 1)",
        ),
        (
            [shared_slice("a", "4"), *slices("b")],
            consumable(shares=1),
            "PASS",
            "1 pool(s) share devices with what the consumable mappings take (nvidia.com/gpu)",
            "gpu.nvidia.com pool a: 2 of 2",
        ),
        (
            slices("a"),
            consumable(shares=1),
            "WARN",
            "0 pool(s) share devices, not as the policy's consumable mappings need",
            "nvidia.com/gpu: no device of driver gpu.nvidia.com is shared with a consumable "
            "`shares`",
        ),
        (
            [shared_slice("a", "memory")],
            consumable(shares=1, memory="nvidia.com/gpumem"),
            "WARN",
            "1 pool(s) share devices, not as",
            "consumable `shares`",
        ),
        (
            [shared_slice("a", "memory")],
            consumable(shares="none", memory="nvidia.com/gpumem"),
            "PASS",
            "with what the consumable mappings take",
            "(default 40Gi)",
        ),
        (FORBIDDEN, consumable(shares=1), "WARN", "cannot read", ""),
    ],
)
def test_sharing(published: Any, policy: Any, status: str, says: str, detail: str) -> None:
    check = check_sharing(Facts(slices=published), policy)
    assert (check.status, CHECKS["sharing"]) == (status, check_sharing)
    assert says in check.summary, check.summary
    assert not detail or any(detail in d for d in check.details), check.details
    assert (check.fix != "") == (status == "WARN")


def test_conversions_name_the_nodes_left_mid_way() -> None:
    from app.core.conversion import ANNOTATION, State
    from app.diagnose.doctor.checks.cluster import check_conversions

    state = State("dra", "drain", "gpu-operator", "2026-12-04T10:00:00Z")
    nodes: list[dict[str, Any]] = [
        {"metadata": {"name": "a", "annotations": {ANNOTATION: state.text()}}},
        {"metadata": {"name": "b", "annotations": {ANNOTATION: "not json"}}},
        {"metadata": {"name": "c"}},
    ]
    check = check_conversions(Facts(nodes=nodes), POLICY)
    assert (check.status, check.summary) == ("WARN", "1 node(s) mid-conversion, cordoned: a")
    assert check.details == (
        "node a: converting to the DRA driver (after drain, since 2026-12-04T10:00:00Z)",
    )
    assert CHECKS["conversions"] is check_conversions
    assert check_conversions(Facts(nodes=nodes[2:]), POLICY).status == "PASS"
    assert check_conversions(Facts(nodes=ReadError("403")), POLICY).status == "WARN"

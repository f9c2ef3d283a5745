"""Fail closed: HAMi's device annotations as CEL pick the GPUs HAMi picks; the scheduler and
the watched annotations as translate() reads them."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from app.core.catalog import Catalog
from app.core.failclosed import (
    NOUSE_TYPE,
    NOUSE_UUID,
    USE_TYPE,
    USE_UUID,
    device_filter,
    scheduler_problem,
    watched_annotations,
    yunikorn_mark,
)
from app.core.outcomes import Code
from app.core.policy import parse_policy
from app.core.translate import translate
from app.readers.cel.devices import Device, selects

POLICY = parse_policy({})


def _hami_card_type(name: str) -> str:
    """HAMi's card type: NVML's name, `NVIDIA-` before one that does not start with NVIDIA
    (pkg/device-plugin/nvidiadevice/nvinternal/plugin/register.go)."""
    return name if name.startswith("NVIDIA") else f"NVIDIA-{name}"


def _hami_check_type(annos: dict[str, str], card_type: str) -> bool:
    """pkg/device/devices.go CheckType, line by line."""
    card_type = card_type.upper()

    def match(values: str) -> bool:
        return any(t.strip() != "" and t.strip().upper() in card_type for t in values.split(","))

    if (inuse := annos.get(USE_TYPE)) is not None and inuse.strip() != "" and not match(inuse):
        return False
    return not ((no := annos.get(NOUSE_TYPE)) is not None and no.strip() != "" and match(no))


def _hami_check_uuid(annos: dict[str, str], device_id: str) -> bool:
    """pkg/device/devices.go CheckUUID, line by line."""

    def match(values: str) -> bool:
        return any(u.strip() == device_id for u in values.split(","))

    if (use := annos.get(USE_UUID)) is not None and use.strip() != "" and not match(use):
        return False
    return not ((no := annos.get(NOUSE_UUID)) is not None and no.strip() != "" and match(no))


NAMES = ["NVIDIA A100-SXM4-40GB", "NVIDIA H100 80GB HBM3", "Tesla T4", "NVIDIA L4", "Quadro RTX"]
UUIDS = ["GPU-aaaa", "GPU-bbbb", "GPU-cccc"]


def _device(name: str, device_uuid: str) -> Device:
    attributes = {"productName": {"string": name}, "uuid": {"string": device_uuid}}
    return Device("gpu.nvidia.com", "p", "gpu-0", "n", attributes=attributes)


# Pieces of type lists: parts of the names (NVIDIA- itself, which HAMi adds), commas, spaces.
_TYPE_PARTS = st.sampled_from(
    ["a100", "A100", "h100", "T4", "nvidia-", "NVIDIA-TESLA", "A-T", "l4", "rtx", " ", ",", "x"]
)
_type_lists = st.lists(_TYPE_PARTS, max_size=5).map("".join)
_uuid_lists = st.lists(st.sampled_from([*UUIDS, " ", ",", "GPU-"]), max_size=4).map("".join)


@settings(max_examples=200, deadline=None)
@given(
    use=st.none() | _type_lists,
    nouse=st.none() | _type_lists,
    use_uuid=st.none() | _uuid_lists,
    nouse_uuid=st.none() | _uuid_lists,
)
@example(use="nvidia-tesla", nouse=None, use_uuid=None, nouse_uuid=None)  # HAMi's prefix
@example(use="A-T", nouse=None, use_uuid=None, nouse_uuid=None)  # NVIDIA-Tesla T4: no
@example(use=None, nouse=" ,T4", use_uuid="GPU-aaaa,GPU-bbbb", nouse_uuid="GPU-bbbb")
def test_annotations_pick_the_gpus_hami_picks(
    use: str | None, nouse: str | None, use_uuid: str | None, nouse_uuid: str | None
) -> None:
    keys = (USE_TYPE, NOUSE_TYPE, USE_UUID, NOUSE_UUID)
    annos = {k: v for k, v in zip(keys, (use, nouse, use_uuid, nouse_uuid), strict=True) if v}
    found = device_filter(tuple(sorted(annos.items())))
    for name in NAMES:
        for device_uuid in UUIDS:
            hami = _hami_check_type(annos, _hami_card_type(name))
            hami = hami and _hami_check_uuid(annos, device_uuid)
            if found.problems:  # only when HAMi picks no GPU at all
                assert not hami
            else:
                assert selects(_device(name, device_uuid), found.selectors) == hami


def test_a_device_without_the_attribute_is_not_picked() -> None:
    bare = Device("gpu.nvidia.com", "p", "gpu-0", "n", attributes={})
    for key in (USE_TYPE, NOUSE_TYPE, USE_UUID, NOUSE_UUID):
        (selector,) = device_filter(((key, "x"),)).selectors
        assert not selects(bare, [selector])


def test_a_quote_in_a_value_stays_in_its_string() -> None:
    (selector,) = device_filter(((USE_TYPE, "a'b\\"),)).selectors
    assert selects(_device("NVIDIA A'B\\", "GPU-a"), [selector])
    assert not selects(_device("NVIDIA A'B", "GPU-a"), [selector])


@pytest.mark.parametrize(
    ("annotations", "kept"),
    [
        (None, ()),
        ({}, ()),
        ({"app": "x", "example.com/a": "b"}, ()),
        (
            {"nvidia.com/use-gputype": "A100", "hami.io/x": "1", "team": "ml"},
            (("hami.io/x", "1"), ("nvidia.com/use-gputype", "A100")),
        ),
        ({"gpu.nvidia.com/x": "1"}, (("gpu.nvidia.com/x", "1"),)),
        ({"notnvidia.com/x": "1"}, ()),
    ],
)
def test_watched_annotations(annotations: Any, kept: tuple[tuple[str, str], ...]) -> None:
    assert watched_annotations(annotations, POLICY) == kept


def test_ignored_annotations_are_not_read() -> None:
    policy = parse_policy({"ignoreKeys": ["hami.io/*", "nvidia.com/numa-bind"]})
    annotations = {"hami.io/x": "1", "nvidia.com/numa-bind": "true", "nvidia.com/vgpu-mode": "m"}
    assert watched_annotations(annotations, policy) == (("nvidia.com/vgpu-mode", "m"),)


def test_a_mapped_vendor_domain_is_watched() -> None:
    policy = parse_policy({"mappings": {"amd.com/gpu": {"deviceClassName": "gpu.amd.com"}}})
    assert watched_annotations({"amd.com/use-gputype": "MI300"}, policy) == (
        ("amd.com/use-gputype", "MI300"),
    )
    (problem,) = device_filter((("amd.com/use-gputype", "MI300"),)).problems
    assert "amd.com/use-gputype" in problem


@pytest.mark.parametrize(
    ("spec", "schedulers", "problem"),
    [
        ({}, ["default-scheduler"], ""),
        ({"schedulerName": ""}, ["default-scheduler"], ""),
        ({"schedulerName": None}, ["default-scheduler"], ""),
        ({"schedulerName": "kai"}, ["default-scheduler", "kai"], ""),
        ({"schedulerName": "hami-scheduler"}, ["default-scheduler"], "'hami-scheduler'"),
        ({}, ["kai"], "'default-scheduler'"),
        ({"schedulerName": ["x"]}, ["default-scheduler"], "['x']"),
    ],
)
def test_scheduler_problem(spec: dict[str, Any], schedulers: list[str], problem: str) -> None:
    said = scheduler_problem(spec, parse_policy({"draSchedulers": schedulers}))
    if problem:
        assert said is not None and said.code is Code.SCHEDULER and problem in said
    else:
        assert said is None


@pytest.mark.parametrize(
    ("metadata", "mark"),
    [
        ({"labels": {"yunikorn.apache.org/queue": "root.a"}}, "label yunikorn.apache.org/queue"),
        (
            {"annotations": {"yunikorn.apache.org/queue": "root.a"}},
            "annotation yunikorn.apache.org/queue",
        ),
        # what YuniKorn's admission controller writes into a Deployment's or Job's pod template
        (
            {"annotations": {"yunikorn.apache.org/user.info": '{"user":"a"}'}},
            "annotation yunikorn.apache.org/user.info",
        ),
        (
            {"labels": {"queue": "root.a", "applicationId": "x", "app": "train"}},
            "label queue",
        ),
        (
            {"labels": {"queue": "q", "yunikorn.apache.org/app-id": "x"}},
            "label queue, label yunikorn.apache.org/app-id",
        ),
        ({"annotations": {"queue": "root.a"}}, None),  # the shim reads `queue` as a label only
        ({"labels": {"kueue.x-k8s.io/queue-name": "q", "app": "yunikorn"}}, None),
        ({"labels": None, "annotations": ["x"]}, None),
        (None, None),
    ],
)
def test_yunikorn_mark(metadata: Any, mark: str | None) -> None:
    assert yunikorn_mark(metadata) == mark


@pytest.mark.parametrize(
    ("spec", "schedulers", "code"),
    [
        # its admission controller sets schedulerName: yunikorn after gpu2dra's webhook
        ({}, ["default-scheduler"], Code.YUNIKORN_POD),
        ({"schedulerName": "default-scheduler"}, ["default-scheduler"], Code.YUNIKORN_POD),
        ({"schedulerName": "kai"}, ["default-scheduler", "kai"], Code.YUNIKORN_POD),
        ({}, ["default-scheduler", "yunikorn"], None),  # the policy says YuniKorn allocates claims
        ({"schedulerName": "yunikorn"}, ["default-scheduler"], Code.SCHEDULER),  # said once
        ({"schedulerName": "hami-scheduler"}, ["default-scheduler"], Code.SCHEDULER),
    ],
)
def test_a_pod_marked_for_yunikorn_is_yunikorns_whatever_its_scheduler_name(
    spec: dict[str, Any], schedulers: list[str], code: Code | None
) -> None:
    policy = parse_policy({"draSchedulers": schedulers})
    said = scheduler_problem(spec, policy, "label queue")
    assert (said.code if said is not None else None) is code
    if code is Code.YUNIKORN_POD:
        assert said is not None and said.startswith("label queue marks the pod for YuniKorn")
        assert said.endswith(f"draSchedulers: {', '.join(sorted(schedulers))}); pod left as is")


def test_a_hami_selection_is_not_deferred_to_the_in_tree_path() -> None:
    """The in-tree extended-resource path reads no annotation: a pod whose annotations select
    its GPUs is translated where a plain one is deferred."""
    served = Catalog.from_objects(
        [
            {
                "metadata": {"name": "gpu.nvidia.com"},
                "spec": {"extendedResourceName": "nvidia.com/gpu"},
            }
        ]
    )
    spec = {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}
    assert translate(spec, POLICY, served).in_tree
    typed = translate(spec, POLICY, served, {USE_TYPE: "A100"})
    assert typed.changed and not typed.in_tree

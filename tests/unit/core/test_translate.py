"""The translator, rule by rule: the table in translation_cases.py, then a test per rule."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest

from app.core.catalog import Catalog
from app.core.kube import is_dns_label
from app.core.mapping import ResourceMapping
from app.core.names import claim_name
from app.core.nvidia.mig import mig_profile
from app.core.outcomes import Code, Finding, codes
from app.core.policy import Policy, load_policy, parse_policy
from app.core.resources import parse_count
from app.core.translate import translate
from tests.support.pods import GPU, MIG, Obj, container, gpu
from tests.unit.core.translation_cases import A100_1G5, CASES, PRODUCT, Case


def _expected_spec(case: Case) -> Obj:
    assert isinstance(case.expected, dict)
    return case.expected


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_translation(case: Case, policy: Policy, catalog: Catalog) -> None:
    if case.policy is not None:
        policy = parse_policy({**_default_raw(), **case.policy})
    before = copy.deepcopy(case.spec)
    result = translate(case.spec, policy, catalog, case.annotations)

    assert case.spec == before, "the input must not change"
    if case.expected is None:
        assert result.spec is case.spec
        assert not result.changed
    else:
        assert result.spec == _expected_spec(case)
    got = [
        (
            r["name"],
            r["exactly"]["deviceClassName"],
            r["exactly"]["count"],
            tuple(s["cel"]["expression"] for s in r["exactly"].get("selectors", [])),
        )
        for t in result.templates
        for r in t["spec"]["spec"]["devices"]["requests"]
    ]
    assert got == case.templates
    assert len(result.warnings) == len(case.warnings), result.warnings
    for warning, expected in zip(result.warnings, case.warnings, strict=True):
        assert expected in warning
    assert codes(result.warnings) == case.codes
    assert all(isinstance(w, Finding) for w in result.warnings), "every warning has a code"
    # Translating the translation changes nothing (and says nothing new).
    again = translate(result.spec, policy, catalog, case.annotations)
    assert not again.changed


def test_template_is_valid_v1_exact_request(policy: Policy, catalog: Catalog) -> None:
    result = translate({"containers": [container("c", gpu(3))]}, policy, catalog)
    (template,) = result.templates
    assert template["apiVersion"] == "resource.k8s.io/v1"
    assert template["kind"] == "ResourceClaimTemplate"
    request = template["spec"]["spec"]["devices"]["requests"][0]
    assert set(request) == {"name", "exactly"}  # never the v1beta1 flat form
    assert request["exactly"] == {
        "deviceClassName": GPU,
        "allocationMode": "ExactCount",
        "count": 3,
    }
    assert re.fullmatch(r"gpu2dra-gpu-x3-[0-9a-f]{10}", template["metadata"]["name"])


def test_template_names_follow_content(policy: Policy, catalog: Catalog) -> None:
    def name(spec: Obj) -> str:
        return str(translate(spec, policy, catalog).templates[0]["metadata"]["name"])

    one = name({"containers": [container("a", gpu(1))]})
    assert one == name({"containers": [container("other-name", gpu("1"))]})
    assert one != name({"containers": [container("a", gpu(2))]})
    selected = name(
        {
            "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"},
            "containers": [container("a", gpu(1))],
        }
    )
    assert selected != one and selected.startswith("gpu2dra-gpu-x1-")


def test_missing_device_class_leaves_the_pod(policy: Policy) -> None:
    spec = {"containers": [container("a", gpu(1)), container("b", {"nvidia.com/mig-1g.5gb": 1})]}
    result = translate(spec, policy, Catalog.of(["gpu.nvidia.com"]))
    assert result.spec is spec and not result.templates
    assert result.warnings == (
        "DeviceClass mig.nvidia.com does not exist; pod left as is so that it can still "
        "schedule through the device plugin",
    )


SERVED = Catalog.from_objects(
    [
        {"metadata": {"name": GPU}, "spec": {"extendedResourceName": "nvidia.com/gpu"}},
        {"metadata": {"name": MIG}},
    ]
)
A100_NODE = {"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"}}


@pytest.mark.parametrize(
    ("spec", "in_tree", "deferred"),
    [
        ({"containers": [container("a", gpu(2))]}, "defer", True),
        ({"containers": [container("a", gpu(1)), container("b", gpu(1))]}, "defer", True),
        ({"containers": [container("a", gpu(1))]}, "translate", False),
        ({**A100_NODE, "containers": [container("a", gpu(1))]}, "defer", False),
        (
            {"initContainers": [container("i", gpu(1))], "containers": [container("a", gpu(1))]},
            "defer",
            False,
        ),
        (
            {
                "initContainers": [container("s", gpu(1), restartPolicy="Always")],
                "containers": [container("a", gpu(1))],
            },
            "defer",
            True,
        ),
        (
            {"containers": [container("a", gpu(1)), container("m", {"nvidia.com/mig-1g.5gb": 1})]},
            "defer",
            False,
        ),
        ({"containers": [container("a", gpu(0))]}, "defer", False),
        (
            {
                "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"},
                "containers": [container("a", gpu(1))],
            },
            "defer",
            False,
        ),
    ],
    ids=[
        "whole GPUs",
        "two containers",
        "the mapping says translate",
        "GFD node terms",
        "a regular init container",
        "a sidecar",
        "MIG not served in-tree",
        "zero GPUs",
        "MIG single strategy: the in-tree path would give a whole GPU",
    ],
)
def test_in_tree_path(spec: Obj, in_tree: str, deferred: bool) -> None:
    """Where a DeviceClass serves nvidia.com/gpu in-tree, a pod that gains nothing from
    translation is left to the scheduler; every other pod is translated as elsewhere, and
    no pod ever gets a warning about two owners."""
    raw = _default_raw()
    raw["mappings"]["nvidia.com/gpu"]["inTree"] = in_tree
    result = translate(spec, parse_policy(raw), SERVED)
    assert (result.in_tree is not None, result.changed) == (deferred, not deferred)
    if deferred:
        assert result.spec is spec and not result.warnings
        assert result.in_tree == "nvidia.com/gpu is served in-tree by DeviceClass gpu.nvidia.com"
    assert not any("owner" in w for w in result.warnings)


@pytest.mark.parametrize(
    ("resources", "code"),
    [
        (gpu(1), Code.PREEMPTING_IN_TREE),
        ({"nvidia.com/gpu": 1, "nvidia.com/mig-1g.5gb": 1}, Code.PREEMPTING),
    ],
    ids=["every resource served in-tree", "a MIG slice no class serves"],
)
def test_a_preempting_pod_left_beside_the_in_tree_path_is_told(resources: Obj, code: Code) -> None:
    """preemptingPods: leave keeps a pod that can preempt off gpu2dra's claims; where a
    DeviceClass serves every resource it asks for in-tree, the scheduler can still give it DRA
    devices, where it does not preempt either, and the warning says so."""
    spec = {"priorityClassName": "high", "containers": [container("a", resources)]}
    result = translate(spec, load_policy(None), SERVED)
    assert not result.changed and result.in_tree is None
    (warning,) = result.warnings
    assert warning.code is code
    if code is Code.PREEMPTING_IN_TREE:
        assert warning.endswith(
            "pod left as is (policy preemptingPods: leave), but DeviceClass gpu.nvidia.com "
            "serves nvidia.com/gpu in-tree, through DRA claims too: it preempts only for nodes "
            "whose device plugin offers nvidia.com/gpu"
        )


def test_shared_gpus_need_a_sharing_mapping(catalog: Catalog) -> None:
    raw = _default_raw()
    raw["mappings"]["nvidia.com/gpu.shared"] = {"deviceClassName": "gpu.nvidia.com"}
    spec = {"containers": [container("c", {"nvidia.com/gpu.shared": 1})]}
    refused = translate(spec, parse_policy(raw), catalog)
    assert not refused.changed
    assert refused.warnings[0].code is Code.SHARED_REPLICAS


@pytest.mark.parametrize(
    ("sharing", "parameters"),
    [
        (
            "TimeSlicing",
            {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Default"}},
        ),
        (
            {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}},
            {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}},
        ),
        ("MPS", {"strategy": "MPS", "mpsConfig": {}}),
        (
            {"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 50}},
            {"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 50}},
        ),
    ],
)
def test_sharing_config_is_the_drivers(catalog: Catalog, sharing: Any, parameters: Obj) -> None:
    raw = _default_raw()
    raw["mappings"]["nvidia.com/gpu"]["sharing"] = sharing
    spec = {
        "nodeSelector": {"nvidia.com/gpu.sharing-strategy": "time-slicing"},
        "containers": [container("c", gpu(1))],
    }
    result = translate(spec, parse_policy(raw), catalog)
    (template,) = result.templates
    assert template["spec"]["spec"]["devices"]["config"] == [
        {
            "requests": ["gpu"],
            "opaque": {
                "driver": "gpu.nvidia.com",
                "parameters": {
                    "apiVersion": "resource.nvidia.com/v1beta1",
                    "kind": "GpuConfig",
                    "sharing": parameters,
                },
            },
        }
    ]
    assert "nodeSelector" not in result.spec
    gate = "TimeSlicingSettings" if parameters["strategy"] == "TimeSlicing" else "MPSSupport"
    assert gate in result.warnings[0]


def test_mig_single_sharing_is_a_mig_device_config(catalog: Catalog) -> None:
    raw = _default_raw()
    raw["mappings"]["nvidia.com/mig-*"]["sharing"] = "TimeSlicing"
    spec = {
        "nodeSelector": {PRODUCT: A100_1G5 + "-SHARED"},
        "containers": [container("c", gpu(1))],
    }
    (template,) = translate(spec, parse_policy(raw), catalog).templates
    (config,) = template["spec"]["spec"]["devices"]["config"]
    assert config["opaque"]["parameters"]["kind"] == "MigDeviceConfig"
    assert config["opaque"]["parameters"]["sharing"] == {"strategy": "TimeSlicing"}
    assert template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] == MIG


def test_long_and_clashing_claim_names() -> None:
    long = "a" * 63
    taken = {f"{long}-gpu"}
    name = claim_name(long, "gpu", taken)
    assert is_dns_label(name) and name not in taken
    second = claim_name(long, "gpu", taken | {name})
    assert is_dns_label(second) and second != name
    assert (
        claim_name("Weird_Name", "gpu", set())
        == "weird-name-gpu-" + claim_name("Weird_Name", "gpu", set()).rsplit("-", 1)[1]
    )


def test_long_container_names_in_a_pod(policy: Policy, catalog: Catalog) -> None:
    names = ["x" * 63, "x" * 62 + "y", "x" * 63 + "z"[:0]]
    spec = {"containers": [container(n, gpu(1)) for n in names[:2]]}
    claims = translate(spec, policy, catalog).spec["resourceClaims"]
    assert len({c["name"] for c in claims}) == 2
    assert all(is_dns_label(c["name"]) for c in claims)


@pytest.mark.parametrize(
    ("spelled", "profile"),
    [
        ("1g.5gb", "1g.5gb"),
        ("1g.10gb.me", "1g.10gb+me"),
        ("1g.20gb.me.all", "1g.20gb+me.all"),
        ("1g.12gb.gfx", "1g.12gb+gfx"),
        ("1g.10gb-me", "1g.10gb-me"),
        ("1c.3g.20gb", "1c.3g.20gb"),
        ("7g.80gb", "7g.80gb"),
        ("1g.5gb.shared", None),
        ("large", None),
        ("1g", None),
    ],
)
def test_mig_profile(spelled: str, profile: str | None) -> None:
    assert mig_profile(spelled) == profile


@pytest.mark.parametrize(
    ("value", "count"),
    [
        (0, 0),
        (2, 2),
        ("2", 2),
        (2.0, 2),
        ("02", 2),
        (-1, None),
        ("-1", None),
        (True, None),
        ("2.0", 2),
        ("2000m", 2),
        ("1500m", None),
        ("2.5", None),
        ("2Gi", 2**31),
        ("2e0", 2),
        ("abc", None),
        (None, None),
        ([1], None),
        ("9" * 40, None),
        ("\u0661", None),
    ],
)
def test_parse_count(value: Any, count: int | None) -> None:
    assert parse_count(value) == count


def test_pattern_mapping_prefers_the_longest_prefix() -> None:
    policy = Policy(
        mappings=(
            ResourceMapping("example.com/dev-*", "a"),
            ResourceMapping("example.com/dev-fast-*", "b"),
        )
    )
    assert policy.mapping_for("example.com/dev-fast-1")[0].device_class == "b"  # type: ignore[index]
    assert policy.mapping_for("example.com/dev-1")[0].device_class == "a"  # type: ignore[index]
    assert policy.mapping_for("example.com/dev-") is None


def _default_raw() -> dict[str, Any]:
    import yaml

    from app.core.policy import DEFAULT_POLICY_YAML

    raw: dict[str, Any] = yaml.safe_load(DEFAULT_POLICY_YAML)
    assert load_policy(None) == parse_policy(raw)
    return raw


def test_shared_replicas_on_a_mig_single_node_keep_their_sharing(catalog: Catalog) -> None:
    # nvidia.com/gpu.shared there is a time-sliced MIG device: the MIG mapping, which has no
    # sharing of its own, takes the .shared mapping's
    raw = _default_raw()
    raw["mappings"]["nvidia.com/gpu.shared"] = {"deviceClassName": GPU, "sharing": "TimeSlicing"}
    spec = {
        "nodeSelector": {PRODUCT: A100_1G5},
        "containers": [container("c", {"nvidia.com/gpu.shared": 1})],
    }
    result = translate(spec, parse_policy(raw), catalog)
    (template,) = result.templates
    (config,) = template["spec"]["spec"]["devices"]["config"]
    assert config["opaque"]["parameters"]["kind"] == "MigDeviceConfig"
    assert config["opaque"]["parameters"]["sharing"]["strategy"] == "TimeSlicing"
    assert template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] == MIG
    assert any("shared by TimeSlicing" in w for w in result.warnings)

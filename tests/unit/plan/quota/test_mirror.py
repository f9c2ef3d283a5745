"""The DRA-side quota `gpu2dra quota` prints: per class, the devices the legacy quota allowed,
and the notes on what it cannot keep."""

from __future__ import annotations

import pytest

from app.core.policy import Policy
from app.core.quota import Quota
from app.plan.quota.mirror import mirror

GPU_DEVICES = "gpu.nvidia.com.deviceclass.resource.k8s.io/devices"
MIG_DEVICES = "mig.nvidia.com.deviceclass.resource.k8s.io/devices"


def q(name: str, **hard: str) -> Quota:
    """`requests_nvidia_com__gpu` -> `requests.nvidia.com/gpu`."""
    return Quota(name, {k.replace("__", "/").replace("_", "."): v for k, v in hard.items()})


def test_mirror_limits_each_class_as_the_legacy_quota(policy: Policy) -> None:
    legacy = q("team", requests_nvidia_com__gpu="4", requests_cpu="16")
    found = mirror("team-a", legacy, policy)
    assert found is not None
    assert found.quota == {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {
            "name": "gpu2dra-dra-team",
            "namespace": "team-a",
            "labels": {"app.kubernetes.io/managed-by": "gpu2dra"},
            "annotations": {"gpu2dra.io/mirrors": "team"},
        },
        "spec": {"hard": {GPU_DEVICES: "4"}},
    }
    assert found.notes == ()


def test_mirror_sums_mig_profiles_and_says_so(policy: Policy) -> None:
    legacy = Quota(
        "mig",
        {
            "requests.nvidia.com/mig-1g.10gb": "2",
            "limits.nvidia.com/mig-1g.10gb": "3",  # the smaller one is the limit
            "requests.nvidia.com/mig-2g.20gb": "1",
        },
    )
    found = mirror("ml", legacy, policy)
    assert found is not None
    assert found.quota["spec"]["hard"] == {MIG_DEVICES: "3"}
    assert any(
        "the sum of nvidia.com/mig-1g.10gb 2, nvidia.com/mig-2g.20gb 1 is kept" in n
        for n in found.notes
    )
    assert any(
        "limits.nvidia.com/mig-1g.10gb: the API server counts only requests." in n
        for n in found.notes
    )


@pytest.mark.parametrize(
    "legacy",
    [
        q("cpu", requests_cpu="4"),
        q(
            "done",
            requests_nvidia_com__gpu="4",
            **{"gpu_nvidia_com_deviceclass_resource_k8s_io__devices": "4"},
        ),
    ],
)
def test_nothing_to_mirror(policy: Policy, legacy: Quota) -> None:
    assert mirror("ml", legacy, policy) is None


def test_mirror_notes_a_count_it_cannot_read(policy: Policy) -> None:
    found = mirror(
        "ml",
        Quota("odd", {"requests.nvidia.com/gpu": "1500m", "requests.nvidia.com/mig-1g.10gb": "1"}),
        policy,
    )
    assert found is not None and found.quota["spec"]["hard"] == {MIG_DEVICES: "1"}
    assert (
        found.notes[0]
        == "requests.nvidia.com/gpu: '1500m' is not a whole number of devices; left out"
    )

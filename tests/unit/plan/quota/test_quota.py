"""`gpu2dra quota`: the DRA-side ResourceQuotas it prints, from a file (the cluster path is
run in tests/e2e/test_quota.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from app.cli import main
from app.core.policy import load_policy
from app.core.quota import Quota
from app.plan.quota.render import render

GPU_DEVICES = "gpu.nvidia.com.deviceclass.resource.k8s.io/devices"
MIG_DEVICES = "mig.nvidia.com.deviceclass.resource.k8s.io/devices"


def test_one_dra_quota_per_legacy_quota(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    listed = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {
                "kind": "ResourceQuota",
                "metadata": {"name": "gpus", "namespace": "team-a"},
                "spec": {"hard": {"requests.nvidia.com/gpu": "4", "requests.cpu": "64"}},
            },
            {
                "kind": "ResourceQuota",
                "metadata": {"name": "mig", "namespace": "team-b"},
                "spec": {
                    "hard": {
                        "requests.nvidia.com/mig-1g.10gb": "4",
                        "requests.nvidia.com/mig-3g.40gb": "2",
                    }
                },
            },
        ],
    }
    path = tmp_path / "quotas.yaml"
    path.write_text(yaml.safe_dump(listed))
    assert main(["quota", "-A", "-f", str(path)]) == 0
    out = capsys.readouterr().out
    docs = [d for d in yaml.safe_load_all(out) if d]
    assert [
        (d["metadata"]["namespace"], d["metadata"]["name"], d["spec"]["hard"]) for d in docs
    ] == [
        ("team-a", "gpu2dra-dra-gpus", {GPU_DEVICES: "4"}),
        ("team-b", "gpu2dra-dra-mig", {MIG_DEVICES: "6"}),
    ]
    assert "# team-a/gpus limits requests.nvidia.com/gpu: 4\n" in out
    assert (
        "# note: mig.nvidia.com: the sum of nvidia.com/mig-1g.10gb 4, nvidia.com/mig-3g.40gb 2 "
        "is kept; the split between them is not (one DeviceClass serves them all)\n"
    ) in out
    assert main(["quota", "-n", "team-a", "-f", str(path)]) == 0
    assert "team-b" not in capsys.readouterr().out


def test_a_class_limited_by_another_quota_is_left_alone() -> None:
    policy = load_policy(None)
    quotas = [
        ("ml", Quota("gpus", {"requests.nvidia.com/gpu": "2"})),
        ("ml", Quota("dra", {GPU_DEVICES: "8"})),
    ]
    assert "nothing to apply" in render(quotas, policy)


def test_gpu2dras_own_quota_is_printed_again_with_the_new_limit() -> None:
    policy = load_policy(None)
    quotas = [
        ("ml", Quota("gpus", {"requests.nvidia.com/gpu": "3"})),
        ("ml", Quota("gpu2dra-dra-gpus", {GPU_DEVICES: "2"})),
    ]
    (doc,) = [d for d in yaml.safe_load_all(render(quotas, policy)) if d]
    assert doc["metadata"]["name"] == "gpu2dra-dra-gpus"
    assert doc["spec"]["hard"] == {GPU_DEVICES: "3"}


def test_no_gpu_quota_prints_nothing_to_apply() -> None:
    out = render([("ml", Quota("cpu", {"requests.cpu": "4"}))], load_policy(None))
    assert [d for d in yaml.safe_load_all(out) if d] == []
    assert out.endswith("# no legacy GPU quota to mirror: nothing to apply\n")


def test_a_quota_on_a_resource_that_becomes_capacity_is_named_not_mirrored() -> None:
    from app.core.policy import parse_policy

    policy = parse_policy(
        {
            "mappings": {
                "nvidia.com/gpu": {
                    "deviceClassName": "gpu.nvidia.com",
                    "consumable": {"memory": "nvidia.com/gpumem"},
                }
            }
        }
    )
    hard = {"requests.nvidia.com/gpu": "4", "requests.nvidia.com/gpumem": "40000"}
    text = render([("ml", Quota("gpus", hard))], policy)
    assert (
        "# ml/gpus limits requests.nvidia.com/gpumem: 40000; no DRA-side quota counts "
        "consumable capacity, so pods that ask for it stay on the device plugin under it"
    ) in text
    (quota,) = [d for d in yaml.safe_load_all(text) if d]
    assert quota["spec"]["hard"] == {"gpu.nvidia.com.deviceclass.resource.k8s.io/devices": "4"}

"""What a translated pod still holds outside its claims: GPU device nodes mounted from the
host, and device-plugin NICs the Topology Manager no longer aligns with its GPUs."""

from __future__ import annotations

from typing import Any

import pytest

from app.core.catalog import Catalog
from app.core.outcomes import Code, codes
from app.core.policy import Policy
from app.core.translate import translate

Obj = dict[str, Any]


def _pod(limits: Obj, **extra: Any) -> Obj:
    container = {"name": "c", "image": "x", "resources": {"limits": limits}}
    return {"containers": [container], **extra}


@pytest.mark.parametrize("path", ["/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev"])
def test_a_host_mount_of_gpu_device_nodes_is_named(
    path: str, policy: Policy, catalog: Catalog
) -> None:
    spec = _pod({"nvidia.com/gpu": 1}, volumes=[{"name": "nv", "hostPath": {"path": path}}])
    t = translate(spec, policy, catalog)
    assert t.changed  # translated: the mount gives nothing the claim does not
    assert codes(t.warnings) == (Code.HOST_GPU_DEVICES,)
    assert f"volume 'nv' mounts {path} from the host" in t.warnings[0]


def test_other_host_mounts_say_nothing(policy: Policy, catalog: Catalog) -> None:
    volumes = [
        {"name": "models", "hostPath": {"path": "/data/models"}},
        {"name": "e", "emptyDir": {}},
    ]
    t = translate(_pod({"nvidia.com/gpu": 1}, volumes=volumes), policy, catalog)
    assert t.changed and t.warnings == ()


@pytest.mark.parametrize(
    "nic",
    [
        "vpc.amazonaws.com/efa",
        "rdma/rdma_shared_device_a",
        "intel.com/sriov_netdevice",
        "openshift.io/mlxnics",
    ],
)
def test_nics_beside_gpus_moved_to_claims_lose_numa_alignment(
    nic: str, policy: Policy, catalog: Catalog
) -> None:
    t = translate(_pod({"nvidia.com/gpu": 8, nic: 4}), policy, catalog)
    assert t.changed
    assert codes(t.warnings) == (Code.NUMA_ALIGNMENT,)
    assert t.warnings[0].startswith(f"container 'c' also asks for {nic} from a device plugin")
    assert "matchAttribute" in t.warnings[0]
    # The NIC stays with its device plugin.
    assert t.spec["containers"][0]["resources"]["limits"] == {nic: 4}


def test_a_pod_left_says_nothing_of_alignment(policy: Policy, catalog: Catalog) -> None:
    # No limit: the pod is left, and nothing moved that could lose alignment.
    spec = {
        "containers": [
            {
                "name": "c",
                "resources": {
                    "requests": {"nvidia.com/gpu": 1},
                    "limits": {"vpc.amazonaws.com/efa": 1},
                },
            }
        ]
    }
    t = translate(spec, policy, catalog)
    assert not t.changed
    assert Code.NUMA_ALIGNMENT not in codes(t.warnings)

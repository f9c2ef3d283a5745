"""Doctor's `autoscaling` and `capacity` checks, over tables of facts."""

from __future__ import annotations

from typing import Any

from app.core.policy import parse_policy
from app.diagnose.doctor.checks.capacity import check_autoscaling, check_capacity
from app.diagnose.doctor.checks.verdict import Verdict
from app.diagnose.doctor.facts import Facts
from app.readers.client import ReadError

Obj = dict[str, Any]
POLICY = parse_policy({})
EXPRESSION = (
    "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
)
CLASSES = [
    {
        "metadata": {"name": "gpu.nvidia.com"},
        "spec": {"selectors": [{"cel": {"expression": EXPRESSION}}]},
    }
]


def namespace(name: str, mode: str) -> Obj:
    return {"metadata": {"name": name, "labels": {"gpu2dra.io/migration": mode}}}


def gpu_pod(ns: str, name: str, gpus: int) -> Obj:
    container = {"name": "main", "resources": {"limits": {"nvidia.com/gpu": gpus}}}
    return {"metadata": {"namespace": ns, "name": name}, "spec": {"containers": [container]}}


def gpu_slice(*names: str) -> Obj:
    devices = [{"name": n, "attributes": {"type": {"string": "gpu"}}} for n in names]
    spec = {
        "driver": "gpu.nvidia.com",
        "nodeName": "n1",
        "pool": {"name": "n1"},
        "devices": devices,
    }
    return {"metadata": {"name": "n1"}, "spec": spec}


def claim(device: str) -> Obj:
    result = {"driver": "gpu.nvidia.com", "pool": "n1", "device": device, "request": "gpu"}
    allocation = {"devices": {"results": [result]}}
    return {"metadata": {"namespace": "x", "name": device}, "status": {"allocation": allocation}}


def cluster_autoscaler(version: str, provider: str) -> Obj:
    container = {
        "name": "cluster-autoscaler",
        "image": f"registry.k8s.io/autoscaling/cluster-autoscaler:v{version}",
        "command": ["./cluster-autoscaler", f"--cloud-provider={provider}"],
    }
    meta = {"namespace": "kube-system", "name": "ca", "labels": {"app": "cluster-autoscaler"}}
    return {"metadata": meta, "spec": {"template": {"spec": {"containers": [container]}}}}


def facts(**given: Any) -> Facts:
    base: dict[str, Any] = {"device_classes": CLASSES}
    return Facts(**{**base, **given})


CA_AWS = (
    "Cluster Autoscaler v1.36.1 (kube-system/ca): cannot add DRA nodes: its cloud provider "
    "'aws' predicts no devices for a node group at zero nodes (only clusterapi does, with the "
    "annotation capacity.cluster-autoscaler.kubernetes.io/dra-driver); a group with a DRA node "
    "already publishes devices"
)


def test_autoscaling_warns_when_enabled_pods_have_no_device_and_no_autoscaler_adds_one() -> None:
    enabled = facts(
        namespaces=[namespace("ml", "enabled")],
        pods=[gpu_pod("ml", "p", 1)],
        deployments=[cluster_autoscaler("1.36.1", "aws")],
    )
    assert check_autoscaling(enabled, POLICY) == Verdict(
        "WARN",
        "no device of gpu.nvidia.com is published, which enabled namespaces ml ask for, and no "
        "node autoscaler can add one (1 node autoscaler(s), 0 of them can add DRA nodes)",
        "run the DRA driver on GPU nodes; gpu2dra leaves such pods on the device plugin (policy "
        "noDraCapacity); docs/concepts/capacity.md#node-autoscalers",
        (CA_AWS,),
    )


def test_autoscaling_passes_with_devices_an_able_autoscaler_or_nothing_enabled() -> None:
    pods = [gpu_pod("ml", "p", 1)]
    with_devices = facts(
        namespaces=[namespace("ml", "enabled")],
        pods=pods,
        slices=[gpu_slice("gpu-0")],
        deployments=[cluster_autoscaler("1.36.1", "aws")],
    )
    assert check_autoscaling(with_devices, POLICY) == Verdict(
        "PASS", "1 node autoscaler(s), 0 of them can add DRA nodes", details=(CA_AWS,)
    )
    able = facts(
        namespaces=[namespace("ml", "enabled")],
        pods=pods,
        deployments=[cluster_autoscaler("1.37.0", "clusterapi")],
    )
    assert check_autoscaling(able, POLICY).status == "PASS"
    audit_only = facts(namespaces=[namespace("ml", "audit")], pods=pods)
    assert check_autoscaling(audit_only, POLICY) == Verdict(
        "PASS", "0 node autoscaler(s), 0 of them can add DRA nodes"
    )
    forbidden = ReadError("403")
    assert check_autoscaling(facts(deployments=forbidden), POLICY).status == "WARN"


def test_capacity_warns_when_a_namespace_asks_more_than_is_free() -> None:
    cluster = facts(
        namespaces=[namespace("a", "audit"), namespace("b", "enabled"), namespace("c", "disabled")],
        pods=[gpu_pod("a", "p", 2), gpu_pod("b", "q", 1), gpu_pod("c", "r", 8)],
        slices=[gpu_slice("gpu-0", "gpu-1", "gpu-2")],
        claims=[claim("gpu-0")],
    )
    assert check_capacity(cluster, POLICY) == Verdict(
        "PASS",
        "what enabled and audit namespaces' pods ask fits in free DRA devices",
        details=(
            "a: 2 needed of gpu.nvidia.com devices, 2 free",
            "b: 1 needed of gpu.nvidia.com devices, 2 free",
        ),
    )
    tight = facts(
        namespaces=cluster.namespaces,
        pods=cluster.pods,
        slices=cluster.slices,
        claims=[claim("gpu-0"), claim("gpu-1")],
    )
    assert check_capacity(tight, POLICY) == Verdict(
        "WARN",
        "a needs 1 more gpu.nvidia.com devices",
        "add DRA nodes, or enable fewer namespaces; gpu2dra capacity shows each shape",
        (
            "a: 2 needed of gpu.nvidia.com devices, 1 free",
            "b: 1 needed of gpu.nvidia.com devices, 1 free",
        ),
    )


def test_capacity_with_nothing_planned_or_unreadable() -> None:
    assert check_capacity(facts(), POLICY) == Verdict(
        "PASS", "no GPU pod in an enabled or audit namespace asks for DRA devices"
    )
    forbidden = ReadError("403 forbidden")
    assert check_capacity(facts(claims=forbidden), POLICY).summary == "cannot read: 403 forbidden"

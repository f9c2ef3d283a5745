"""The node autoscalers as their Deployments and nodes say, and which drivers' devices a
DeviceClass selects: the facts capacity.py judges."""

from __future__ import annotations

from typing import Any

import pytest

from app.core import autoscalers
from app.core.autoscalers import NodeGroup
from app.core.catalog import (
    Catalog,
    SliceFacts,
    class_drivers,
    published_by,
    slice_driver,
    slice_facts,
)

Obj = dict[str, Any]


def deployment(
    name: str, image: str, *args: str, labels: Obj | None = None, env: Obj | None = None
) -> Obj:
    main: Obj = {"name": "controller", "image": image, "args": list(args)}
    if env:
        main["env"] = [{"name": k, "value": v} for k, v in env.items()]
    return {
        "metadata": {"name": name, "namespace": "kube-system", "labels": labels or {}},
        "spec": {"template": {"spec": {"containers": [main]}}},
    }


KARPENTER = "public.ecr.aws/karpenter/controller:1.8.1@sha256:abc"
CA = "registry.k8s.io/autoscaling/cluster-autoscaler:v1.37.0"
OLD_CA = "registry.k8s.io/autoscaling/cluster-autoscaler:v1.34.2"


@pytest.mark.parametrize(
    ("objects", "adds", "reason"),
    [
        ([deployment("karpenter", KARPENTER)], False, "ignore-dra-requests is true (its default)"),
        (
            [deployment("karpenter", KARPENTER, env={"IGNORE_DRA_REQUESTS": "false"})],
            False,
            "--ignore-dra-requests=false before v1.14.0 does not simulate claims",
        ),
        (
            # The flag wins over the environment, as Karpenter's BoolVarWithEnv reads them.
            [
                deployment(
                    "karpenter",
                    "public.ecr.aws/karpenter/controller:1.15.0",
                    "--ignore-dra-requests=false",
                    env={"IGNORE_DRA_REQUESTS": "true"},
                )
            ],
            False,
            "which the AWS, Azure and kwok providers do not do",
        ),
        (
            [deployment("karpenter", "public.ecr.aws/karpenter/controller:1.6.2")],
            False,
            "before v1.7.0 Karpenter does not look at claims",
        ),
        (
            [deployment("ca", OLD_CA, "--cloud-provider=clusterapi", "--nodes=0:4:gpu-pool")],
            False,
            "--enable-dynamic-resource-allocation is off",
        ),
        (
            [
                deployment(
                    "ca",
                    OLD_CA,
                    "--cloud-provider=clusterapi",
                    "--enable-dynamic-resource-allocation",
                )
            ],
            False,
            "broken before the fix of kubernetes/autoscaler#10200",
        ),
        (
            [deployment("ca", CA, "--cloud-provider=aws")],
            False,
            "its cloud provider 'aws' predicts no devices",
        ),
        (
            [deployment("ca", CA, "--cloud-provider", "clusterapi")],
            True,
            "clusterapi adds DRA nodes",
        ),
    ],
)
def test_autoscalers_from_their_deployments(objects: list[Obj], adds: bool, reason: str) -> None:
    (found,) = autoscalers.read(objects)
    assert found.adds_dra_nodes is adds
    assert reason in found.reason


def test_autoscaler_records() -> None:
    ca = deployment(
        "cluster-autoscaler",
        "registry.k8s.io/autoscaling/cluster-autoscaler:v1.36.1",
        "--cloud-provider=aws",
        "--nodes=1:10:gpu-a",
        "--nodes=0:3:g5.xlarge:us-east-1:gpu-b",
        labels={"app.kubernetes.io/name": "aws-cluster-autoscaler"},
    )
    others = [deployment("web", "nginx:1.27.0"), ca]
    (found,) = autoscalers.read(others)
    assert found.kind == "cluster-autoscaler" and found.version == (1, 36, 1)
    assert found.provider == "aws"
    assert found.node_groups == (NodeGroup("gpu-a", 1, 10), NodeGroup("gpu-b", 0, 3))
    assert found.shown == "Cluster Autoscaler v1.36.1 (kube-system/cluster-autoscaler)"
    node = {
        "metadata": {
            "labels": {autoscalers.GKE_DRA_LABEL: "true", autoscalers.GKE_POOL_LABEL: "l4-dra"}
        }
    }
    plain = {"metadata": {"labels": {autoscalers.GKE_POOL_LABEL: "default"}}}
    (google,) = autoscalers.read([], [node, plain])
    assert google.kind == "gke" and google.adds_dra_nodes and "l4-dra" in google.reason
    assert autoscalers.read([], [plain]) == ()
    # Both selectors a watch uses are label selectors the API server parses: one key each.
    assert all(" in (" in s for s in autoscalers.SELECTORS)


def device_class(name: str, expression: str) -> Obj:
    return {
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


GPU_CLASS = device_class(
    "gpu.nvidia.com",
    "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'",
)
MIG_CLASS = device_class("mig.nvidia.com", 'device.driver == "gpu.nvidia.com"')


def test_a_class_names_its_drivers() -> None:
    assert class_drivers(GPU_CLASS["spec"]) == {"gpu.nvidia.com"}
    assert class_drivers(MIG_CLASS["spec"]) == {"gpu.nvidia.com"}
    assert class_drivers({"selectors": [{"cel": {"expression": "true"}}]}) == frozenset()
    catalog = Catalog.from_objects([GPU_CLASS, MIG_CLASS])
    assert catalog.drivers["mig.nvidia.com"] == {"gpu.nvidia.com"}
    assert catalog.published is None  # nothing said of slices: unknown
    empty = {"spec": {"driver": "gpu.nvidia.com", "devices": []}}
    assert slice_driver(empty) == "" and slice_driver({"spec": {}}) == ""
    one = {"spec": {"driver": "gpu.nvidia.com", "devices": [{"name": "gpu-0"}]}}
    assert slice_driver(one) == "gpu.nvidia.com"


def test_what_a_watch_cache_keeps() -> None:
    """Of a Deployment, its autoscaler or None; of a slice, its sharing and whether its driver
    publishes a device; the autoscalers in one order, each once, whatever the watch's."""
    assert autoscalers.of(deployment("web", "nginx:1.27.0")) is None
    karpenter = autoscalers.of(deployment("karpenter", KARPENTER))
    ca = autoscalers.of(deployment("ca", CA, "--cloud-provider=clusterapi"))
    assert karpenter is not None and ca is not None
    assert autoscalers.ordered([karpenter, ca, karpenter]) == (ca, karpenter)
    one = {"spec": {"driver": "gpu.nvidia.com", "devices": [{"name": "gpu-0"}]}}
    empty = {"spec": {"driver": "dra.example.com", "devices": []}}
    facts = [slice_facts(one), slice_facts(empty)]
    assert facts[0] == SliceFacts(("", frozenset()), "gpu.nvidia.com")
    assert published_by(facts) == {"gpu.nvidia.com"}

"""Fail closed on capacity: which classes have devices, and what translate() does with a pod
whose claims could not be served or that is pinned to a cloud node pool."""

from __future__ import annotations

import dataclasses
from typing import Any

from app.core import autoscalers
from app.core.autoscalers import Autoscaler
from app.core.capacity import has_devices, pool_terms
from app.core.catalog import Catalog
from app.core.outcomes import Code, codes
from app.core.policy import Policy, parse_policy
from app.core.translate import translate
from tests.support.pods import container, gpu

Obj = dict[str, Any]


def deployment(name: str, image: str, *args: str) -> Obj:
    main: Obj = {"name": "controller", "image": image, "args": list(args)}
    return {
        "metadata": {"name": name, "namespace": "kube-system"},
        "spec": {"template": {"spec": {"containers": [main]}}},
    }


def device_class(name: str, expression: str) -> Obj:
    return {
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


KARPENTER = "public.ecr.aws/karpenter/controller:1.8.1@sha256:abc"
CA = "registry.k8s.io/autoscaling/cluster-autoscaler:v1.37.0"
GPU_CLASS = device_class(
    "gpu.nvidia.com",
    "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'",
)
MIG_CLASS = device_class("mig.nvidia.com", 'device.driver == "gpu.nvidia.com"')


def live(published: frozenset[str], *found: Autoscaler) -> Catalog:
    """A catalog as a cluster's caches would make it."""
    base = Catalog.from_objects([GPU_CLASS, MIG_CLASS])
    return dataclasses.replace(base, published=published, autoscalers=found)


def test_classes_have_devices_by_their_driver() -> None:
    assert has_devices(Catalog.of(["gpu.nvidia.com"]), "gpu.nvidia.com") is None  # offline
    assert has_devices(live(frozenset({"gpu.nvidia.com"})), "gpu.nvidia.com") is True
    assert has_devices(live(frozenset({"dra.example.com"})), "gpu.nvidia.com") is False
    # A class that names no driver has devices when any driver publishes one.
    assert has_devices(live(frozenset({"dra.example.com"})), "custom") is True
    assert has_devices(live(frozenset()), "custom") is False


POD = {"containers": [container("c", gpu(1))]}
KARPENTER_DEFAULT = autoscalers.karpenter(deployment("karpenter", KARPENTER))


def test_no_device_and_no_autoscaler_leaves_the_pod(policy: Policy) -> None:
    result = translate(POD, policy, live(frozenset(), KARPENTER_DEFAULT))
    assert not result.changed
    assert codes(result.warnings) == (Code.NO_DRA_DEVICES,)
    (said,) = result.warnings
    assert said.startswith(
        "no ResourceSlice publishes a device of DeviceClass gpu.nvidia.com (driver "
        "gpu.nvidia.com), and no node autoscaler can add one: Karpenter v1.8.1 "
        "(kube-system/karpenter): --ignore-dra-requests is true (its default)"
    )
    assert said.endswith("or set translate to move such pods)")
    bare = translate(POD, policy, live(frozenset()))
    assert (
        "and no node autoscaler can add one: no node autoscaler found (one that can: a "
        in bare.warnings[0]
    )


def test_devices_or_an_able_autoscaler_translate_as_before(policy: Policy) -> None:
    for catalog in (
        live(frozenset({"gpu.nvidia.com"}), KARPENTER_DEFAULT),
        live(
            frozenset(),
            autoscalers.cluster_autoscaler(deployment("ca", CA, "--cloud-provider=clusterapi")),
        ),
        Catalog.of(policy.device_classes),  # offline: nothing known, nothing said
    ):
        result = translate(POD, policy, catalog)
        assert result.changed and result.warnings == ()


def test_no_dra_capacity_translate_moves_it_and_says_so() -> None:
    policy = parse_policy({"noDraCapacity": "translate"})
    result = translate(POD, policy, live(frozenset(), KARPENTER_DEFAULT))
    assert result.changed
    assert codes(result.warnings) == (Code.NO_DRA_DEVICES_TRANSLATED,)
    assert "translated as the policy's noDraCapacity: translate says" in result.warnings[0]


PINNED = {
    "nodeSelector": {"cloud.google.com/gke-accelerator": "nvidia-l4"},
    "containers": [container("c", gpu(1))],
}


def test_cloud_pool_terms() -> None:
    spec = {
        "nodeSelector": {"karpenter.sh/nodepool": "gpu", "kubernetes.io/os": "linux"},
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {
                                    "key": "karpenter.k8s.aws/instance-gpu-count",
                                    "operator": "Gt",
                                    "values": ["0"],
                                },
                                {
                                    "key": "node.kubernetes.io/instance-type",
                                    "operator": "NotIn",
                                    "values": ["p3.2xlarge"],
                                },
                                {"key": "eks.amazonaws.com/nodegroup", "operator": "Exists"},
                            ]
                        }
                    ]
                }
            }
        },
    }
    assert pool_terms(spec) == (
        "karpenter.sh/nodepool=gpu",
        "karpenter.k8s.aws/instance-gpu-count (Gt 0)",
        "eks.amazonaws.com/nodegroup (Exists)",
    )


def test_a_pod_pinned_to_a_cloud_pool(policy: Policy) -> None:
    catalog = live(frozenset({"gpu.nvidia.com"}))
    left = translate(PINNED, policy, catalog)
    assert not left.changed and codes(left.warnings) == (Code.CLOUD_POOL,)
    assert left.warnings[0].startswith(
        "node label cloud.google.com/gke-accelerator=nvidia-l4 pins the pod to a cloud node pool"
    )
    moved = translate(PINNED, parse_policy({"cloudPools": "translate"}), catalog)
    assert moved.changed and codes(moved.warnings) == (Code.CLOUD_POOL_TRANSLATED,)
    assert moved.spec["nodeSelector"] == PINNED["nodeSelector"]  # the term is kept
    # Offline nothing is known of the pool: translated, and said.
    offline = translate(PINNED, policy, Catalog.of(policy.device_classes))
    assert offline.changed and codes(offline.warnings) == (Code.CLOUD_POOL_TRANSLATED,)
    # A catalog read from a cluster's slices, as the webhook's is, knows it is live: left.
    live_sharing = dataclasses.replace(Catalog.of(policy.device_classes), sharing={})
    assert codes(translate(PINNED, policy, live_sharing).warnings) == (Code.CLOUD_POOL,)


def test_every_reason_is_named(policy: Policy) -> None:
    result = translate(PINNED, policy, live(frozenset()))
    assert codes(result.warnings) == (Code.NO_DRA_DEVICES, Code.CLOUD_POOL)

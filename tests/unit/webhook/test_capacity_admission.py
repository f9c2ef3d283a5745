"""Fail closed on capacity at admission: what /mutate answers for a pod whose claims no node
could take, given a cluster view whose catalog knows the published drivers and autoscalers
(as the webhook's caches will fill it; docs/concepts/capacity.md)."""

from __future__ import annotations

import dataclasses
from typing import Any

from app.core import autoscalers
from app.core.catalog import Catalog
from app.core.outcomes import Code
from app.core.policy import Policy, parse_policy
from app.webhook.mutate import Mutator
from tests.support.fake import FakeCluster
from tests.support.pods import container, gpu
from tests.unit.admission import pod, request, run

Obj = dict[str, Any]

GPU_CLASS = {
    "metadata": {"name": "gpu.nvidia.com"},
    "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}]},
}
KARPENTER = autoscalers.karpenter(
    {
        "metadata": {"name": "karpenter", "namespace": "karpenter"},
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {"name": "controller", "image": "public.ecr.aws/karpenter/controller:1.8.1"}
                    ]
                }
            }
        },
    }
)


def cluster(mode: str, published: frozenset[str], *found: autoscalers.Autoscaler) -> FakeCluster:
    catalog = dataclasses.replace(
        Catalog.from_objects([GPU_CLASS]), published=published, autoscalers=found
    )
    return FakeCluster(catalog=catalog, labels={"ml": {"gpu2dra.io/migration": mode}})


def test_a_pod_with_nowhere_to_run_is_left_with_a_warning(policy: Policy) -> None:
    view = cluster("enabled", frozenset(), KARPENTER)
    answer = run(Mutator(policy)(request(pod()), view))
    assert answer["allowed"] is True and "patch" not in answer
    (warning,) = answer["warnings"]
    assert warning.startswith(
        "no ResourceSlice publishes a device of DeviceClass gpu.nvidia.com (driver "
        "gpu.nvidia.com), and no node autoscaler can add one: Karpenter v1.8.1 "
        "(karpenter/karpenter): --ignore-dra-requests is true (its default): it skips pods "
        "with claims"
    )
    assert "pod left on the device plugin (policy noDraCapacity: leave" in warning
    assert view.created == []  # no template made for a pod left as it is


def test_devices_published_translate_as_before(policy: Policy) -> None:
    view = cluster("enabled", frozenset({"gpu.nvidia.com"}), KARPENTER)
    answer = run(Mutator(policy)(request(pod()), view))
    assert answer["patchType"] == "JSONPatch" and "warnings" not in answer


def test_translate_anyway_says_so() -> None:
    policy = parse_policy({"noDraCapacity": "translate"})
    answer = run(Mutator(policy)(request(pod()), cluster("enabled", frozenset())))
    assert answer["patchType"] == "JSONPatch"
    (warning,) = answer["warnings"]
    assert "no node autoscaler found (one that can:" in warning
    assert warning.endswith("translated as the policy's noDraCapacity: translate says")


def test_audit_names_it_too(policy: Policy) -> None:
    answer = run(Mutator(policy)(request(pod()), cluster("audit", frozenset(), KARPENTER)))
    assert "patch" not in answer
    assert any("noDraCapacity: leave" in w for w in answer["warnings"])


def test_a_pod_pinned_to_a_cloud_pool_is_left(policy: Policy) -> None:
    spec: Obj = {
        "nodeSelector": {"cloud.google.com/gke-nodepool": "gpu-pool"},
        "containers": [container("c", gpu(1))],
    }
    view = cluster("enabled", frozenset({"gpu.nvidia.com"}))
    verdict = Mutator(policy)(request(pod(spec)), view)
    answer = run(verdict)
    assert "patch" not in answer
    assert answer["warnings"][0].startswith(
        "node label cloud.google.com/gke-nodepool=gpu-pool pins the pod to a cloud node pool"
    )
    assert Code.CLOUD_POOL in getattr(verdict, "codes", ())

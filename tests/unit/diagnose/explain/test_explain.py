"""Why a request gets no devices, on hand-made ResourceSlices (the common cases run against
the real scheduler in tests/e2e/test_explain.py)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from app.core.autoscalers import Autoscaler
from app.core.kueue import QUEUE_LABEL, Gate, Kueue
from app.core.policy import load_policy, parse_policy
from app.core.resources import DraRequest
from app.diagnose.explain.allocation import analyse_request
from app.diagnose.explain.explain import explain
from app.diagnose.explain.facts import PodFacts
from app.diagnose.explain.shares import capacity_requests, consumed_capacity
from app.readers.cel.devices import Device, devices_of
from app.readers.client import ReadError
from tests.support.cluster import (
    device_class,
    gpu_devices,
    gpu_resource_slice,
)

Obj = dict[str, Any]

CLASSES = {"gpu.nvidia.com": device_class("gpu.nvidia.com", "gpu")}
# A cluster where gpu.nvidia.com publishes a device: pods are not left for want of one.
PUBLISHED = [gpu_resource_slice("a", gpu_devices("a", gpus=1))]


def nodes(*names: str, gpus: int = 1) -> list[Device]:
    return devices_of([gpu_resource_slice(n, gpu_devices(n, gpus=gpus)) for n in names])


def test_enough_devices_but_not_on_one_node() -> None:
    step = analyse_request(
        DraRequest("gpu", "gpu.nvidia.com", 2, ()),
        claim="ns/c",
        classes=CLASSES,
        devices=nodes("a", "b"),
        owners={},
    )
    assert step.state == "FAIL"
    assert step.text.startswith(
        "request gpu asks for 2 x gpu.nvidia.com: no single node has 2 free matching device(s)"
    )


def test_own_allocation_is_not_another_claims() -> None:
    devices = nodes("a", gpus=2)
    owners = {devices[0].key: "ns/c", devices[1].key: "ns/other"}
    request = DraRequest("gpu", "gpu.nvidia.com", 2, ())
    step = analyse_request(request, claim="ns/c", classes=CLASSES, devices=devices, owners=owners)
    assert "capacity exhausted" in step.text
    assert step.details == (
        "a/gpu-0: matches and is free",
        "a/gpu-1: matches, but allocated to claim ns/other",
    )


def test_missing_class_and_failing_selector() -> None:
    devices = nodes("a")
    missing = analyse_request(
        DraRequest("gpu", "gpu.nvida.com", 1, ()),
        claim="ns/c",
        classes=CLASSES,
        devices=devices,
        owners={},
    )
    assert missing.text.endswith(": DeviceClass gpu.nvida.com does not exist")
    index = "device.attributes['gpu.nvidia.com'].index == 0"
    request = DraRequest("gpu", "gpu.nvidia.com", 1, (index,))
    failing = analyse_request(request, claim="ns/c", classes=CLASSES, devices=devices, owners={})
    assert failing.state == "FAIL"
    assert "the scheduler aborts allocation with a CEL runtime error" in failing.text
    assert failing.details == ("a/gpu-0: selector #1 fails: no such key: index",)


def test_free_devices_point_at_the_scheduler() -> None:
    request = DraRequest("gpu", "gpu.nvidia.com", 1, ())
    step = analyse_request(request, claim="ns/c", classes=CLASSES, devices=nodes("a"), owners={})
    assert step.state == "info"
    assert "1 free on node a is enough: see the scheduler's events" in step.text


def test_claim_not_created_yet_and_gated_pod() -> None:
    template = {
        "metadata": {
            "name": "gpu2dra-gpu-x1-abc",
            "labels": {"app.kubernetes.io/managed-by": "gpu2dra"},
        },
        "spec": {
            "spec": {
                "devices": {
                    "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]
                }
            }
        },
    }
    pod = {
        "metadata": {"name": "p", "namespace": "ml"},
        "spec": {
            "schedulingGates": [{"name": "example.com/wait"}],
            "resourceClaims": [
                {"name": "main-gpu", "resourceClaimTemplateName": "gpu2dra-gpu-x1-abc"}
            ],
            "containers": [{"name": "main", "resources": {"claims": [{"name": "main-gpu"}]}}],
        },
        "status": {"phase": "Pending"},
    }
    facts = PodFacts(
        pod=pod,
        namespace_labels={"gpu2dra.io/migration": "enabled"},
        device_classes=list(CLASSES.values()),
        templates={"gpu2dra-gpu-x1-abc": template},
    )
    result = explain(facts, load_policy(None))
    assert result.headline == "pod ml/p: Pending, not scheduled"
    assert [(s.state, s.text) for s in result.steps] == [
        ("PASS", "translated by gpu2dra: claim(s) main-gpu"),
        (
            "PASS",
            "claim main-gpu: gpu2dra's ResourceClaimTemplate gpu2dra-gpu-x1-abc exists "
            "(1 x gpu.nvidia.com)",
        ),
        (
            "FAIL",
            "claim main-gpu: no ResourceClaim created yet (the resourceclaim controller in "
            "kube-controller-manager creates it from the template)",
        ),
        ("FAIL", "not scheduled: scheduling gates example.com/wait are still set"),
    ]


def test_what_cannot_be_read_is_named_and_not_guessed() -> None:
    """A translated pod whose claim is unallocated, read by someone who may read the pod and
    its claim only: the devices are not judged on an empty list."""
    forbidden = ReadError("403 forbidden")
    pod = {
        "metadata": {"name": "p", "namespace": "ml"},
        "spec": {
            "resourceClaims": [{"name": "main-gpu", "resourceClaimTemplateName": "gpu2dra-t"}],
            "containers": [{"name": "main", "resources": {"claims": [{"name": "main-gpu"}]}}],
        },
        "status": {"resourceClaimStatuses": [{"name": "main-gpu", "resourceClaimName": "p-c"}]},
    }
    claim = {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"count": 1}}]}}}
    facts = PodFacts(
        pod=pod,
        namespace_labels=forbidden,
        device_classes=forbidden,
        templates={"gpu2dra-t": forbidden},
        claim_names={"main-gpu": "p-c"},
        claims={"p-c": claim},
        all_claims=forbidden,
        slices=forbidden,
        events=forbidden,
    )
    steps = [(s.state, s.text) for s in explain(facts, load_policy(None)).steps]
    assert steps == [
        ("PASS", "translated by gpu2dra: claim(s) main-gpu"),
        ("WARN", "cannot read claim main-gpu's ResourceClaimTemplate: 403 forbidden"),
        ("FAIL", "claim main-gpu: ResourceClaim p-c is not allocated"),
        ("WARN", "cannot read DeviceClasses, so no device is checked: 403 forbidden"),
        ("FAIL", "not scheduled yet: the scheduler has not judged it (is it running?)"),
        ("WARN", "cannot read the pod's events: 403 forbidden"),
    ]


SERVED_GPU = {
    "metadata": {"name": "gpu.nvidia.com"},
    "spec": {**CLASSES["gpu.nvidia.com"]["spec"], "extendedResourceName": "nvidia.com/gpu"},
}


def legacy_pod(**status: Any) -> Obj:
    return {
        "metadata": {"name": "p", "namespace": "ml"},
        "spec": {
            "containers": [
                {"name": "main", "resources": {"limits": {"nvidia.com/gpu": 2}}},
            ]
        },
        "status": {"phase": "Pending", **status},
    }


def test_the_in_tree_path_is_followed_before_binding() -> None:
    """A pod gpu2dra leaves alone where a DeviceClass serves nvidia.com/gpu in-tree: not the
    device plugin; the devices the scheduler would choose from are judged."""
    facts = PodFacts(
        pod=legacy_pod(),
        namespace_labels={},
        device_classes=[SERVED_GPU],
        slices=[gpu_resource_slice("a", gpu_devices("a", gpus=1))],
    )
    steps = [(s.state, s.text) for s in explain(facts, load_policy(None)).steps]
    assert steps[:3] == [
        (
            "info",
            "not translated (2 x nvidia.com/gpu): namespace ml is in mode disabled (no label: "
            "the default mode); it is served in-tree",
        ),
        (
            "info",
            "in-tree (nvidia.com/gpu by DeviceClass gpu.nvidia.com): the scheduler makes the "
            "pod's extended resource claim when it binds the pod",
        ),
        (
            "FAIL",
            "request nvidia-com-gpu asks for 2 x gpu.nvidia.com: only 1 device(s) match the "
            "request's selectors; 1 device(s) in the class, 1 match the selectors, 0 of those "
            "are allocated to other claims",
        ),
    ]


def test_the_extended_resource_claim_is_read() -> None:
    claim = {
        "metadata": {"name": "p-extended-resources-x7k2"},
        "status": {
            "allocation": {
                "devices": {
                    "results": [{"pool": "a", "device": "gpu-0"}, {"pool": "a", "device": "gpu-1"}]
                }
            }
        },
    }
    status = {"extendedResourceClaimStatus": {"resourceClaimName": "p-extended-resources-x7k2"}}
    facts = PodFacts(
        pod=legacy_pod(**status),
        namespace_labels={"gpu2dra.io/migration": "enabled"},
        device_classes=[SERVED_GPU],
        claims={"p-extended-resources-x7k2": claim},
    )
    steps = [(s.state, s.text) for s in explain(facts, load_policy(None)).steps]
    assert steps[:2] == [
        (
            "info",
            "not translated (2 x nvidia.com/gpu): gpu2dra leaves it to the in-tree path "
            "(nvidia.com/gpu is served in-tree by DeviceClass gpu.nvidia.com)",
        ),
        (
            "PASS",
            "extended resource claim p-extended-resources-x7k2 (made by the scheduler, "
            "nvidia.com/gpu by DeviceClass gpu.nvidia.com) allocated: a/gpu-0, a/gpu-1",
        ),
    ]


# The resourceclaim controller's event, as kube-controller-manager 1.35 words it.
REFUSED = (
    "PodResourceClaim main-gpu: create ResourceClaim : resourceclaims.resource.k8s.io "
    '"p-main-gpu-7d78q" is forbidden: exceeded quota: gpu2dra-dra-gpus, requested: '
    "gpu.nvidia.com.deviceclass.resource.k8s.io/devices=1, used: "
    "gpu.nvidia.com.deviceclass.resource.k8s.io/devices=2, limited: "
    "gpu.nvidia.com.deviceclass.resource.k8s.io/devices=2"
)


def test_a_claim_refused_over_quota_is_said_plainly() -> None:
    pod = {
        "metadata": {"name": "p", "namespace": "ml"},
        "spec": {
            "resourceClaims": [{"name": "main-gpu", "resourceClaimTemplateName": "gpu2dra-t"}],
            "containers": [{"name": "main", "resources": {"claims": [{"name": "main-gpu"}]}}],
        },
        "status": {"phase": "Pending"},
    }
    event = {
        "type": "Warning",
        "reason": "FailedResourceClaimCreation",
        "message": f"(combined from similar events): {REFUSED}",
        "lastTimestamp": "2026-12-01T07:40:00Z",
    }
    template: dict[str, Any] = {"spec": {"spec": {"devices": {"requests": []}}}}
    facts = PodFacts(
        pod=pod,
        namespace_labels={"gpu2dra.io/migration": "enabled"},
        device_classes=list(CLASSES.values()),
        templates={"gpu2dra-t": template},
        events=[event],
    )
    steps = explain(facts, load_policy(None)).steps
    refused = steps[2]
    assert refused.state == "FAIL"
    assert refused.text.startswith(
        "claim main-gpu: no ResourceClaim: the namespace's ResourceQuota refuses it "
        "(exceeded quota: gpu2dra-dra-gpus, requested: "
    )
    assert refused.text.endswith("; the pod waits until the quota has room")
    assert (steps[3].state, steps[3].text) == (
        "FAIL",
        "not scheduled: the scheduler waits until its claims exist",
    )


def test_a_pod_left_under_its_legacy_quota_is_explained() -> None:
    pod = {
        "metadata": {"name": "p", "namespace": "ml"},
        "spec": {"containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": 1}}}]},
    }
    quota = {"metadata": {"name": "gpus"}, "spec": {"hard": {"requests.nvidia.com/gpu": "2"}}}
    facts = PodFacts(
        pod=pod,
        namespace_labels={"gpu2dra.io/migration": "enabled"},
        device_classes=list(CLASSES.values()),
        quotas=[quota],
        slices=PUBLISHED,
    )
    first = explain(facts, load_policy(None)).steps[0]
    assert first.state == "info"
    assert first.text.startswith(
        "not translated (1 x nvidia.com/gpu): gpu2dra left the pod on the device plugin, under "
        "its quota: ResourceQuota gpus limits requests.nvidia.com/gpu"
    )
    assert first.text.endswith("gpu2dra quota -n ml | kubectl apply -f -")


def test_a_pending_translated_pod_that_could_preempt_is_told_it_cannot() -> None:
    template = {
        "metadata": {"name": "gpu2dra-gpu-x1-abc"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {}}]}}},
    }
    claims = [{"name": "main-gpu", "resourceClaimTemplateName": "gpu2dra-gpu-x1-abc"}]
    spec: Obj = {
        "priorityClassName": "high",
        "preemptionPolicy": "PreemptLowerPriority",
        "resourceClaims": claims,
        "containers": [{"name": "main", "resources": {"claims": [{"name": "main-gpu"}]}}],
    }
    facts = PodFacts(
        pod={"metadata": {"name": "p", "namespace": "ml"}, "spec": spec, "status": {}},
        namespace_labels={"gpu2dra.io/migration": "enabled"},
        device_classes=list(CLASSES.values()),
        templates={"gpu2dra-gpu-x1-abc": template},
    )
    said = "priorityClassName high can preempt, but the scheduler does not preempt for DRA claims"
    steps = explain(facts, load_policy(None)).steps
    assert steps[-1].state == "info" and steps[-1].text.startswith(said)
    never = {**spec, "preemptionPolicy": "Never"}
    quiet = explain(replace(facts, pod={**facts.pod, "spec": never}), load_policy(None)).steps
    assert not any("preempt" in s.text for s in quiet)


def _claimed_pod() -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "namespace": "ml"},
        "spec": {
            "resourceClaims": [{"name": "main-gpu", "resourceClaimTemplateName": "gpu2dra-t"}],
            "containers": [{"name": "main", "resources": {"claims": [{"name": "main-gpu"}]}}],
        },
        "status": {"phase": "Pending"},
    }


def test_a_template_gone_after_admission_is_explained_with_the_controllers_event() -> None:
    message = (
        'PodResourceClaim main-gpu: resource claim template "gpu2dra-t": '
        'resourceclaimtemplate.resource.k8s.io "gpu2dra-t" not found'
    )
    event = {"type": "Warning", "reason": "FailedResourceClaimCreation", "message": message}
    facts = PodFacts(
        pod=_claimed_pod(),
        namespace_labels={"gpu2dra.io/migration": "enabled"},
        device_classes=list(CLASSES.values()),
        templates={"gpu2dra-t": None},
        events=[event],
    )
    step = explain(facts, load_policy(None)).steps[1]
    assert (step.state, step.text) == (
        "FAIL",
        "claim main-gpu: gpu2dra's ResourceClaimTemplate ml/gpu2dra-t is missing: no "
        "ResourceClaim can be made (FailedResourceClaimCreation)",
    )
    assert step.details[0] == f"kube-controller-manager: {message}"
    assert "gpu2dra makes the template again for the new pod" in step.details[1]


def test_a_template_under_gpu2dras_name_without_its_label_is_flagged() -> None:
    template = {"metadata": {"name": "gpu2dra-t"}, "spec": {"spec": {"devices": {"requests": []}}}}
    facts = PodFacts(
        pod=_claimed_pod(),
        namespace_labels={"gpu2dra.io/migration": "enabled"},
        device_classes=list(CLASSES.values()),
        templates={"gpu2dra-t": template},
    )
    step = explain(facts, load_policy(None)).steps[1]
    assert step.state == "WARN" and "gpu2dra did not make it" in step.text


def test_a_queued_pod_kueue_would_not_count_is_explained() -> None:
    pod = {
        "metadata": {"name": "p", "namespace": "ml", "labels": {QUEUE_LABEL: "team-a"}},
        "spec": {"containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": 1}}}]},
    }
    off = Kueue((0, 17), Gate("DynamicResourceAllocation", False, "its default"), ("pod",))
    facts = PodFacts(
        pod=pod,
        namespace_labels={"gpu2dra.io/migration": "enabled"},
        device_classes=list(CLASSES.values()),
        kueue=off,
        slices=PUBLISHED,
    )
    first = explain(facts, load_policy(None)).steps[0]
    assert first.state == "info"
    assert first.text.startswith("not translated (1 x nvidia.com/gpu): queued by Kueue v0.17 ")
    assert "pod left on the device plugin, where the queue counts it" in first.text
    unreadable = explain(
        PodFacts(
            pod=pod,
            namespace_labels={"gpu2dra.io/migration": "enabled"},
            device_classes=list(CLASSES.values()),
            kueue=ReadError("GET ...: 403 forbidden"),
            slices=PUBLISHED,
        ),
        load_policy(None),
    ).steps[0]
    assert unreadable.state == "WARN" and "Kueue's ConfigMap and Deployment" in unreadable.text


def _held(workload: Obj | ReadError | None) -> str:
    pod = {
        "metadata": {"name": "p", "namespace": "ml", "uid": "u1", "labels": {QUEUE_LABEL: "q"}},
        "spec": {
            "containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": 1}}}],
            "schedulingGates": [{"name": "kueue.x-k8s.io/admission"}],
        },
    }
    facts = PodFacts(
        pod=pod,
        namespace_labels={"gpu2dra.io/migration": "disabled"},
        device_classes=list(CLASSES.values()),
        workload=workload,
    )
    (step,) = [s for s in explain(facts, load_policy(None)).steps if "scheduled" in s.text]
    assert step.state == "FAIL"
    return step.text


def test_a_pod_kueue_holds_is_explained_by_its_workload() -> None:
    full = "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu"
    workload = {
        "metadata": {"name": "pod-p-1a2b3"},
        "status": {
            "conditions": [
                {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": full}
            ]
        },
    }
    held = "not scheduled: Kueue holds it (scheduling gate kueue.x-k8s.io/admission)"
    assert _held(workload) == f"{held}: Workload pod-p-1a2b3: {full}"
    assert _held(None) == f"{held}: no Workload of it yet (is Kueue's manager running?)"
    assert _held(ReadError("forbidden")) == held


def test_a_pod_on_shared_gpus_is_judged_by_what_the_cluster_shares() -> None:
    """As admission does: with no shared device published the pod stays, saying what to
    configure; with one it would have moved (so only a webhook that missed it explains it)."""
    policy = parse_policy(
        {"mappings": {"nvidia.com/gpu": {"deviceClassName": "gpu.nvidia.com", "consumable": {}}}}
    )
    pod = {
        "metadata": {"name": "p", "namespace": "ml"},
        "spec": {
            "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-SHARED"},
            "containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": 1}}}],
        },
    }

    def first(slices: list[Obj] | ReadError) -> Any:
        facts = PodFacts(
            pod=pod,
            namespace_labels={"gpu2dra.io/migration": "enabled"},
            device_classes=list(CLASSES.values()),
            slices=slices,
        )
        return next(s for s in explain(facts, policy).steps if "not translated" in s.text)

    plain = first([gpu_resource_slice("a", gpu_devices("a"))])
    assert plain.text.startswith("not translated (1 x nvidia.com/gpu): gpu2dra leaves this pod")
    assert any("--consumable-shares" in d for d in plain.details), plain.details
    shared = gpu_resource_slice("a", gpu_devices("a", consumable="4"))
    assert "although namespace ml is enabled" in first([shared]).text
    assert "although namespace ml is enabled" in first(ReadError("forbidden")).text


def test_a_memory_fraction_under_a_memory_quota_is_explained_by_it() -> None:
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
    limits = {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 4000}
    pod = {
        "metadata": {"name": "p", "namespace": "ml"},
        "spec": {"containers": [{"name": "main", "resources": {"limits": limits}}]},
    }
    quota = {
        "metadata": {"name": "mem", "namespace": "ml"},
        "spec": {"hard": {"requests.nvidia.com/gpumem": "8000"}},
    }
    shared = gpu_resource_slice("a", gpu_devices("a", consumable="memory"))
    facts = PodFacts(
        pod=pod,
        namespace_labels={"gpu2dra.io/migration": "enabled"},
        device_classes=list(CLASSES.values()),
        slices=[shared],
        quotas=[quota],
    )
    step = explain(facts, policy).steps[0]
    assert step.text.startswith("not translated (1 x nvidia.com/gpu")
    assert "limits requests.nvidia.com/gpumem, which becomes DRA consumable capacity" in step.text


def shared_gpu(option: str = "4") -> list[Device]:
    return devices_of([gpu_resource_slice("a", gpu_devices("a", consumable=option))])


def allocated(name: str, **consumed: str) -> Obj:
    result = {"driver": "gpu.nvidia.com", "pool": "a", "device": "gpu-0", "request": "gpu"}
    return {
        "metadata": {"namespace": "ns", "name": name},
        "status": {
            "allocation": {"devices": {"results": [{**result, "consumedCapacity": consumed}]}}
        },
    }


def test_a_shared_device_counts_the_capacity_other_claims_consumed() -> None:
    claims = [allocated(f"c{i}", shares="1") for i in range(4)] + [allocated("ns-c", shares="1")]
    consumed = consumed_capacity(claims, but="ns/c0")
    devices = shared_gpu()
    assert consumed == {("gpu.nvidia.com", "a", "gpu-0"): {"shares": 4}}
    request = DraRequest("gpu", "gpu.nvidia.com", 1, ())
    full = analyse_request(
        request, claim="ns/c0", classes=CLASSES, devices=devices, owners={}, consumed=consumed
    )
    assert full.state == "FAIL"
    assert full.text.startswith(
        "request gpu asks for 1 x gpu.nvidia.com: capacity exhausted: the matching devices are "
        "allocated to other claims, or their shared capacity is consumed;"
    )
    assert full.details == (
        "a/gpu-0: matches and is shared, but 4 of its 4 shares consumed by other claims, "
        "this request needs 1",
    )
    room = consumed_capacity(claims[:3], but="ns/c0")
    fits = analyse_request(
        request, claim="ns/c0", classes=CLASSES, devices=devices, owners={}, consumed=room
    )
    assert (fits.state, fits.details) == ("info", ("a/gpu-0: matches and is shared, with room",))


def test_a_memory_fraction_is_rounded_up_to_the_drivers_step() -> None:
    devices = shared_gpu("memory")
    used = consumed_capacity([allocated("c1", memory="30000Mi")], but="ns/c")
    request = DraRequest("gpu", "gpu.nvidia.com", 1, ())
    step = analyse_request(
        request,
        claim="ns/c",
        classes=CLASSES,
        devices=devices,
        owners={},
        wants={"memory": "11000Mi"},
        consumed=used,
    )
    assert step.details == (
        "a/gpu-0: matches and is shared, but 30000Mi of its 40960Mi memory consumed by other "
        "claims, this request needs 11000Mi",
    )
    asked = {
        "spec": {
            "devices": {
                "requests": [
                    {"name": "gpu", "exactly": {"capacity": {"requests": {"memory": "10000Mi"}}}}
                ]
            }
        }
    }
    assert capacity_requests(asked, "gpu") == {"memory": "10000Mi"}
    assert capacity_requests(asked, "other") == {}


def test_a_shared_pod_refused_with_room_left_names_the_schedulers_double_count() -> None:
    """The 1.37 scheduler can count a claim it is allocating twice on a shared device and
    parks the pod for 5 minutes: explain says so when the device has room."""
    room = consumed_capacity([allocated(f"c{i}", shares="1") for i in range(3)], but="ns/c")
    request = DraRequest("gpu", "gpu.nvidia.com", 1, ())
    refused = "0/1 nodes are available: 1 cannot allocate all claims. preemption: ..."
    step = analyse_request(
        request,
        claim="ns/c",
        classes=CLASSES,
        devices=shared_gpu(),
        owners={},
        consumed=room,
        refused=refused,
    )
    assert step.state == "WARN"
    assert step.text == (
        "request gpu asks for 1 x gpu.nvidia.com: 1 device(s) in the class, 1 match the "
        "selectors, 0 of those are allocated to other claims; 1 on node a have room, yet the "
        "scheduler refused the pod (cannot allocate all claims): it can count a claim it is "
        "allocating twice on a shared device, and then tries the pod again only after 5 "
        "minutes (kube-scheduler --pod-max-in-unschedulable-pods-duration)"
    )
    assert step.details[-1] == "docs/concepts/sharing.md#a-pod-refused-the-last-share"
    exclusive = analyse_request(
        request, claim="ns/c", classes=CLASSES, devices=nodes("a"), owners={}, refused=refused
    )
    assert exclusive.state == "info", "only consumed capacity is counted twice"


KARPENTER = Autoscaler(
    "karpenter", (1, 15, 0), False, "--ignore-dra-requests is true (its default)", "kube-system/k"
)


def test_a_pod_left_for_want_of_dra_devices_is_explained() -> None:
    pod = {
        "metadata": {"name": "p", "namespace": "ml"},
        "spec": {"containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": 1}}}]},
    }
    facts = PodFacts(
        pod=pod,
        namespace_labels={"gpu2dra.io/migration": "enabled"},
        device_classes=list(CLASSES.values()),
        slices=[],
        autoscalers=(KARPENTER,),
    )
    first = explain(facts, load_policy(None)).steps[0]
    assert (first.state, first.text) == (
        "FAIL",
        "not translated (1 x nvidia.com/gpu): gpu2dra leaves this pod as it is",
    )
    assert first.details[0].startswith(
        "no ResourceSlice publishes a device of DeviceClass gpu.nvidia.com (driver "
        "gpu.nvidia.com), and no node autoscaler can add one: Karpenter v1.15.0 (kube-system/k): "
        "--ignore-dra-requests is true (its default)"
    )
    unreadable = replace(facts, autoscalers=ReadError("GET ...: 403 forbidden"))
    note = explain(unreadable, load_policy(None)).steps[0]
    assert note.state == "WARN" and "the node autoscalers' Deployments" in note.text


def _waiting(events: list[Obj], found: tuple[Autoscaler, ...] | ReadError) -> list[Any]:
    claims = [{"name": "main-gpu", "resourceClaimTemplateName": "gpu2dra-gpu-x1-abc"}]
    pod = {
        "metadata": {"name": "p", "namespace": "ml"},
        "spec": {
            "resourceClaims": claims,
            "containers": [{"name": "main", "resources": {"claims": [{"name": "main-gpu"}]}}],
        },
        "status": {
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": "0/1 nodes are available: 1 cannot allocate all claims.",
                }
            ]
        },
    }
    facts = PodFacts(
        pod=pod,
        namespace_labels={"gpu2dra.io/migration": "enabled"},
        device_classes=list(CLASSES.values()),
        events=events,
        autoscalers=found,
    )
    steps = explain(facts, load_policy(None)).steps
    return [(s.state, s.text, s.details) for s in steps[-2:]]


def test_a_pending_translated_pod_names_what_the_autoscalers_said() -> None:
    skipped = {
        "type": "Warning",
        "reason": "FailedScheduling",
        "source": {"component": "karpenter"},
        "message": "Failed to schedule pod, pod has Dynamic Resource Allocation requirements "
        "that are not yet supported by Karpenter",
    }
    said, able = _waiting([skipped], (KARPENTER,))
    assert said[:2] == (
        "FAIL",
        "Karpenter adds no node for it: Failed to schedule pod, pod has Dynamic Resource "
        "Allocation requirements that are not yet supported by Karpenter",
    )
    assert said[2][0].startswith("Karpenter adds nodes for pods with claims only with ")
    assert able == (
        "WARN",
        "no node autoscaler can add a node with DRA devices for it",
        ("Karpenter v1.15.0 (kube-system/k): --ignore-dra-requests is true (its default)",),
    )


def test_a_pending_translated_pod_with_no_autoscaler_or_a_scale_up() -> None:
    assert _waiting([], ())[-1] == ("info", "no node autoscaler found: no node is added for it", ())
    scaled = {
        "reason": "TriggeredScaleUp",
        "source": {"component": "cluster-autoscaler"},
        "message": "pod triggered scale-up: [{gpu-pool 0->1 (max: 4)}]",
    }
    refused = {**scaled, "reason": "NotTriggerScaleUp", "message": "pod didn't trigger scale-up"}
    said, _ = _waiting([refused, scaled], ())
    assert said == (
        "info",
        "Cluster Autoscaler is adding a node for it: pod triggered scale-up: "
        "[{gpu-pool 0->1 (max: 4)}]",
        (),
    )
    said, _ = _waiting([scaled, refused], ())
    assert said[:2] == (
        "FAIL",
        "Cluster Autoscaler adds no node for it: pod didn't trigger scale-up",
    )
    unread = _waiting([], ReadError("GET ...: 403 forbidden"))[-1]
    assert unread[0] == "WARN" and "the node autoscalers' Deployments" in unread[1]

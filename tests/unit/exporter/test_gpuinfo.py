"""Which pod holds which GPU: pods, claims and ResourceSlices as the API server stores them,
joined into the rows of gpu2dra_pod_gpu_info."""

from __future__ import annotations

from typing import Any

from app.exporter.gpuinfo import (
    LABELS,
    ClaimDevices,
    Identity,
    Result,
    Row,
    SliceDevices,
    Use,
    claim_devices,
    device_index,
    pod_gpus,
    rows,
    slice_devices,
)

Obj = dict[str, Any]
DRIVER = "gpu.nvidia.com"
GPU0 = "GPU-8b1f0d2e-0000-4000-8000-000000000000"
GPU1 = "GPU-8b1f0d2e-0000-4000-8000-000000000001"
MIG = "MIG-3c1d7a52-0000-4000-8000-000000000000"


def translated_pod(**status: Any) -> Obj:
    """A pod as gpu2dra translates it: an init container reusing the trainer's claim."""
    return {
        "metadata": {"namespace": "ml", "name": "train", "uid": "u-1"},
        "spec": {
            "nodeName": "node-a",
            "initContainers": [{"name": "warmup", "resources": {"claims": [{"name": "gpu"}]}}],
            "containers": [
                {"name": "trainer", "resources": {"claims": [{"name": "gpu"}]}},
                {"name": "sidecar"},
            ],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu2dra-gpu-x2-a"}],
        },
        "status": {
            "phase": "Running",
            "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "train-gpu-x7k2"}],
            **status,
        },
    }


def claim(name: str, results: list[Obj], **meta: Any) -> Obj:
    return {
        "metadata": {"namespace": "ml", "name": name, **meta},
        "spec": {
            "devices": {
                "requests": [
                    {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2}},
                    {
                        "name": "any",
                        "firstAvailable": [
                            {"name": "mig", "deviceClassName": "mig.nvidia.com"},
                            {"name": "whole", "deviceClassName": "gpu.nvidia.com"},
                        ],
                    },
                ]
            }
        },
        "status": {"allocation": {"devices": {"results": results}}},
    }


def result(request: str, device: str, pool: str = "node-a", driver: str = DRIVER) -> Obj:
    return {"request": request, "driver": driver, "pool": pool, "device": device}


def resource_slice(devices: list[Obj], generation: int = 1, pool: str = "node-a") -> Obj:
    return {
        "spec": {
            "driver": DRIVER,
            "nodeName": pool,
            "pool": {"name": pool, "generation": generation, "resourceSliceCount": 1},
            "devices": devices,
        }
    }


def gpu(name: str, uuid: str) -> Obj:
    return {"name": name, "attributes": {"type": {"string": "gpu"}, "uuid": {"string": uuid}}}


def mig(name: str) -> Obj:
    return {
        "name": name,
        "attributes": {
            "type": {"string": "mig"},
            "uuid": {"string": MIG},
            "parentUUID": {"string": GPU1},
            "profile": {"string": "1g.5gb"},
        },
    }


SLICE = resource_slice([gpu("gpu-0", GPU0), mig("gpu-1-mig-1g5gb-19-0")])
GPU2DRA = {"labels": {"app.kubernetes.io/managed-by": "gpu2dra"}}


def test_a_translated_pod_names_its_claim_for_each_container_that_uses_it() -> None:
    found = pod_gpus(translated_pod())
    assert found is not None
    assert (found.namespace, found.name, found.uid, found.node) == ("ml", "train", "u-1", "node-a")
    assert found.uses == (
        Use("warmup", "train-gpu-x7k2", "", gpu2dra=True),
        Use("trainer", "train-gpu-x7k2", "", gpu2dra=True),
    )


def test_a_claim_made_from_gpu2dras_template_is_gpu2dras_whatever_its_labels() -> None:
    """The resourceclaim controller copies the template's spec.metadata, not the labels of
    the template object: the pod's template name says whose the claim is."""
    pod = pod_gpus(translated_pod())
    assert pod is not None
    unlabelled = {("ml", "train-gpu-x7k2"): claim_devices(claim("c", [result("gpu", "gpu-0")]))}
    assert {r.path for r in rows([pod], unlabelled, index(SLICE), {DRIVER})} == {"gpu2dra"}
    other = translated_pod()
    other["spec"]["resourceClaims"][0]["resourceClaimTemplateName"] = "team-gpus"
    theirs = pod_gpus(other)
    assert theirs is not None
    assert {r.path for r in rows([theirs], unlabelled, index(SLICE), {DRIVER})} == {"dra"}


def test_pods_that_hold_no_device_are_not_kept() -> None:
    unbound = translated_pod()
    del unbound["spec"]["nodeName"]
    assert pod_gpus(unbound) is None
    assert pod_gpus(translated_pod(phase="Succeeded")) is None
    assert pod_gpus(translated_pod(phase="Failed")) is None
    # bound, its containers not started yet: it holds the devices already
    assert pod_gpus(translated_pod(phase="Pending")) is not None
    # the template's claim not made yet: nothing to name
    assert pod_gpus(translated_pod(resourceClaimStatuses=[])) is None
    legacy = {"metadata": {"name": "p"}, "spec": {"nodeName": "n", "containers": [{"name": "c"}]}}
    assert pod_gpus(legacy) is None


def test_a_claim_by_name_one_request_and_a_claim_no_container_names() -> None:
    pod = {
        "metadata": {"namespace": "ml", "name": "p", "uid": "u"},
        "spec": {
            "nodeName": "n",
            "containers": [
                {"name": "a", "resources": {"claims": [{"name": "shared", "request": "gpu"}]}}
            ],
            "resourceClaims": [
                {"name": "shared", "resourceClaimName": "team-gpus"},
                {"name": "spare", "resourceClaimName": "spare-gpus"},
            ],
        },
    }
    found = pod_gpus(pod)
    assert found is not None
    assert found.uses == (Use("a", "team-gpus", "gpu"), Use("", "spare-gpus", ""))


def test_the_in_tree_claim_maps_containers_to_requests() -> None:
    pod = {
        "metadata": {"namespace": "ml", "name": "infer", "uid": "u-2"},
        "spec": {"nodeName": "node-a", "containers": [{"name": "server"}, {"name": "tok"}]},
        "status": {
            "phase": "Running",
            "extendedResourceClaimStatus": {
                "resourceClaimName": "infer-extended-resources-abcde",
                "requestMappings": [
                    {
                        "containerName": "server",
                        "resourceName": "nvidia.com/gpu",
                        "requestName": "container-0-request-0",
                    },
                    {
                        "containerName": "tok",
                        "resourceName": "nvidia.com/gpu",
                        "requestName": "container-1-request-0",
                    },
                ],
            },
        },
    }
    found = pod_gpus(pod)
    assert found is not None
    assert found.uses == (
        Use("server", "infer-extended-resources-abcde", "container-0-request-0"),
        Use("tok", "infer-extended-resources-abcde", "container-1-request-0"),
    )


def test_a_claim_says_how_it_was_made_and_the_class_of_each_device() -> None:
    made = claim_devices(
        claim("c", [result("gpu", "gpu-0"), result("any/mig", "gpu-1-mig-1g5gb-19-0")], **GPU2DRA)
    )
    assert made == ClaimDevices(
        "gpu2dra",
        (
            Result("gpu", DRIVER, "node-a", "gpu-0", "gpu.nvidia.com"),
            Result("any/mig", DRIVER, "node-a", "gpu-1-mig-1g5gb-19-0", "mig.nvidia.com"),
        ),
    )
    extended = claim(
        "e", [], annotations={"resource.kubernetes.io/extended-resource-claim": "true"}
    )
    assert claim_devices(extended).path == "in-tree"
    assert claim_devices(claim("n", [])).path == "dra"
    unallocated = claim("u", [])
    del unallocated["status"]
    assert claim_devices(unallocated).results == ()


def test_a_slice_tells_whole_gpus_from_mig_devices() -> None:
    found = slice_devices(SLICE)
    assert (found.driver, found.pool, found.generation) == (DRIVER, "node-a", 1)
    assert found.devices == {
        "gpu-0": Identity(GPU0, "", ""),
        "gpu-1-mig-1g5gb-19-0": Identity(GPU1, MIG, "1g.5gb"),
    }
    qualified = resource_slice(
        [{"name": "gpu-0", "attributes": {f"{DRIVER}/uuid": {"string": GPU0}}}]
    )
    assert slice_devices(qualified).devices == {"gpu-0": Identity(GPU0, "", "")}
    assert slice_devices(resource_slice([{"name": "gpu-0"}])).devices == {
        "gpu-0": Identity("", "", "")
    }


def test_a_pool_being_republished_is_read_from_its_newest_generation() -> None:
    old = slice_devices(resource_slice([gpu("gpu-0", "GPU-old")], generation=1))
    new = slice_devices(resource_slice([gpu("gpu-0", GPU0)], generation=2))
    assert device_index([new, old]) == {(DRIVER, "node-a", "gpu-0"): Identity(GPU0, "", "")}
    assert device_index([old, new]) == {(DRIVER, "node-a", "gpu-0"): Identity(GPU0, "", "")}


def index(*slices: Obj) -> dict[tuple[str, str, str], Identity]:
    return device_index(slice_devices(s) for s in slices)


def test_rows_join_pods_claims_and_slices() -> None:
    pod = pod_gpus(translated_pod())
    assert pod is not None
    claims = {
        ("ml", "train-gpu-x7k2"): claim_devices(
            claim(
                "train-gpu-x7k2",
                [result("gpu", "gpu-0"), result("any/mig", "gpu-1-mig-1g5gb-19-0")],
                **GPU2DRA,
            )
        )
    }
    found = rows([pod], claims, index(SLICE), {DRIVER})
    head = ("ml", "train", "u-1")
    claimed = ("node-a", "gpu2dra", "train-gpu-x7k2")
    whole = ("gpu", "gpu.nvidia.com", DRIVER, "node-a", "gpu-0", GPU0, "", "")
    part = (
        "any/mig",
        "mig.nvidia.com",
        DRIVER,
        "node-a",
        "gpu-1-mig-1g5gb-19-0",
        GPU1,
        MIG,
        "1g.5gb",
    )
    assert found == [
        Row(*head, "warmup", *claimed, *whole),
        Row(*head, "warmup", *claimed, *part),
        Row(*head, "trainer", *claimed, *whole),
        Row(*head, "trainer", *claimed, *part),
    ]
    assert LABELS[12] == "UUID"


def test_a_request_picks_its_devices_and_a_subrequest_counts_as_its_request() -> None:
    pod = pod_gpus(translated_pod())
    assert pod is not None
    pod = type(pod)(pod.namespace, pod.name, pod.uid, pod.node, (Use("trainer", "c", "any"),))
    claims = {
        ("ml", "c"): claim_devices(
            claim("c", [result("gpu", "gpu-0"), result("any/mig", "gpu-1-mig-1g5gb-19-0")])
        )
    }
    (row,) = rows([pod], claims, index(SLICE), {DRIVER})
    assert (row.request, row.device, row.UUID, row.mig_uuid) == (
        "any/mig",
        "gpu-1-mig-1g5gb-19-0",
        GPU1,
        MIG,
    )
    assert row.path == "dra"


def test_other_drivers_missing_claims_and_unpublished_devices() -> None:
    pod = pod_gpus(translated_pod())
    assert pod is not None
    nic = result("gpu", "eth-0", driver="nic.example.com")
    gone = result("gpu", "gpu-7")
    claims = {("ml", "train-gpu-x7k2"): claim_devices(claim("train-gpu-x7k2", [nic, gone]))}
    found = rows([pod], claims, index(SLICE), {DRIVER})
    assert [(r.container, r.device, r.UUID) for r in found] == [
        ("warmup", "gpu-7", ""),
        ("trainer", "gpu-7", ""),
    ]
    assert rows([pod], {}, index(SLICE), {DRIVER}) == []
    # an allocation results list the same device twice for one container: one series
    twice = {
        ("ml", "train-gpu-x7k2"): ClaimDevices(
            "dra", (Result("gpu", DRIVER, "node-a", "gpu-0", "g"),) * 2
        )
    }
    assert len(rows([pod], twice, index(SLICE), {DRIVER})) == 2


def test_slices_in_an_odd_shape_are_read_without_a_crash() -> None:
    assert slice_devices({}) == SliceDevices("", "", 0, {})
    assert slice_devices({"spec": {"devices": ["x", {"name": "d", "attributes": []}]}}).devices == {
        "d": Identity("", "", "")
    }
    assert claim_devices({}).results == ()
    assert pod_gpus({"spec": {"nodeName": "n", "containers": "x"}}) is None

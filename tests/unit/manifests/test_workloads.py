"""Offline translation of custom resources whose controllers read GPU counts: what is kept,
what is left with a note, and what queues are told (docs/concepts/workloads.md)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from app.core.catalog import Catalog
from app.core.outcomes import Code, codes
from app.core.policy import Policy, parse_policy
from app.manifests.documents import translate_documents
from app.manifests.render import translate_text

Obj = dict[str, Any]


def _container(gpus: int | str = 2, name: str = "ray") -> Obj:
    return {"name": name, "image": "x", "resources": {"limits": {"nvidia.com/gpu": gpus}}}


def _group(gpus: int | str = 2, **extra: Any) -> Obj:
    return {**extra, "template": {"spec": {"containers": [_container(gpus)]}}}


def _run(doc: Obj, policy: Policy, catalog: Catalog) -> tuple[Obj, list[str]]:
    result = translate_documents([doc], policy, catalog, namespace="ns", mode="enabled")
    return result.documents[0], [n.text for n in result.notes]


def _ray(kind: str, cluster: Obj) -> Obj:
    where = {"RayCluster": None, "RayJob": "rayClusterSpec", "RayService": "rayClusterConfig"}
    spec = cluster if where[kind] is None else {where[kind]: cluster}
    return {"apiVersion": "ray.io/v1", "kind": kind, "metadata": {"name": "r"}, "spec": spec}


@pytest.mark.parametrize("kind", ["RayCluster", "RayJob", "RayService"])
def test_kuberay_keeps_the_gpu_count_in_ray_start_params(
    kind: str, policy: Policy, catalog: Catalog
) -> None:
    cluster = {
        "headGroupSpec": _group(1, rayStartParams={"dashboard-host": "0.0.0.0"}),
        "workerGroupSpecs": [_group(4, groupName="gpu"), _group("2", groupName="two")],
    }
    out, notes = _run(_ray(kind, cluster), policy, catalog)
    got = out["spec"] if kind == "RayCluster" else next(iter(out["spec"].values()))
    assert got["headGroupSpec"]["rayStartParams"] == {"dashboard-host": "0.0.0.0", "num-gpus": "1"}
    assert [g["rayStartParams"] for g in got["workerGroupSpecs"]] == [
        {"num-gpus": "4"},
        {"num-gpus": "2"},
    ]
    assert "claims" in got["headGroupSpec"]["template"]["spec"]["containers"][0]["resources"]
    assert [n.split(":")[0] for n in notes] == [
        "headGroupSpec",
        "workerGroupSpecs[0] (gpu)",
        "workerGroupSpecs[1] (two)",
    ]
    assert all("rayStartParams.num-gpus set to" in n for n in notes)


def test_kuberay_num_gpus_already_set_is_kept_and_checked(policy: Policy, catalog: Catalog) -> None:
    cluster = {
        "headGroupSpec": _group(0, rayStartParams={"num-gpus": "0"}),
        "workerGroupSpecs": [
            _group(4, groupName="same", rayStartParams={"num-gpus": "4"}),
            _group(4, groupName="other", rayStartParams={"num-gpus": "2"}),
        ],
    }
    out, notes = _run(_ray("RayCluster", cluster), policy, catalog)
    workers = out["spec"]["workerGroupSpecs"]
    assert [w["rayStartParams"] for w in workers] == [{"num-gpus": "4"}, {"num-gpus": "2"}]
    assert notes == [
        "workerGroupSpecs[1] (other): rayStartParams.num-gpus is '2' but the Ray container "
        "asked for 4 GPUs; Ray is started with num-gpus as set"
    ]


def test_kuberay_reads_only_the_first_container(policy: Policy, catalog: Catalog) -> None:
    group = {"template": {"spec": {"containers": [_container(0, "ray"), _container(1, "side")]}}}
    out, notes = _run(_ray("RayCluster", {"headGroupSpec": group}), policy, catalog)
    assert "rayStartParams" not in out["spec"]["headGroupSpec"]
    assert out["spec"]["headGroupSpec"]["template"]["spec"]["resourceClaims"]
    assert notes == []


POD_TEMPLATE = {"spec": {"containers": [_container(1, "user-container")]}}


@pytest.mark.parametrize(
    ("api", "kind", "spec", "says"),
    [
        ("serving.knative.dev/v1", "Service", {"template": POD_TEMPLATE}, "Knative Serving"),
        ("serving.knative.dev/v1", "Revision", POD_TEMPLATE["spec"], "Knative Serving"),
        (
            "serving.kserve.io/v1beta1",
            "InferenceService",
            {"predictor": {"model": {"resources": {"limits": {"nvidia.com/gpu": 1}}}}},
            "KServe",
        ),
        (
            "serving.kserve.io/v1beta1",
            "InferenceService",
            {"predictor": POD_TEMPLATE["spec"]},
            "KServe",
        ),
        (
            "trainer.kubeflow.org/v1alpha1",
            "ClusterTrainingRuntime",
            {"template": {"spec": {"replicatedJobs": [{"template": {"spec": POD_TEMPLATE}}]}}},
            "Kubeflow Trainer",
        ),
        (
            "trainer.kubeflow.org/v1alpha1",
            "TrainJob",
            {"trainer": {"resourcesPerNode": {"limits": {"nvidia.com/gpu": 2}}}},
            "Kubeflow Trainer",
        ),
    ],
)
def test_controllers_that_read_the_count_are_left_with_a_note(
    api: str, kind: str, spec: Obj, says: str, policy: Policy, catalog: Catalog
) -> None:
    doc = {"apiVersion": api, "kind": kind, "metadata": {"name": "n"}, "spec": spec}
    out, notes = _run(doc, policy, catalog)
    assert out is doc
    (note,) = notes
    assert note.startswith(f"left as is: {says}")
    assert note.endswith(
        "its pods are translated at admission (in a namespace where gpu2dra is enabled)"
    )


def test_a_left_kind_without_gpus_says_nothing(policy: Policy, catalog: Catalog) -> None:
    doc = {"apiVersion": "serving.knative.dev/v1", "kind": "Service", "spec": {"template": {}}}
    assert _run(doc, policy, catalog) == (doc, [])


def test_an_mpijob_launcher_is_kept_and_its_workers_translated(
    policy: Policy, catalog: Catalog
) -> None:
    replicas = {
        "Launcher": {"template": {"spec": {"containers": [_container(1, "launcher")]}}},
        "Worker": {"template": {"spec": {"containers": [_container(2, "worker")]}}},
    }
    doc = {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "spec": {"mpiReplicaSpecs": replicas},
    }
    out, notes = _run(doc, policy, catalog)
    assert out["spec"]["mpiReplicaSpecs"]["Launcher"] is replicas["Launcher"]
    assert out["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["resourceClaims"]
    (note,) = notes
    assert note.startswith("spec.mpiReplicaSpecs.Launcher left as is: the MPI operator reads")


@pytest.mark.parametrize(
    ("api", "kind", "spec", "path"),
    [
        (
            "apps.nvidia.com/v1alpha1",
            "NIMService",
            {"resources": {"limits": {"nvidia.com/gpu": 1}}},
            "spec.resources",
        ),
        (
            "slinky.slurm.net/v1alpha1",
            "NodeSet",
            {"slurmd": {"resources": {"limits": {"nvidia.com/gpu": 8}}}},
            "spec.slurmd.resources",
        ),
        (
            "example.com/v1",
            "Model",
            {"runtimes": [{"resources": {"requests": {"nvidia.com/gpu": 1}}}]},
            "spec.runtimes[0].resources",
        ),
    ],
)
def test_gpus_asked_outside_pod_specs_are_named_by_path(
    api: str, kind: str, spec: Obj, path: str, policy: Policy, catalog: Catalog
) -> None:
    doc = {"apiVersion": api, "kind": kind, "metadata": {"name": "n"}, "spec": spec}
    out, notes = _run(doc, policy, catalog)
    assert out is doc
    assert notes == [
        f"{path} asks for nvidia.com/gpu outside any pod spec, so gpu2dra cannot give it claims "
        "here; the pods it becomes are translated at admission (in a namespace where gpu2dra "
        "is enabled)"
    ]


def _job(**template_meta: Any) -> Obj:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j"},
        "spec": {"template": {"metadata": template_meta, "spec": {"containers": [_container(1)]}}},
    }


def test_queues_are_told_what_to_count(policy: Policy, catalog: Catalog) -> None:
    labelled = _job()
    labelled["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "q"}
    _, notes = _run(labelled, policy, catalog)
    (note,) = notes
    assert "KueueDRAIntegration from v0.18" in note and "deviceClassMappings" in note
    assert "DynamicResourceAllocation in v0.14-v0.17, off by default" in note
    assert "DeviceClass gpu.nvidia.com" in note
    _, notes = _run(_job(labels={"kueue.x-k8s.io/queue-name": "q"}), policy, catalog)
    assert len(notes) == 1
    volcano = _job()
    volcano["spec"]["template"]["spec"]["schedulerName"] = "volcano"
    (left,) = _run(volcano, policy, catalog)[1]  # by default: no scheduler known for claims
    assert "spec.schedulerName 'volcano' is not a scheduler known to allocate DRA claims" in left
    policy = parse_policy({"draSchedulers": ["default-scheduler", "volcano"]})
    (note,) = _run(volcano, policy, catalog)[1]
    assert "capacity.DynamicResourceAllocationEnable" in note
    assert "deviceclass/gpu.nvidia.com" in note
    vcjob = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "spec": {"tasks": [{"template": {"spec": {"containers": [_container(1)]}}}]},
    }
    (note,) = _run(vcjob, policy, catalog)[1]
    assert note.startswith("scheduled by Volcano")
    assert _run(_job(), policy, catalog)[1] == []  # no queue: nothing to say


def _clone_set() -> Obj:
    return {
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "CloneSet",
        "metadata": {"name": "c"},
        "spec": {"template": {"spec": {"containers": [_container(1)]}}},
    }


def test_a_kind_no_rule_knows_is_left_whole_with_a_note(policy: Policy, catalog: Catalog) -> None:
    doc = _clone_set()
    out, notes = _run(doc, policy, catalog)
    assert out is doc
    (note,) = notes
    assert codes([note]) == (Code.NO_RULE,)
    assert note.startswith(
        "apps.kruise.io/CloneSet is a kind gpu2dra has no rule for: left as is (pod templates "
        "asking for GPUs: spec.template)"
    )
    assert "translated at admission" in note and "translateKinds" in note


def test_a_kind_no_rule_knows_that_asks_for_no_gpu_says_nothing(
    policy: Policy, catalog: Catalog
) -> None:
    doc = _clone_set()
    doc["spec"]["template"]["spec"]["containers"] = [{"name": "c", "image": "x"}]
    assert _run(doc, policy, catalog) == (doc, [])


def test_translate_kinds_translates_a_kind_no_rule_knows(catalog: Catalog) -> None:
    chosen = parse_policy({"translateKinds": ["apps.kruise.io/CloneSet"]})
    out, notes = _run(_clone_set(), chosen, catalog)
    assert out["spec"]["template"]["spec"]["resourceClaims"]
    assert notes == []
    other = parse_policy({"translateKinds": ["apps.kruise.io/Advanced"]})
    assert _run(_clone_set(), other, catalog)[0] == _clone_set()


def test_a_kind_that_is_no_string_is_a_kind_no_rule_knows(policy: Policy, catalog: Catalog) -> None:
    # The fuzzer's find: a map as `kind`, and no apiVersion, once raised "unhashable type".
    doc = {"kind": {"containers": [_container(1)]}, "spec": {"containers": [_container(1)]}}
    out, notes = _run(doc, policy, catalog)
    assert out is doc
    assert codes(notes) == (Code.NO_RULE,)


@pytest.mark.parametrize(
    ("api", "kind", "why"),
    [
        ("mlops.seldon.io/v1alpha1", "Server", "Seldon Core v2's pod spec has no resourceClaims"),
        ("grove.io/v1alpha1", "PodCliqueSet", "mnnvl.HasGPUInPodSpec"),
        ("grove.io/v1alpha1", "PodClique", "mnnvl.HasGPUInPodSpec"),
        ("grove.io/v1alpha1", "PodCliqueScalingGroup", "mnnvl.HasGPUInPodSpec"),
        ("workload.codeflare.dev/v1beta2", "AppWrapper", "GPU-health anti-affinity"),
    ],
)
def test_controllers_that_read_nvidia_gpu_from_their_pod_specs_are_left(
    api: str, kind: str, why: str, catalog: Catalog
) -> None:
    # Left even where the policy names the kind: a rule knows better than a blanket choice.
    chosen = parse_policy({"translateKinds": [f"{api.split('/')[0]}/{kind}"]})
    doc = {
        "apiVersion": api,
        "kind": kind,
        "metadata": {"name": "x"},
        "spec": {"podSpec": {"containers": [_container(1)]}},
    }
    out, notes = _run(doc, chosen, catalog)
    assert out is doc
    (note,) = notes
    assert codes([note]) == (Code.CONTROLLER_READS,) and why in note


def test_device_classes_in_the_manifest_join_the_catalog(policy: Policy, catalog: Catalog) -> None:
    served = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "gpu.example.com"},
        "spec": {"extendedResourceName": "nvidia.com/gpu"},
    }
    text = "---\n".join(
        [
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
            "  - {name: c, resources: {limits: {nvidia.com/gpu: 1}}}\n",
            "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: gpu.example.com}\n"
            "spec: {extendedResourceName: nvidia.com/gpu}\n",
        ]
    )
    rendered = translate_text(
        text, policy, catalog, namespace="ns", mode="enabled", output="json", jobs=2, min_bytes=0
    )
    (warning,) = rendered.warnings
    assert "left to the in-tree extended-resource path" in warning
    assert "DeviceClass gpu.example.com" in warning
    result = translate_documents([served], policy, catalog, namespace="ns", mode="enabled")
    assert result.documents == [served] and result.notes == []


def test_a_manifest_inside_a_string_is_named(policy: Policy, catalog: Catalog) -> None:
    manifest = (
        "apiVersion: batch/v1\nkind: Job\nspec:\n  template:\n    spec:\n      containers:\n"
        "      - {name: c, resources: {limits: {nvidia.com/gpu: 1}}}\n"
    )
    template: Obj = {"name": "make", "resource": {"manifest": manifest}}
    doc = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "spec": {"templates": [template]},
    }
    out, notes = _run(doc, policy, catalog)
    assert out is doc
    assert notes == [
        "template 'make' creates a Job from a manifest string whose pods ask for GPUs; gpu2dra "
        "does not rewrite manifests inside strings: the pods are translated at admission (in a "
        "namespace where gpu2dra is enabled)"
    ]
    zero = manifest.replace("nvidia.com/gpu: 1", "nvidia.com/gpu: 0")
    template["resource"]["manifest"] = zero
    assert _run(doc, policy, catalog)[1] == []


def test_pod_specs_left_whole_each_name_their_template(policy: Policy, catalog: Catalog) -> None:
    # Both replicas ask for a request without a limit: the same reason, said of each once.
    unlimited = {"name": "c", "image": "x", "resources": {"requests": {"nvidia.com/gpu": 1}}}
    replica = {"template": {"spec": {"containers": [unlimited]}}}
    doc = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "p"},
        "spec": {"pytorchReplicaSpecs": {"Master": replica, "Worker": copy.deepcopy(replica)}},
    }
    out, notes = _run(doc, policy, catalog)
    assert out is doc
    assert [n.split(": ")[0] for n in notes] == [
        "spec.pytorchReplicaSpecs.Master",
        "spec.pytorchReplicaSpecs.Worker",
    ]
    assert len(set(notes)) == len(notes)


def test_a_request_outside_a_pod_spec_is_named_by_its_holder(
    policy: Policy, catalog: Catalog
) -> None:
    doc = {
        "apiVersion": "apps.nvidia.com/v1alpha1",
        "kind": "NIMService",
        "metadata": {"name": "n"},
        "spec": {
            "services": [
                {"name": "frontend", "resources": {}},
                {"name": "decode", "resources": {"limits": {"nvidia.com/gpu": 2}}},
            ]
        },
    }
    _, notes = _run(doc, policy, catalog)
    (note,) = notes
    assert note.startswith("spec.services[name=decode].resources asks for nvidia.com/gpu")

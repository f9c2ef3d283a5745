"""`gpu2dra impact`: what would stop seeing translated pods, found in tables of objects."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from kubernetes.client import ApiClient

from app.cli import arguments, commands
from app.core.policy import parse_policy
from app.plan.impact.analyse import Finding, Inputs, analyse, selects
from app.plan.impact.gather import gather
from app.plan.impact.render import render_json, render_text
from app.readers.client import NotFound, Reader, ReadError

Obj = dict[str, Any]
POLICY = parse_policy({})
GPU_CONDITION = {
    "name": "gpu-pods",
    "expression": "object.spec.containers.exists(c, 'nvidia.com/gpu' in c.resources.limits)",
}
PODS = [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}]


def config(name: str, *hooks: Obj) -> Obj:
    return {"metadata": {"name": name}, "webhooks": list(hooks)}


def hook(name: str, rules: list[Obj] = PODS, conditions: list[Obj] | None = None) -> Obj:
    return {"name": name, "rules": rules, "matchConditions": conditions or []}


def inputs(**given: Any) -> Inputs:
    base: dict[str, Any] = {
        "mutating": [],
        "validating": [],
        "deployments": [],
        "daemonsets": [],
        "crds": [],
        "quotas": [],
    }
    return Inputs(**{**base, **given})


def quota(namespace: str, name: str, **hard: str) -> Obj:
    return {"metadata": {"namespace": namespace, "name": name}, "spec": {"hard": hard}}


def test_nothing_found_in_a_plain_cluster() -> None:
    assert analyse(inputs(), POLICY) == ([], [])


def test_webhooks_whose_match_conditions_name_the_resource() -> None:
    gpu2dra_own = config("gpu2dra", hook("pods.mutate.gpu2dra.io", conditions=[GPU_CONDITION]))
    health = config(
        "gpu-health",
        hook("pods.health.example.com", conditions=[GPU_CONDITION]),
        hook("other.health.example.com", conditions=[{"name": "x", "expression": "true"}]),
        # names the resource, but is never sent pods
        hook(
            "nodes.health.example.com",
            rules=[{"apiGroups": [""], "operations": ["*"], "resources": ["nodes"]}],
            conditions=[GPU_CONDITION],
        ),
    )
    mig = {
        "name": "mig",
        "expression": "object.spec.containers.exists(c, "
        "c.resources.limits.exists(k, k.startsWith('nvidia.com/mig-')))",
    }
    wildcard = [{"apiGroups": ["*"], "operations": ["*"], "resources": ["*"]}]
    audit = config("gpu-audit", hook("audit.example.com", rules=wildcard, conditions=[mig]))
    findings, unreadable = analyse(
        inputs(mutating=[gpu2dra_own, health], validating=[audit]), POLICY
    )
    assert unreadable == []
    assert [(f.level, f.kind, f.subject) for f in findings] == [
        (
            "WARN",
            "webhook",
            "MutatingWebhookConfiguration gpu-health, webhook pods.health.example.com",
        ),
        ("WARN", "webhook", "ValidatingWebhookConfiguration gpu-audit, webhook audit.example.com"),
    ]
    assert findings[0].details == (f"gpu-pods: {GPU_CONDITION['expression']}",)
    assert "a mutating webhook called after gpu2dra sees the translated pod" in findings[0].change
    assert "validating webhooks see the pod as stored, translated" in findings[1].change
    assert "object.spec.?resourceClaims" in findings[0].action


def test_known_components_one_finding_each_naming_every_object() -> None:
    def workload(namespace: str, name: str, image: str, **env: str) -> Obj:
        container = {
            "name": "c",
            "image": image,
            "env": [{"name": k, "value": v} for k, v in env.items()],
        }
        return {
            "metadata": {"namespace": namespace, "name": name},
            "spec": {"template": {"spec": {"containers": [container]}}},
        }

    dcgm = workload(
        "gpu-operator",
        "nvidia-dcgm-exporter",
        "nvcr.io/nvidia/k8s/dcgm-exporter:4.4.0",
        KUBERNETES_ENABLE_DRA="true",
    )
    operator = workload("gpu-operator", "gpu-operator", "nvcr.io/nvidia/gpu-operator:v25.10.0")
    driver = workload(
        "gpu-operator",
        "nvidia-driver-daemonset",
        "nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.8.1",
    )
    findings, _ = analyse(inputs(deployments=[operator], daemonsets=[dcgm, driver]), POLICY)
    assert [f.subject for f in findings] == [
        "NVIDIA GPU Operator driver upgrades (k8s-driver-manager, upgrade controller): "
        "Deployment gpu-operator/gpu-operator, DaemonSet gpu-operator/nvidia-driver-daemonset",
        "NVIDIA dcgm-exporter: DaemonSet gpu-operator/nvidia-dcgm-exporter "
        "(KUBERNETES_ENABLE_DRA=true)",
    ]
    assert "driver.upgradePolicy.drain.enable=true" in findings[0].action


def test_custom_resources_that_read_gpu_counts() -> None:
    crds = [
        {"metadata": {"name": "rayclusters.ray.io"}, "spec": {"group": "ray.io"}},
        {"metadata": {"name": "rayjobs.ray.io"}, "spec": {"group": "ray.io"}},
        {
            "metadata": {"name": "queues.scheduling.volcano.sh"},
            "spec": {"group": "scheduling.volcano.sh"},
        },
        {"metadata": {"name": "widgets.example.com"}, "spec": {"group": "example.com"}},
    ]
    findings, _ = analyse(inputs(crds=crds), POLICY)
    assert [(f.level, f.subject) for f in findings] == [
        ("WARN", "Volcano Queues: queues.scheduling.volcano.sh"),
        ("INFO", "KubeRay: rayclusters.ray.io, rayjobs.ray.io"),
    ]


def test_quotas_that_count_the_resource_with_and_without_their_dra_side() -> None:
    quotas = [
        quota("ml", "gpus", **{"requests.nvidia.com/gpu": "4", "cpu": "10"}),
        quota("research", "gpus", **{"limits.nvidia.com/mig-1g.5gb": "2"}),
        quota("vision", "gpus", **{"requests.nvidia.com/gpu": "8"}),
        quota("vision", "dra", **{"gpu.nvidia.com.deviceclass.resource.k8s.io/devices": "8"}),
        quota("web", "cpu", cpu="4"),
    ]
    findings, _ = analyse(inputs(quotas=quotas), POLICY)
    assert [(f.level, f.subject, f.action) for f in findings] == [
        (
            "WARN",
            "ResourceQuota ml/gpus (requests.nvidia.com/gpu)",
            "gpu2dra quota -n ml | kubectl apply -f -",
        ),
        (
            "WARN",
            "ResourceQuota research/gpus (limits.nvidia.com/mig-1g.5gb)",
            "gpu2dra quota -n research | kubectl apply -f -",
        ),
        (
            "INFO",
            "ResourceQuota vision/gpus (requests.nvidia.com/gpu)",
            "nothing: both sides are limited",
        ),
    ]
    assert "mig.nvidia.com.deviceclass.resource.k8s.io/devices" in findings[1].change


def test_cluster_queues_that_cover_the_resource() -> None:
    queues = [
        {
            "metadata": {"name": "team-a"},
            "spec": {"resourceGroups": [{"coveredResources": ["cpu", "nvidia.com/gpu"]}]},
        },
        {
            "metadata": {"name": "cpu-only"},
            "spec": {"resourceGroups": [{"coveredResources": ["cpu"]}]},
        },
    ]
    (found,) = analyse(inputs(cluster_queues=queues), POLICY)[0]
    assert (found.kind, found.subject) == ("queue", "ClusterQueue team-a (nvidia.com/gpu)")
    assert analyse(inputs(cluster_queues=None), POLICY) == ([], [])


def test_what_cannot_be_read_is_named_and_the_rest_judged() -> None:
    err = ReadError("GET /apis/apps/v1/daemonsets: 403 forbidden")
    findings, unreadable = analyse(
        inputs(
            daemonsets=err,
            validating=err,
            quotas=[quota("ml", "q", **{"requests.nvidia.com/gpu": "1"})],
            cluster_queues=err,
        ),
        POLICY,
    )
    assert [f.kind for f in findings] == ["quota"]
    assert unreadable == [
        f"cannot read ValidatingWebhookConfigurations: {err}",
        f"cannot read daemonsets: {err}",
        f"cannot read clusterqueues: {err}",
    ]


def test_text_and_json() -> None:
    finding = Finding(
        level="WARN",
        kind="quota",
        subject="ResourceQuota ml/q",
        change="it changes",
        action="do this",
        details=("a",),
    )
    assert render_text([finding], ["cannot read x"], "every namespace") == (
        "what keys on GPU requests and would stop seeing translated pods (every namespace):\n"
        "WARN  quota            ResourceQuota ml/q\n"
        "                       - a\n"
        "                       changes: it changes\n"
        "                       do: do this\n"
        "cannot read x\n"
    )
    assert "nothing found" in render_text([], [], "quotas of namespace ml")
    assert orjson.loads(render_json([finding], [], "s")) == {
        "scope": "s",
        "findings": [
            {
                "level": "WARN",
                "kind": "quota",
                "subject": "ResourceQuota ml/q",
                "change": "it changes",
                "action": "do this",
                "details": ["a"],
            }
        ],
        "unreadable": [],
    }


class FakeReader(Reader):
    """Answers GETs from a table of paths; a path not in it is a 404."""

    def __init__(self, answers: dict[str, list[Obj] | Obj | ReadError]) -> None:
        super().__init__(ApiClient())
        self.answers, self.asked = answers, list[str]()

    def get(self, path: str, **query: str) -> Obj:
        self.asked.append(path)
        answer = self.answers.get(path)
        if answer is None:
            raise NotFound(f"GET {path}: not found")
        if isinstance(answer, ReadError):
            raise answer
        return answer if isinstance(answer, dict) else {"items": answer, "metadata": {}}


def test_gather_reads_one_namespace_s_quotas_and_the_served_kueue_version() -> None:
    reader = FakeReader(
        {
            "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations": [],
            "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations": [],
            "/apis/apps/v1/deployments": [],
            "/apis/apps/v1/daemonsets": [],
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions": [],
            "/api/v1/namespaces/ml/resourcequotas": [quota("ml", "q")],
            "/apis/kueue.x-k8s.io/v1beta1/clusterqueues": [],
            "/api/v1/namespaces/ml": {"metadata": {"name": "ml", "labels": {"team": "a"}}},
        }
    )
    got = gather(reader, "ml")
    assert got.quotas == [quota("ml", "q")]
    assert got.cluster_queues == []
    assert got.namespace == ("ml", {"team": "a"})
    assert "/apis/kueue.x-k8s.io/v1beta2/clusterqueues" in reader.asked
    everywhere = gather(FakeReader({}), None)
    assert (everywhere.cluster_queues, everywhere.namespace) == (None, None)
    with pytest.raises(ReadError, match="namespace gone not found"):
        gather(FakeReader({}), "gone")
    forbidden = ReadError("GET /api/v1/namespaces/ml: 403 forbidden")
    hidden = gather(FakeReader({"/api/v1/namespaces/ml": forbidden}), "ml")
    assert hidden.namespace is None
    assert hidden.unreadable == [f"cannot read namespace ml: {forbidden}"]


def test_a_webhook_that_does_not_select_the_namespace_is_info() -> None:
    selector = {
        "matchLabels": {"gpu": "yes"},
        "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["dev"]}],
    }
    hooked = hook("pods.health.example.com", conditions=[GPU_CONDITION])
    configs = [config("gpu-health", {**hooked, "namespaceSelector": selector})]
    for labels, level in (
        ({"gpu": "yes"}, "WARN"),
        ({"gpu": "yes", "tier": "prod"}, "WARN"),
        ({"gpu": "yes", "tier": "dev"}, "INFO"),
        ({}, "INFO"),
    ):
        (found,) = analyse(inputs(validating=configs, namespace=("ml", labels)), POLICY)[0]
        assert found.level == level, labels
    (found,) = analyse(inputs(validating=configs, namespace=("ml", {})), POLICY)[0]
    assert found.change.endswith("(its namespaceSelector leaves out namespace ml)")


def test_label_selectors() -> None:
    assert selects(None, {})
    assert selects({}, {"a": "b"})
    assert selects({"matchExpressions": [{"key": "a", "operator": "Exists"}]}, {"a": ""})
    assert not selects({"matchExpressions": [{"key": "a", "operator": "Exists"}]}, {})
    assert selects({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}, {})
    assert not selects(
        {"matchExpressions": [{"key": "a", "operator": "In", "values": ["x"]}]}, {"a": "y"}
    )
    assert selects({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["x"]}]}, {})


def test_the_command_parses_its_scope() -> None:
    args = arguments.parser().parse_args(["impact", "-n", "ml", "-o", "json"])
    assert (args.namespace, args.all_namespaces, args.output) == ("ml", False, "json")
    assert "impact" in commands.COMMANDS

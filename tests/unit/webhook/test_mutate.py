"""The mutating verdict, against an in-memory cluster: which pods are patched, audited or left
alone, what a failure of the cluster makes of the answer, and the memo that translates pods of
one shape once."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.catalog import Catalog
from app.core.failclosed import Annotations
from app.core.kueue import Gate, Kueue
from app.core.outcomes import Code
from app.core.policy import Policy, load_policy, parse_policy
from app.core.translate import translate
from app.webhook.mutate import (
    AUDIT_ANNOTATION,
    MEMO_SIZE,
    Mutator,
)
from app.webhook.reviews import AdmissionRequest, Answer
from app.webhook.verdicts import Decision, Verdict
from tests.support.fake import FakeCluster
from tests.support.pods import container, gpu
from tests.support.reviews import translated
from tests.support.strategies import pod_specs
from tests.unit.admission import patched, pod, request, run

Obj = dict[str, Any]


def enabled(**labels: str) -> FakeCluster:
    return FakeCluster(labels={"ml": {"gpu2dra.io/migration": "enabled", **labels}})


@pytest.fixture
def mutate(policy: Policy) -> Mutator:
    return Mutator(policy)


def test_enabled_namespace_gets_a_patch_and_templates(mutate: Mutator) -> None:
    cluster, obj = enabled(), pod()
    response = run(mutate(request(obj), cluster))
    assert patched(obj, response) == translated(obj, mutate.policy, cluster.catalog)
    expected = translate(obj["spec"], mutate.policy, cluster.catalog)
    assert cluster.created == [("ml", expected.templates[0]["metadata"]["name"])]


@pytest.mark.parametrize(
    ("labels", "why"),
    [
        (None, "no label: cluster default is disabled"),
        ({"gpu2dra.io/migration": "disabled"}, "disabled"),
        ({"gpu2dra.io/migration": "Enabled"}, "misspelt value disables"),
    ],
)
def test_namespaces_not_enabled_are_left_alone(mutate: Mutator, labels: Any, why: str) -> None:
    cluster = FakeCluster(labels={"ml": labels} if labels else {})
    assert run(mutate(request(pod()), cluster)) == {"allowed": True}, why
    assert cluster.created == []


def test_cluster_default_can_enable(catalog: Any) -> None:
    raw = {
        "defaultMode": "enabled",
        "mappings": {"nvidia.com/gpu": {"deviceClassName": "gpu.nvidia.com"}},
    }
    policy, cluster = parse_policy(raw), FakeCluster()
    response = run(Mutator(policy)(request(pod()), cluster))
    assert patched(pod(), response) == translated(pod(), policy, cluster.catalog)


def test_audit_warns_and_annotates_without_changing(mutate: Mutator) -> None:
    cluster = FakeCluster(labels={"ml": {"gpu2dra.io/migration": "audit"}})
    response = run(mutate(request(pod()), cluster))
    assert response["allowed"] and "patch" not in response
    assert response["warnings"][0].startswith("gpu2dra audit: would move GPU requests to DRA")
    assert "claim c-gpu: 2 x gpu.nvidia.com" in response["warnings"][0]
    assert "gpu2dra-gpu-x2-" in response["auditAnnotations"][AUDIT_ANNOTATION]
    assert cluster.created == []


def test_dry_run_patches_but_creates_nothing(mutate: Mutator) -> None:
    cluster = enabled()
    response = run(mutate(request(pod(), dryRun=True), cluster))
    assert patched(pod(), response) == translated(pod(), mutate.policy, cluster.catalog)
    assert cluster.created == []


@pytest.mark.parametrize(
    ("req", "why"),
    [
        (request(pod(), operation="UPDATE"), "an update of a pod gpu2dra did not translate"),
        (request(pod(), namespace="kube-system"), "kube-system"),
        (request(pod(annotations={"gpu2dra.io/skip": "true"})), "opted out"),
        (request(pod(annotations={"kubernetes.io/config.mirror": "x"})), "mirror pod"),
        (request(pod(), subResource="status"), "subresource"),
        (request({"spec": {}}, kind="Deployment", group="apps"), "not a pod"),
    ],
)
def test_never_touched(mutate: Mutator, req: AdmissionRequest, why: str) -> None:
    cluster = enabled()
    assert run(mutate(req, cluster)) == {"allowed": True}, why


def test_webhook_namespace_is_skipped(policy: Policy) -> None:
    cluster = FakeCluster(labels={"gpu2dra": {"gpu2dra.io/migration": "enabled"}})
    mutate = Mutator(policy.with_skipped("gpu2dra"))
    assert run(mutate(request(pod(), namespace="gpu2dra"), cluster)) == {"allowed": True}


def test_template_failure_admits_unchanged_with_warning(mutate: Mutator) -> None:
    cluster = enabled()
    cluster.fail_with = "403 Forbidden"
    response = run(mutate(request(pod()), cluster))
    assert response["allowed"] and "patch" not in response
    assert "could not create ResourceClaimTemplates: 403 Forbidden" in response["warnings"][0]


def test_not_synced_denies_when_policy_says_so() -> None:
    policy = parse_policy({"onError": "deny"})
    cluster = enabled()
    cluster.ready = False
    response = run(Mutator(policy)(request(pod()), cluster))
    assert response == {
        "allowed": False,
        "status": {"code": 503, "message": "gpu2dra has not synced its caches yet"},
    }


def test_template_failure_denies_when_policy_says_so() -> None:
    policy = parse_policy(
        {"onError": "deny", "mappings": {"nvidia.com/gpu": {"deviceClassName": "gpu.nvidia.com"}}}
    )
    cluster = enabled()
    cluster.fail_with = "timed out"
    response = run(Mutator(policy)(request(pod()), cluster))
    assert response == {
        "allowed": False,
        "status": {
            "code": 503,
            "message": "gpu2dra could not create ResourceClaimTemplates: timed out",
        },
    }


def test_pod_without_gpus_is_plain_allowed(mutate: Mutator) -> None:
    obj = pod({"containers": [container("c", {"cpu": "1"})]})
    assert run(mutate(request(obj), enabled())) == {"allowed": True}


def test_missing_device_class_warns_and_leaves_pod(mutate: Mutator) -> None:
    cluster = enabled()
    cluster.catalog = type(cluster.catalog).of(["mig.nvidia.com"])
    response = run(mutate(request(pod()), cluster))
    assert "patch" not in response
    assert "DeviceClass gpu.nvidia.com does not exist" in response["warnings"][0]


# ---- the memo: pods of one shape are translated once -------------------------------------


def _replica(spec: Obj, n: int) -> Obj:
    """`spec` as another replica of its workload, or another worker of a training job: what
    translate() does not read differs (an image, a volume, the rank in env and args)."""
    containers = spec.get("containers")
    if isinstance(containers, list):  # random specs hold anything there
        containers = [
            {
                **c,
                "image": f"img:{n}",
                "volumeMounts": [{"name": f"kube-api-access-{n}"}],
                "env": [*_listed(c.get("env")), {"name": "RANK", "value": str(n)}],
                "args": [*_listed(c.get("args")), f"--node-rank={n}"],
            }
            if isinstance(c, dict)
            else c
            for c in containers
        ]
    return {**spec, "containers": containers, "volumes": [{"name": f"kube-api-access-{n}"}]}


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


_WATCHED = st.sampled_from(
    [(), (("nvidia.com/use-gputype", "A100"),), (("nvidia.com/use-gputype", "H100"),)]
)


@settings(max_examples=150, deadline=None)
@given(spec=pod_specs, other=pod_specs, annotations=_WATCHED, others=_WATCHED)
def test_a_remembered_outcome_is_the_fresh_one(
    spec: Obj, other: Obj, annotations: Annotations, others: Annotations
) -> None:
    policy = load_policy(None)
    catalog = Catalog.of(policy.device_classes)
    memo = Mutator(policy)
    memo.prepare(spec, catalog, annotations)
    for later, watched in ((_replica(spec, 1), others), (other, annotations)):
        kept = memo.prepare(later, catalog, watched)
        fresh = Mutator(policy).prepare(later, catalog, watched)
        assert replace(kept, summary=str, unrecorded=str) == replace(
            fresh, summary=str, unrecorded=str
        )
        assert kept.summary() == fresh.summary()
        assert kept.unrecorded() == fresh.unrecorded()


def test_replicas_share_one_outcome(policy: Policy, catalog: Catalog) -> None:
    mutator = Mutator(policy)
    spec = pod()["spec"]
    first = mutator.prepare(spec, catalog)
    assert first.patch and mutator.prepare(_replica(spec, 2), catalog) is first


def test_a_worker_that_reads_visible_devices_is_not_answered_from_the_memo(
    policy: Policy, catalog: Catalog
) -> None:
    mutator, spec = Mutator(policy), pod()["spec"]
    first = mutator.prepare(spec, catalog)
    (c,) = spec["containers"]
    reads = {**spec, "containers": [{**c, "env": [{"name": "NVIDIA_VISIBLE_DEVICES"}]}]}
    later = mutator.prepare(reads, catalog)
    assert later is not first and any("NVIDIA_VISIBLE_DEVICES" in w for w in later.warnings)
    assert not any("NVIDIA_VISIBLE_DEVICES" in w for w in first.warnings)


@pytest.mark.parametrize(
    "priority",
    [{"priorityClassName": "high"}, {"priorityClassName": "high", "preemptionPolicy": "Never"}],
)
def test_a_priority_class_is_not_answered_from_the_memo(
    policy: Policy, catalog: Catalog, priority: dict[str, str]
) -> None:
    mutator, spec = Mutator(policy), pod()["spec"]
    first = mutator.prepare(spec, catalog)
    later = mutator.prepare({**spec, **priority}, catalog)
    assert later is not first and first.patch
    preempts = priority.get("preemptionPolicy") != "Never"
    assert bool(later.patch) is not preempts
    assert any("can preempt" in w for w in later.warnings) is preempts


def test_a_new_catalog_is_not_answered_from_the_memo(policy: Policy) -> None:
    mutator, spec = Mutator(policy), pod()["spec"]
    assert not mutator.prepare(spec, Catalog.of(["mig.nvidia.com"])).patch
    assert mutator.prepare(spec, Catalog.of(["gpu.nvidia.com"])).patch


def _answer(mutator: Mutator, annotations: Obj | None, spec: Obj | None = None) -> Answer:
    return run(mutator(request(pod(spec, annotations)), enabled()))


def test_pods_that_differ_in_a_hami_annotation_get_their_own_answers(policy: Policy) -> None:
    mutator = Mutator(policy)
    plain = _answer(mutator, {"team": "ml"})
    typed = _answer(mutator, {"team": "ml", "nvidia.com/use-gputype": "A100"})
    other = _answer(mutator, {"team": "ml", "nvidia.com/use-gputype": "H100"})
    numa = _answer(mutator, {"team": "ml", "nvidia.com/numa-bind": "true"})
    assert len({plain["patch"], typed["patch"], other["patch"]}) == 3
    assert "patch" not in numa
    assert any("nvidia.com/numa-bind" in w for w in numa["warnings"])
    # and each is the answer of a fresh memo
    fresh = _answer(Mutator(policy), {"nvidia.com/use-gputype": "A100", "team": "ml"})
    assert fresh == typed
    assert len(mutator._memo) == 4


def test_pods_that_differ_in_unrelated_annotations_share_one_outcome(policy: Policy) -> None:
    mutator = Mutator(policy)
    for n in range(3):
        _answer(
            mutator,
            {
                "nvidia.com/use-gputype": "A100",
                f"example.com/hash-{n}": str(n),
                "kubectl.kubernetes.io/restartedAt": str(n),
            },
        )
    ignoring = Mutator(parse_policy({"ignoreKeys": ["hami.io/*"]}))
    for n in range(3):
        _answer(ignoring, {"hami.io/noise": str(n)})
    assert len(mutator._memo) == 1 and len(ignoring._memo) == 1


def test_pods_that_differ_in_their_scheduler_get_their_own_answers(policy: Policy) -> None:
    mutator, spec = Mutator(policy), {"containers": [container("c", gpu(1))]}
    assert _answer(mutator, None, spec)["patch"]
    hami = _answer(mutator, None, {**spec, "schedulerName": "hami-scheduler"})
    assert "patch" not in hami and "hami-scheduler" in hami["warnings"][0]


def test_the_memo_is_bounded(policy: Policy, catalog: Catalog) -> None:
    mutator = Mutator(policy)
    for n in range(MEMO_SIZE + 5):
        mutator.prepare({"containers": [container(f"c{n}", gpu(1))]}, catalog)
    assert len(mutator._memo) == MEMO_SIZE


def test_audit_says_which_path_a_pod_would_take() -> None:
    served = Catalog.from_objects(
        [
            {
                "metadata": {"name": "gpu.nvidia.com"},
                "spec": {"extendedResourceName": "nvidia.com/gpu"},
            }
        ]
    )
    cluster = FakeCluster(catalog=served, labels={"ml": {"gpu2dra.io/migration": "audit"}})
    response = run(Mutator(load_policy(None))(request(pod()), cluster))
    assert response["allowed"] and "patch" not in response and "auditAnnotations" not in response
    assert response["warnings"] == [
        "gpu2dra audit: would leave it to the in-tree path (nvidia.com/gpu is served in-tree "
        "by DeviceClass gpu.nvidia.com)"
    ]
    cluster.labels["ml"]["gpu2dra.io/migration"] = "enabled"
    assert run(Mutator(load_policy(None))(request(pod()), cluster)) == {"allowed": True}


def run_verdict(decision: Decision) -> Verdict:
    return asyncio.run(decision) if isinstance(decision, Coroutine) else decision


def queued_pod(spec: Obj | None = None, **meta: Any) -> Obj:
    obj = pod(spec)
    obj["metadata"] |= {"labels": {"kueue.x-k8s.io/queue-name": "team-a"}, **meta}
    return obj


KUEUE_OFF = Kueue((0, 17), Gate("DynamicResourceAllocation", False, "its default"), ("pod",))
KUEUE_ON = Kueue(
    (0, 17),
    Gate("DynamicResourceAllocation", True, "--feature-gates"),
    ("pod",),
    {"gpu.nvidia.com": "whole-gpus"},
)


def test_a_pod_kueue_would_not_count_stays_on_the_device_plugin(mutate: Mutator) -> None:
    cluster = enabled()
    cluster.kueue = KUEUE_OFF
    verdict = run_verdict(mutate(request(queued_pod()), cluster))
    assert verdict.result == "quota"
    assert verdict.codes == (Code.KUEUE_GATE_OFF,)
    (warning,) = verdict.response["warnings"]
    assert "DRA gate DynamicResourceAllocation off" in warning
    assert warning.endswith("(policy kueuePods: leave; set translate to move such pods)")
    assert "patch" not in verdict.response and cluster.created == []
    # Counted from its Job's template, or not queued: translated.
    owner = {"kind": "Job", "name": "j", "uid": "u", "apiVersion": "batch/v1", "controller": True}
    job_pod = queued_pod(ownerReferences=[owner])
    assert patched(job_pod, run(mutate(request(job_pod), cluster))) == translated(
        job_pod, mutate.policy, cluster.catalog
    )
    plain = pod()
    assert patched(plain, run(mutate(request(plain), cluster))) == translated(
        plain, mutate.policy, cluster.catalog
    )


def test_kueue_with_the_gate_and_mappings_counts_whole_gpus_not_mig(mutate: Mutator) -> None:
    cluster = enabled()
    cluster.kueue = KUEUE_ON
    obj = queued_pod()
    assert patched(obj, run(mutate(request(obj), cluster))) == translated(
        obj, mutate.policy, cluster.catalog
    )
    mig = queued_pod({"containers": [container("c", {"nvidia.com/mig-1g.5gb": 1})]})
    verdict = run_verdict(mutate(request(mig), cluster))
    # mig.nvidia.com is not mapped, before its selectors are refused
    assert verdict.codes == (Code.KUEUE_UNMAPPED,)


def test_kueue_pods_translate_moves_them_and_says_so() -> None:
    policy = parse_policy({"kueuePods": "translate"})
    cluster = enabled()
    cluster.kueue = KUEUE_OFF
    verdict = run_verdict(Mutator(policy)(request(queued_pod()), cluster))
    assert "patch" in verdict.response and verdict.codes == (Code.KUEUE_TRANSLATED,)
    (warning,) = verdict.response["warnings"]
    assert warning.endswith("; translated as the policy's kueuePods: translate says")


def test_every_template_create_is_logged_with_who_asked(
    policy: Policy, caplog: pytest.LogCaptureFixture
) -> None:
    """One JSON line per create: the review's uid, the namespace, the template and the caller
    as the API server names it (userInfo.username); nothing says who asked otherwise."""
    import logging

    import orjson
    from kubernetes import client

    from app.webhook.cluster import LiveCluster
    from app.webhook.logs import JsonFormatter
    from app.webhook.metrics import Metrics

    cluster = LiveCluster(client.ApiClient(), Metrics())
    cluster.namespaces.items["ml"] = {"gpu2dra.io/migration": "enabled"}
    cluster._catalog = Catalog.of(["gpu.nvidia.com", "mig.nvidia.com"])
    for store in cluster.stores:
        store.synced.set()
    made: list[str] = []

    def create(namespace: str, body: Obj, **kwargs: Any) -> None:
        made.append(body["metadata"]["name"])

    cluster._resource.create_namespaced_resource_claim_template = create
    review = request(pod(), uid="7e1d", userInfo={"username": "system:serviceaccount:ml:ci"})
    with caplog.at_level(logging.INFO, logger="app.webhook.cluster"):
        answer = run(Mutator(policy)(review, cluster))
    assert "patch" in answer and len(made) == 1
    (line,) = [
        orjson.loads(JsonFormatter().format(r)) for r in caplog.records if "template" in r.__dict__
    ]
    assert line["uid"] == "7e1d" and line["namespace"] == "ml"
    assert line["template"] == made[0] and line["user"] == "system:serviceaccount:ml:ci"


def test_a_namespace_at_its_template_bound_gets_no_new_template(policy: Policy) -> None:
    """Past the policy's templatesPerNamespace (counted from the cache, no API call), a pod
    that needs a new template is left as it is, with a warning and its outcome code, under
    either onError: forged or careless shapes cannot fill a namespace with templates."""
    for on_error in ("allow", "deny"):
        bounded = replace(policy, templates_per_namespace=3, on_error=on_error)
        cluster = enabled()
        cluster.created += [("ml", f"t{i}") for i in range(3)]
        verdict = Mutator(bounded)(request(pod()), cluster)
        verdict = asyncio.run(verdict) if isinstance(verdict, Coroutine) else verdict
        assert verdict.result == "allowed" and Code.TEMPLATE_LIMIT in verdict.codes
        (warning,) = verdict.response["warnings"]
        assert "3 ResourceClaimTemplates" in warning and "templatesPerNamespace" in warning
        assert "patch" not in verdict.response and len(cluster.created) == 3
    # Under the bound, the pod gets its template as ever.
    cluster = enabled()
    cluster.created += [("ml", "t0"), ("ml", "t1")]
    answer = run(Mutator(replace(policy, templates_per_namespace=3))(request(pod()), cluster))
    assert "patch" in answer and len(cluster.created) == 3


@pytest.mark.parametrize(
    ("metadata", "mark"),
    [
        ({"labels": {"yunikorn.apache.org/queue": "root.ml"}}, "label yunikorn.apache.org/queue"),
        ({"labels": {"queue": "root.ml"}}, "label queue"),
        (
            {"annotations": {"yunikorn.apache.org/user.info": '{"user":"a","groups":[]}'}},
            "annotation yunikorn.apache.org/user.info",
        ),
    ],
)
def test_a_pod_yunikorn_will_schedule_is_left_before_its_scheduler_name_says_so(
    mutate: Mutator, metadata: Obj, mark: str
) -> None:
    """YuniKorn's admission controller sets schedulerName: yunikorn after gpu2dra's webhook:
    at gpu2dra's turn the pod still names the default scheduler, and is left all the same."""
    cluster, obj = enabled(), pod()
    obj["metadata"].update(metadata)
    assert obj["spec"].get("schedulerName") is None
    response = run(mutate(request(obj), cluster))
    assert response["allowed"] and "patch" not in response
    (warning,) = response["warnings"]
    assert warning.startswith(f"{mark} marks the pod for YuniKorn")
    assert cluster.created == []
    # The same spec without the mark is translated: the memo keeps them apart.
    assert patched(pod(), run(mutate(request(pod()), cluster))) == translated(
        pod(), mutate.policy, cluster.catalog
    )


def test_pods_yunikorn_will_schedule_are_translated_where_the_policy_lists_it(
    catalog: Catalog,
) -> None:
    policy = parse_policy({"draSchedulers": ["default-scheduler", "yunikorn"]})
    cluster, obj = enabled(), pod()
    obj["metadata"]["labels"] = {"queue": "root.ml"}
    assert patched(obj, run(Mutator(policy)(request(obj), cluster))) == translated(
        obj, policy, cluster.catalog
    )

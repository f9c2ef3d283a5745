"""What bounds gpu2dra's templates, on the real control plane: a namespace's bound
(templatesPerNamespace), templates made for pods the API server then refused and what prunes
them, the workloads whose pod templates keep a template from pruning, and the log line of
every create."""

from __future__ import annotations

import copy
import json
import time
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from app.core.policy import DEFAULT
from app.core.templates import DeviceRequest
from tests.e2e.inspecting import gpu2dra
from tests.support.cluster import gpu_pod, templates_in, wait_for
from tests.support.controlplane import ADMIN_USER, ControlPlane
from tests.support.webhook import Webhook

Obj = dict[str, Any]


def own_template(i: int) -> Obj:
    """A template as gpu2dra writes it, of a shape no test pod has."""
    selector = f"device.attributes['gpu.nvidia.com'].productName == 'BOUND-{i}'"
    template = DeviceRequest("gpu", "gpu.nvidia.com", 1, (selector,)).template()
    return copy.deepcopy(template)  # template() is remembered: a copy to change


def refused_pod(name: str, gpus: int) -> Obj:
    """A GPU pod the API server refuses after admission: validation runs after the webhooks."""
    pod = gpu_pod(name, {"nvidia.com/gpu": str(gpus)})
    pod["spec"]["containers"][0]["imagePullPolicy"] = "Sometimes"
    return pod


def test_templates_of_pods_never_stored_are_pruned(
    webhook: Webhook, api_client: client.ApiClient, namespace: str, control_plane: ControlPlane
) -> None:
    """Five pods the API server refuses after gpu2dra made their templates: none stored, five
    templates; prune-templates deletes them once past --min-age. Each create is logged with the
    review's uid and the caller the API server names."""
    webhook.set_mode(api_client, namespace, "enabled")
    core = client.CoreV1Api(api_client)
    for gpus in range(1, 6):
        try:
            core.create_namespaced_pod(namespace, refused_pod(f"bad-{gpus}", gpus))
        except ApiException as err:
            assert err.status == 422, err.body
        else:
            raise AssertionError("the API server stored an invalid pod")
    assert core.list_namespaced_pod(namespace).items == []
    made = {t["metadata"]["name"] for t in templates_in(api_client, namespace)}
    assert len(made) == 5

    logged = [
        json.loads(line)
        for line in webhook.log.read_text().splitlines()
        if line.startswith("{") and '"template"' in line and namespace in line
    ]
    assert {line["template"] for line in logged} == made
    assert all(line["user"] == ADMIN_USER and line["uid"] for line in logged)

    started = time.monotonic()
    applied = gpu2dra(
        control_plane.kubeconfig,
        *("prune-templates", "-n", namespace, "--min-age", "0", "--apply"),
        check=0,
    ).stdout
    seconds = time.monotonic() - started
    assert applied.count(": no live pod used it") == 5, applied
    assert templates_in(api_client, namespace) == []
    print(f"5 refused pods: 5 templates; pruned in {seconds:.1f}s")


def test_a_template_a_workload_names_outlives_its_pods(
    webhook: Webhook, api_client: client.ApiClient, namespace: str, control_plane: ControlPlane
) -> None:
    """A Deployment at 0 replicas and a suspended CronJob, their pod templates naming gpu2dra's
    templates (a manifest translated offline): pruning keeps both, and deletes the third."""
    resource = client.ResourceV1Api(api_client)
    idle, nightly, unused = (own_template(i) for i in range(3))
    for template in (idle, nightly, unused):
        resource.create_namespaced_resource_claim_template(namespace, template)

    def pod_template(template: Obj, restart: str) -> Obj:
        name = template["metadata"]["name"]
        return {
            "metadata": {"labels": {"app": "x"}},
            "spec": {
                "restartPolicy": restart,
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": name}],
                "containers": [
                    {"name": "main", "image": "cuda:12", "resources": {"claims": [{"name": "gpu"}]}}
                ],
            },
        }

    deployment = {
        "metadata": {"name": "idle"},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "x"}},
            "template": pod_template(idle, "Always"),
        },
    }
    client.AppsV1Api(api_client).create_namespaced_deployment(namespace, deployment)
    cronjob = {
        "metadata": {"name": "nightly"},
        "spec": {
            "schedule": "0 3 * * *",
            "suspend": True,
            "jobTemplate": {"spec": {"template": pod_template(nightly, "Never")}},
        },
    }
    client.BatchV1Api(api_client).create_namespaced_cron_job(namespace, cronjob)

    applied = gpu2dra(
        control_plane.kubeconfig,
        *("prune-templates", "-n", namespace, "--min-age", "0", "--apply"),
        check=0,
    ).stdout
    assert (
        f"kept {namespace}/{idle['metadata']['name']}: named by the pod template of "
        "Deployment idle" in applied
    ), applied
    assert (
        f"kept {namespace}/{nightly['metadata']['name']}: named by the pod template of "
        "CronJob nightly" in applied
    ), applied
    assert f"deleted {namespace}/{unused['metadata']['name']}" in applied
    left = {t["metadata"]["name"] for t in templates_in(api_client, namespace)}
    assert left == {idle["metadata"]["name"], nightly["metadata"]["name"]}


def test_a_namespace_at_its_bound_gets_no_new_template(
    webhook: Webhook, api_client: client.ApiClient, namespace: str, control_plane: ControlPlane
) -> None:
    """A namespace holding templatesPerNamespace of gpu2dra's templates: the next pod that
    needs a new one is stored unchanged, with the warning, and counted."""
    bound = int(DEFAULT["templatesPerNamespace"])
    resource = client.ResourceV1Api(api_client)
    before = webhook.metric("gpu2dra_cache_objects", cache="resourceclaimtemplates")
    for i in range(bound):
        resource.create_namespaced_resource_claim_template(namespace, own_template(100 + i))
    wait_for(
        lambda: (
            webhook.metric("gpu2dra_cache_objects", cache="resourceclaimtemplates")
            >= before + bound
            or None
        ),
        60,
        "the webhook's cache to hold the namespace's templates",
    )
    webhook.set_mode(api_client, namespace, "enabled")
    counted = webhook.metric("gpu2dra_outcomes_total", code="template-limit")

    stored, warnings = control_plane.create(namespace, gpu_pod("one", {"nvidia.com/gpu": 1}))

    assert f"holds {bound} ResourceClaimTemplates of gpu2dra's" in warnings
    assert "resourceClaims" not in stored["spec"]
    assert stored["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    assert len(templates_in(api_client, namespace)) == bound
    assert webhook.metric("gpu2dra_outcomes_total", code="template-limit") == counted + 1

"""gpu2dra's own templates on the real control plane: a template under gpu2dra's name that is
not gpu2dra's is never used, the name space is reserved to gpu2dra's identity, a deleted
template is made again, and pruning never takes one a pod uses."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from app.core.catalog import Catalog
from app.core.policy import load_policy
from app.core.translate import translate
from tests.e2e.inspecting import gpu2dra
from tests.support.cluster import (
    add_gpu_node,
    allocated_devices,
    gpu_pod,
    read_pod,
    templates_in,
    wait_for,
    wait_for_pod_scheduled,
)
from tests.support.controlplane import ControlPlane
from tests.support.webhook import Webhook

Obj = dict[str, Any]
MANAGED_BY = {"app.kubernetes.io/managed-by": "gpu2dra"}
pytestmark = pytest.mark.every_release


def gpu2dras_template(webhook: Webhook, gpus: int) -> Obj:
    """The template gpu2dra makes for gpu_pod(..., nvidia.com/gpu: gpus)."""
    policy = load_policy(webhook.policy)
    spec = gpu_pod("x", {"nvidia.com/gpu": gpus})["spec"]
    (template,) = translate(spec, policy, Catalog.of(policy.device_classes)).templates
    return copy.deepcopy(template)


@pytest.fixture
def mallory(control_plane: ControlPlane) -> Iterator[client.ApiClient]:
    """Another identity, one RBAC lets do anything: only gpu2dra's /validate stands between
    it and gpu2dra's templates."""
    api = control_plane.api_client()
    api.set_default_header("Impersonate-User", "mallory")
    api.set_default_header("Impersonate-Group", "system:masters")
    yield api
    api.close()


def create_template(api: client.ApiClient, namespace: str, template: Obj) -> Obj:
    made = client.ResourceV1Api(api).create_namespaced_resource_claim_template(namespace, template)
    return api.sanitize_for_serialization(made)  # type: ignore[no-any-return]


def refusal(api: client.ApiClient, namespace: str, template: Obj) -> str:
    with pytest.raises(ApiException) as caught:
        create_template(api, namespace, template)
    assert caught.value.status == 403, caught.value.body
    return str(json.loads(caught.value.body)["message"])


def squat_then_enable(
    webhook: Webhook, api: client.ApiClient, namespace: str, template: Obj
) -> None:
    """Create `template` while the namespace is not yet gpu2dra's (no webhook sees it), then
    enable the namespace. One with gpu2dra's label: once the webhook's cache holds it. The
    cache holds no other (its watch selects gpu2dra's label): the webhook finds one under its
    name by the create's AlreadyExists."""
    before = webhook.metric("gpu2dra_cache_objects", cache="resourceclaimtemplates")
    create_template(api, namespace, template)
    labels = template["metadata"].get("labels") or {}
    if labels.get("app.kubernetes.io/managed-by") != "gpu2dra":
        webhook.set_mode(api, namespace, "enabled")
        return
    wait_for(
        lambda: (
            webhook.metric("gpu2dra_cache_objects", cache="resourceclaimtemplates") > before or None
        ),
        30,
        "the webhook's cache to see the template",
    )
    webhook.set_mode(api, namespace, "enabled")


def assert_left_unchanged(stored: Obj, warnings: str, name: str) -> None:
    assert f"ResourceClaimTemplate {stored['metadata']['namespace']}/{name} is not gpu2dra's" in (
        warnings
    )
    assert "pod admitted unchanged" in warnings
    assert "resourceClaims" not in stored["spec"]
    assert stored["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}


def test_a_squatted_name_is_not_used(
    webhook: Webhook,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    gpu_nodes: list[str],
) -> None:
    """A 3-GPU template under the name gpu2dra gives a one-GPU pod: the pod is not given it."""
    add_gpu_node(api_client, gpu_nodes, gpus=4)
    squat = gpu2dras_template(webhook, 1)
    squat["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] = 3
    squat_then_enable(webhook, api_client, namespace, squat)
    refused = webhook.metric("gpu2dra_templates_refused_total")

    stored, warnings = control_plane.create(namespace, gpu_pod("one", {"nvidia.com/gpu": 1}))

    assert_left_unchanged(stored, warnings, squat["metadata"]["name"])
    assert webhook.metric("gpu2dra_templates_refused_total") == refused + 1
    # A pod of another shape is translated as ever, beside the squatter.
    two, warnings = control_plane.create(namespace, gpu_pod("two", {"nvidia.com/gpu": 2}))
    assert warnings == "" and two["spec"]["resourceClaims"]
    wait_for_pod_scheduled(api_client, namespace, "two")
    assert len(allocated_devices(api_client, read_pod(api_client, namespace, "two"))) == 2


def test_a_template_without_gpu2dras_label_is_not_used(
    webhook: Webhook, api_client: client.ApiClient, control_plane: ControlPlane, namespace: str
) -> None:
    """Exactly gpu2dra's spec and name, but not its label: not gpu2dra's either."""
    relabelled = gpu2dras_template(webhook, 1)
    relabelled["metadata"]["labels"] = {"app.kubernetes.io/managed-by": "someone"}
    squat_then_enable(webhook, api_client, namespace, relabelled)

    stored, warnings = control_plane.create(namespace, gpu_pod("one", {"nvidia.com/gpu": 1}))

    assert_left_unchanged(stored, warnings, relabelled["metadata"]["name"])


def test_another_identity_may_not_write_gpu2dras_templates(
    webhook: Webhook, api_client: client.ApiClient, mallory: client.ApiClient, namespace: str
) -> None:
    webhook.set_mode(api_client, namespace, "enabled")
    exact = gpu2dras_template(webhook, 1)
    # Another spec under gpu2dra's name and label (one template exactly as gpu2dra writes it
    # is anyone's to apply: tests/e2e/test_gitops_templates.py).
    squat = copy.deepcopy(exact)
    squat["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] = 2
    message = refusal(mallory, namespace, squat)
    assert "the name prefix 'gpu2dra-' and the label app.kubernetes.io/managed-by=gpu2dra" in (
        message
    )
    assert "are reserved to gpu2dra (admin), and 'mallory' is not it" in message

    labelled = {**squat, "metadata": {"name": "mine", "labels": MANAGED_BY}}
    assert "the label app.kubernetes.io/managed-by=gpu2dra are reserved" in refusal(
        mallory, namespace, labelled
    )
    # Nothing of gpu2dra's: anyone's.
    create_template(mallory, namespace, {**squat, "metadata": {"name": "mine"}})


def test_another_identity_may_not_take_the_label_off_gpu2dras_template(
    webhook: Webhook,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    mallory: client.ApiClient,
    namespace: str,
) -> None:
    webhook.set_mode(api_client, namespace, "enabled")
    control_plane.create(namespace, gpu_pod("one", {"nvidia.com/gpu": 1}))
    (template,) = templates_in(api_client, namespace)
    name = template["metadata"]["name"]
    patch = {"metadata": {"labels": {"app.kubernetes.io/managed-by": None}}}
    with pytest.raises(ApiException) as caught:
        client.ResourceV1Api(mallory).patch_namespaced_resource_claim_template(
            name, namespace, patch
        )
    assert caught.value.status == 403
    assert "reserved to gpu2dra" in json.loads(caught.value.body)["message"]
    (still,) = templates_in(api_client, namespace)
    assert still["metadata"]["labels"] == MANAGED_BY


def test_gpu2dras_identity_may_write_them(
    webhook: Webhook, api_client: client.ApiClient, control_plane: ControlPlane, namespace: str
) -> None:
    """The e2e webhook runs with the admin kubeconfig: admin is its identity. A template it
    made ahead of time is used as gpu2dra's own."""
    webhook.set_mode(api_client, namespace, "enabled")
    ahead = gpu2dras_template(webhook, 1)
    create_template(api_client, namespace, ahead)
    created = webhook.metric("gpu2dra_templates_created_total")

    stored, warnings = control_plane.create(namespace, gpu_pod("one", {"nvidia.com/gpu": 1}))

    assert warnings == ""
    (claim,) = stored["spec"]["resourceClaims"]
    assert claim["resourceClaimTemplateName"] == ahead["metadata"]["name"]
    assert webhook.metric("gpu2dra_templates_created_total") == created


def test_a_deleted_template_is_made_again(
    webhook: Webhook,
    api_client: client.ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    gpu_nodes: list[str],
) -> None:
    add_gpu_node(api_client, gpu_nodes, gpus=2)
    webhook.set_mode(api_client, namespace, "enabled")
    control_plane.create(namespace, gpu_pod("first", {"nvidia.com/gpu": 1}))
    (template,) = templates_in(api_client, namespace)
    name = template["metadata"]["name"]
    cached = webhook.metric("gpu2dra_cache_objects", cache="resourceclaimtemplates")
    # A cleanup script, a GitOps prune:
    client.ResourceV1Api(api_client).delete_namespaced_resource_claim_template(name, namespace)
    wait_for(
        lambda: (
            webhook.metric("gpu2dra_cache_objects", cache="resourceclaimtemplates") < cached or None
        ),
        30,
        "the webhook's cache to see the delete",
    )

    stored, warnings = control_plane.create(namespace, gpu_pod("next", {"nvidia.com/gpu": 1}))

    assert warnings == ""
    assert stored["spec"]["resourceClaims"][0]["resourceClaimTemplateName"] == name
    assert [t["metadata"]["name"] for t in templates_in(api_client, namespace)] == [name]
    wait_for_pod_scheduled(api_client, namespace, "next")


def test_explain_says_a_pods_template_went(
    webhook: Webhook, api_client: client.ApiClient, control_plane: ControlPlane, namespace: str
) -> None:
    """A pod admitted with gpu2dra's template, which went before its claim was made."""
    webhook.set_mode(api_client, namespace, "enabled")
    gone = gpu2dras_template(webhook, 1)["metadata"]["name"]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "orphan"},
        "spec": {
            "resourceClaims": [{"name": "main-gpu", "resourceClaimTemplateName": gone}],
            "containers": [
                {"name": "c", "image": "x", "resources": {"claims": [{"name": "main-gpu"}]}}
            ],
        },
    }
    control_plane.create(namespace, pod)

    def explained() -> str | None:
        text = gpu2dra(control_plane.kubeconfig, "explain", "pod", "orphan", "-n", namespace).stdout
        return text if "kube-controller-manager: PodResourceClaim main-gpu:" in text else None

    text = wait_for(explained, 60, "the resourceclaim controller's event in explain")
    assert (
        f"FAIL  claim main-gpu: gpu2dra's ResourceClaimTemplate {namespace}/{gone} is missing"
        in (text)
    )
    assert "gpu2dra makes the template again for the new pod" in text


def test_pruning_keeps_a_template_a_pod_uses(
    webhook: Webhook, api_client: client.ApiClient, control_plane: ControlPlane, namespace: str
) -> None:
    webhook.set_mode(api_client, namespace, "enabled")
    control_plane.create(namespace, gpu_pod("kept", {"nvidia.com/gpu": 1}))
    control_plane.create(namespace, gpu_pod("done", {"nvidia.com/gpu": 2}))
    used = gpu2dras_template(webhook, 1)["metadata"]["name"]
    unused = gpu2dras_template(webhook, 2)["metadata"]["name"]
    assert {t["metadata"]["name"] for t in templates_in(api_client, namespace)} == {used, unused}
    client.CoreV1Api(api_client).delete_namespaced_pod("done", namespace, grace_period_seconds=0)
    wait_for(
        lambda: (
            not client.CoreV1Api(api_client)
            .list_namespaced_pod(namespace, field_selector="metadata.name=done")
            .items
            or None
        ),
        30,
        "pod done to go",
    )
    prune = ("prune-templates", "-n", namespace, "--min-age", "0")

    dry = gpu2dra(control_plane.kubeconfig, *prune, check=0).stdout
    assert f"would delete {namespace}/{unused}: no live pod uses it" in dry
    assert f"keep {namespace}/{used}: used by pod kept" in dry
    assert "a dry run: --apply deletes them" in dry
    assert len(templates_in(api_client, namespace)) == 2

    young = gpu2dra(control_plane.kubeconfig, "prune-templates", "-n", namespace, check=0).stdout
    assert f"keep {namespace}/{unused}: unused, but made " in young

    applied = gpu2dra(control_plane.kubeconfig, *prune, "--apply", check=0).stdout
    assert f"deleted {namespace}/{unused}: no live pod used it" in applied
    assert f"kept {namespace}/{used}: used by pod kept" in applied
    assert [t["metadata"]["name"] for t in templates_in(api_client, namespace)] == [used]

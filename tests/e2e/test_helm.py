"""The chart installed into the real API server: every object accepted, the CA kept across
upgrades, the webhook configurations removed on uninstall, and RBAC exactly as granted; and
every object the chart can render, custom kinds included, accepted by strict validation."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.config import new_client_from_config

from tests.support.controlplane import ControlPlane
from tests.support.crds import crd_files, go_binary
from tests.support.rbac import GRANTED
from tests.support.webhook import CHART, RELEASE_NAMESPACE, render_chart

Obj = dict[str, Any]
NAME = "gpu2dra"


def webhook_configurations(api: client.ApiClient) -> dict[str, Obj]:
    admission = client.AdmissionregistrationV1Api(api)
    found = {}
    for kind, listed in (
        ("mutating", admission.list_mutating_webhook_configuration()),
        ("validating", admission.list_validating_webhook_configuration()),
    ):
        for item in listed.items:
            if item.metadata.name == NAME:
                found[kind] = api.sanitize_for_serialization(item)
    return found


def tls_secret(api: client.ApiClient) -> Obj:
    secret = client.CoreV1Api(api).read_namespaced_secret(f"{NAME}-tls", RELEASE_NAMESPACE)
    return dict(secret.data)


@pytest.fixture(scope="module")
def installed(control_plane: ControlPlane, api_client: client.ApiClient) -> Iterator[None]:
    control_plane.run_helm(
        "install",
        NAME,
        str(CHART),
        "--namespace",
        RELEASE_NAMESPACE,
        "--create-namespace",
    )
    try:
        yield
    finally:
        control_plane.run_helm("uninstall", NAME, "--namespace", RELEASE_NAMESPACE)


def test_install_upgrade_uninstall(
    control_plane: ControlPlane, api_client: client.ApiClient, installed: None
) -> None:
    configs = webhook_configurations(api_client)
    secret = tls_secret(api_client)
    assert set(configs) == {"mutating", "validating"}
    for config in configs.values():
        for hook in config["webhooks"]:
            assert hook["clientConfig"]["caBundle"] == secret["ca.crt"]
            assert hook["clientConfig"]["service"]["name"] == NAME
            assert hook["clientConfig"]["service"]["namespace"] == RELEASE_NAMESPACE

    control_plane.run_helm(
        "upgrade",
        NAME,
        str(CHART),
        "--namespace",
        RELEASE_NAMESPACE,
        "--set",
        "replicaCount=3",
    )
    assert tls_secret(api_client) == secret, "the upgrade keeps the CA and the certificate"
    for config in webhook_configurations(api_client).values():
        assert {h["clientConfig"]["caBundle"] for h in config["webhooks"]} == {secret["ca.crt"]}
    deployment = client.AppsV1Api(api_client).read_namespaced_deployment(NAME, RELEASE_NAMESPACE)
    assert deployment.spec.replicas == 3


def test_uninstall_removes_the_webhooks(
    control_plane: ControlPlane, api_client: client.ApiClient
) -> None:
    control_plane.run_helm(
        "install",
        "gone",
        str(CHART),
        "--namespace",
        "gpu2dra-gone",
        "--create-namespace",
        "--set",
        "fullnameOverride=gone",
    )
    admission = client.AdmissionregistrationV1Api(api_client)
    admission.read_mutating_webhook_configuration("gone")
    control_plane.run_helm("uninstall", "gone", "--namespace", "gpu2dra-gone")
    for read in (
        admission.read_mutating_webhook_configuration,
        admission.read_validating_webhook_configuration,
    ):
        with pytest.raises(ApiException) as err:
            read("gone")
        assert err.value.status == 404


@pytest.fixture
def custom_resource_definitions(control_plane: ControlPlane) -> Iterator[None]:
    """cert-manager's and the Prometheus operator's CRDs, served by the API server."""
    files = [arg for path in crd_files(go_binary()) for arg in ("-f", str(path))]
    control_plane.kubectl("create", *files)
    try:
        control_plane.kubectl("wait", "--for=condition=Established", "--timeout=60s", *files)
        yield
    finally:
        control_plane.kubectl("delete", *files)


def dry_run_strict(plane: ControlPlane, namespace: str, docs: list[Obj]) -> str:
    """`kubectl create --dry-run=server --validate=strict`: errors, or what was accepted."""
    done = plane.run_kubectl(
        "create",
        "--dry-run=server",
        "--validate=strict",
        "-n",
        namespace,
        "-f",
        "-",
        stdin={"apiVersion": "v1", "kind": "List", "items": docs},
    )
    return done.stdout if done.returncode == 0 else done.stderr


def test_every_object_passes_strict_server_validation(
    control_plane: ControlPlane, custom_resource_definitions: None, namespace: str
) -> None:
    docs = render_chart(
        control_plane.helm,
        "fullnameOverride=strict",
        "tls.mode=cert-manager",
        "serviceMonitor.enabled=true",
        "networkPolicy.enabled=true",
        "networkPolicy.webhookFrom[0].ipBlock.cidr=10.0.0.0/8",
        "networkPolicy.metricsFrom[0].podSelector.matchLabels.app=prometheus",
        "exporter.enabled=true",
        "exporter.networkPolicy.enabled=true",
        "exporter.networkPolicy.from[0].namespaceSelector.matchLabels.team=monitoring",
        namespace=namespace,
    )
    accepted = dry_run_strict(control_plane, namespace, docs)
    for doc in docs:
        group = doc["apiVersion"].rpartition("/")[0]
        kind = f"{doc['kind'].lower()}.{group}" if group else doc["kind"].lower()
        assert f"{kind}/{doc['metadata']['name']} created (server dry run)" in accepted, accepted

    (serving,) = [d for d in docs if d["metadata"]["name"] == "strict-serving"]
    serving["spec"]["dnsName"] = ["strict"]
    refused = dry_run_strict(control_plane, namespace, [serving])
    assert 'unknown field "dnsName"' in refused


def service_account_client(
    plane: ControlPlane, name: str = NAME, namespace: str = RELEASE_NAMESPACE
) -> client.ApiClient:
    with tempfile.TemporaryDirectory() as tmp:
        kubeconfig = Path(tmp) / "kubeconfig"
        plane.write_service_account_kubeconfig(kubeconfig, name, namespace)
        return new_client_from_config(str(kubeconfig))


def resource_rules(api: client.ApiClient, namespace: str) -> set[tuple[str, str, str]]:
    """(group, resource, verb) for each thing the client's user may do in `namespace`."""
    review = client.AuthorizationV1Api(api).create_self_subject_rules_review(
        {"spec": {"namespace": namespace}}
    )
    return {
        (group, resource, verb)
        for rule in review.status.resource_rules
        for group in rule.api_groups
        for resource in rule.resources
        for verb in rule.verbs
    }


def test_service_account_can_do_exactly_what_rbac_grants(
    control_plane: ControlPlane, api_client: client.ApiClient, installed: None, namespace: str
) -> None:
    # What the default RBAC policy grants every user varies by release (1.37 adds reading
    # ClusterTrustBundles): the namespace's default ServiceAccount, bound to nothing, says.
    with service_account_client(control_plane, "default", namespace) as nobody:
        every_user = resource_rules(nobody, namespace)
    assert ("authorization.k8s.io", "selfsubjectrulesreviews", "create") in every_user
    with service_account_client(control_plane) as sa:
        rules = resource_rules(sa, namespace)
        assert rules >= every_user
        assert rules - every_user == GRANTED

        resource = client.ResourceV1Api(sa)
        client.CoreV1Api(sa).list_namespace()
        client.CoreV1Api(sa).list_resource_quota_for_all_namespaces()
        resource.list_device_class()
        resource.list_resource_slice()  # which drivers share devices (consumable capacity)
        # Kueue's objects by name, as the caches watch them; no other ConfigMap.
        named = "metadata.name=kueue-manager-config"
        client.CoreV1Api(sa).list_namespaced_config_map("kueue-system", field_selector=named)
        client.AppsV1Api(sa).list_namespaced_deployment(
            "kueue-system", field_selector="metadata.name=kueue-controller-manager"
        )
        with pytest.raises(ApiException) as others:
            client.CoreV1Api(sa).list_namespaced_config_map("kueue-system")
        assert others.value.status == 403
        resource.list_resource_claim_template_for_all_namespaces()
        template = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "rbac-check"},
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [
                            {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}
                        ]
                    }
                }
            },
        }
        client.CustomObjectsApi(sa).create_namespaced_custom_object(
            "resource.k8s.io", "v1", namespace, "resourceclaimtemplates", template
        )
        with pytest.raises(ApiException) as missing:
            resource.read_namespaced_resource_claim("none", namespace)
        assert missing.value.status == 404  # allowed to look, and nothing is there

        forbidden: list[Callable[[], object]] = [
            lambda: client.CoreV1Api(sa).list_namespaced_pod(namespace),
            lambda: client.CoreV1Api(sa).list_namespaced_secret(RELEASE_NAMESPACE),
            lambda: client.CoreV1Api(sa).patch_namespace(namespace, {"metadata": {}}),
            lambda: resource.delete_namespaced_resource_claim_template("rbac-check", namespace),
            lambda: resource.list_namespaced_resource_claim(namespace),
            lambda: resource.delete_device_class("gpu.nvidia.com"),
            lambda: resource.delete_collection_resource_slice(),
        ]
        for call in forbidden:
            with pytest.raises(ApiException) as err:
                call()
            assert err.value.status == 403

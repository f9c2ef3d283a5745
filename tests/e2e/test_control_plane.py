"""The control plane itself, without the webhook: a hand-written ResourceClaimTemplate gets a
ResourceClaim from the controller-manager and two fake GPUs from the scheduler."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from kubernetes import client

from tests.e2e.controlplane import ControlPlane
from tests.e2e.fixtures import (
    GPU_DRIVER,
    allocated_devices,
    create_gpu_node,
    create_node,
    create_nvidia_device_classes,
    delete_node,
    pod_resource_claims,
    wait_for_pod_scheduled,
)


def test_version_is_kubernetes_1_35(
    control_plane: ControlPlane, api_client: client.ApiClient
) -> None:
    version = client.VersionApi(api_client).get_code()
    assert version.git_version.startswith("v1.35."), version.git_version
    assert (version.major, version.minor) == ("1", "35")


@pytest.fixture
def gpu_node(api_client: client.ApiClient) -> Iterator[str]:
    """A node with two A100s, next to one without GPUs, so placement is DRA's doing."""
    suffix = uuid.uuid4().hex[:6]
    gpu_name, cpu_name = f"gpu-node-{suffix}", f"cpu-node-{suffix}"
    create_nvidia_device_classes(api_client)
    create_node(api_client, cpu_name)
    create_gpu_node(api_client, gpu_name, gpus=2)
    yield gpu_name
    delete_node(api_client, gpu_name)
    delete_node(api_client, cpu_name)


def test_scheduler_allocates_gpus_from_resource_slices(
    api_client: client.ApiClient, namespace: str, gpu_node: str
) -> None:
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "two-gpus"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpu",
                            "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2},
                        }
                    ]
                }
            }
        },
    }
    client.CustomObjectsApi(api_client).create_namespaced_custom_object(
        "resource.k8s.io", "v1", namespace, "resourceclaimtemplates", template
    )
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "trainer"},
        "spec": {
            "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "two-gpus"}],
            "containers": [
                {
                    "name": "cuda",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"claims": [{"name": "gpus"}]},
                }
            ],
        },
    }
    client.CoreV1Api(api_client).create_namespaced_pod(namespace, client.V1Pod.model_validate(pod))

    bound = wait_for_pod_scheduled(api_client, namespace, "trainer")

    assert bound["spec"]["nodeName"] == gpu_node
    claims = pod_resource_claims(api_client, bound)
    assert len(claims) == 1
    claim = claims[0]
    assert claim["metadata"]["name"].startswith("trainer-gpus-")
    assert claim["metadata"]["ownerReferences"][0]["name"] == "trainer"
    results = allocated_devices(api_client, bound)
    assert sorted((r["driver"], r["pool"], r["device"], r["request"]) for r in results) == [
        (GPU_DRIVER, gpu_node, "gpu-0", "gpu"),
        (GPU_DRIVER, gpu_node, "gpu-1", "gpu"),
    ]
    reserved = claim["status"]["reservedFor"]
    assert [(r["resource"], r["name"]) for r in reserved] == [("pods", "trainer")]

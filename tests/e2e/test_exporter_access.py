"""`gpu2dra exporter --secure-metrics` against the real API server: HTTPS, and /metrics only
for a bearer token the API server authenticates (TokenReview) and allows to `get` the
non-resource URL /metrics (SubjectAccessReview), as Prometheus' ServiceAccount is allowed by the
chart's metrics-reader ClusterRole; everyone else gets 401 or 403 and no series. The probes
stay open (the kubelet has no token). Plain HTTP is not served at all."""

from __future__ import annotations

import http.client
import ssl
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from app.webhook.certs import make_certs
from tests.e2e.exporting import INFO, Running, running_exporter
from tests.support.controlplane import ControlPlane

READER = "gpu2dra-metrics-reader"


def token(core: client.CoreV1Api, namespace: str, name: str) -> str:
    core.create_namespaced_service_account(
        namespace, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name=name))
    )
    request = client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=600)
    )
    made = core.create_namespaced_service_account_token(name, namespace, request)
    return str(made.status.token)


@pytest.fixture
def tokens(api_client: client.ApiClient, namespace: str) -> Iterator[dict[str, str]]:
    """A token of a ServiceAccount bound to a ClusterRole that may get /metrics (the chart's
    metrics-reader), and one of a ServiceAccount bound to nothing."""
    core, rbac = (
        client.CoreV1Api(api_client),
        client.RbacAuthorizationV1Api(api_client),
    )
    rbac.create_cluster_role(
        client.V1ClusterRole(
            metadata=client.V1ObjectMeta(name=READER),
            rules=[client.V1PolicyRule(non_resource_urls=["/metrics"], verbs=["get"])],
        )
    )
    rbac.create_cluster_role_binding(
        client.V1ClusterRoleBinding(
            metadata=client.V1ObjectMeta(name=READER),
            role_ref=client.V1RoleRef(
                api_group="rbac.authorization.k8s.io", kind="ClusterRole", name=READER
            ),
            subjects=[
                client.RbacV1Subject(kind="ServiceAccount", name="prometheus", namespace=namespace)
            ],
        )
    )
    try:
        yield {
            "reader": token(core, namespace, "prometheus"),
            "other": token(core, namespace, "someone"),
        }
    finally:
        rbac.delete_cluster_role_binding(READER)
        rbac.delete_cluster_role(READER)


@pytest.fixture
def secure(control_plane: ControlPlane, tmp_path: Path) -> Iterator[Running]:
    with running_exporter(control_plane, tmp_path / "exporter.log", "--secure-metrics") as r:
        yield r


def test_only_an_allowed_token_reads_metrics(
    secure: Running, tokens: dict[str, str], namespace: str
) -> None:
    status, body = secure.get("/metrics", tokens["reader"])
    assert status == 200
    assert f"# TYPE {INFO} gauge" in body
    assert 'gpu2dra_cache_synced{cache="pods"} 1.0' in body

    status, body = secure.get("/metrics")
    assert (status, body) == (401, "a bearer token is required\n")
    status, body = secure.get("/metrics", "not-a-token")
    assert (status, body) == (401, "the token is not valid\n")
    status, body = secure.get("/metrics", tokens["other"])
    assert status == 403
    assert body == f"system:serviceaccount:{namespace}:someone may not get /metrics\n"
    assert INFO not in body

    # The probes need no token: the kubelet has none.
    assert secure.get("/readyz")[0] == 200
    assert secure.get("/healthz")[0] == 200


def test_plain_http_is_not_served(secure: Running) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", secure.port, timeout=5)
    try:
        connection.request("GET", "/healthz")
        with pytest.raises((http.client.HTTPException, ConnectionError)):
            connection.getresponse().read()
    finally:
        connection.close()


def test_a_certificate_of_ones_own(
    control_plane: ControlPlane, tmp_path: Path, tokens: dict[str, str]
) -> None:
    """--tls-cert-file and --tls-key-file: a client that verifies against its CA gets in."""
    paths = make_certs(["localhost"], ["127.0.0.1"]).write(tmp_path / "pki")
    options = ["--secure-metrics", "--tls-cert-file", str(paths["tls.crt"])]
    options += ["--tls-key-file", str(paths["tls.key"])]
    with running_exporter(control_plane, tmp_path / "exporter.log", *options) as running:
        verified = ssl.create_default_context(cafile=str(paths["ca.crt"]))
        request = urllib.request.Request(f"https://localhost:{running.port}/metrics")
        request.add_header("Authorization", f"Bearer {tokens['reader']}")
        with urllib.request.urlopen(request, timeout=5, context=verified) as answer:
            assert answer.status == 200
            assert INFO in answer.read().decode()

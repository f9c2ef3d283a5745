"""tls.mode=helm on the real API server: an upgrade keeps the CA until the Secret's
`gpu2dra.io/renew-after`, then makes a new CA and certificate, and the webhooks trust the new
CA and the old one together, so replicas still serving the old certificate (until the
kubelet updates their Secret volume) keep answering."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest
from cryptography import x509
from kubernetes import client

from tests.support.controlplane import ControlPlane
from tests.support.webhook import CHART

Obj = dict[str, Any]
NAME = "rotate"
NAMESPACE = "gpu2dra-rotate"


def secret(api: client.ApiClient) -> client.V1Secret:
    return client.CoreV1Api(api).read_namespaced_secret(f"{NAME}-tls", NAMESPACE)


def bundles(api: client.ApiClient) -> set[str]:
    admission = client.AdmissionregistrationV1Api(api)
    configs = [
        admission.read_mutating_webhook_configuration(NAME),
        admission.read_validating_webhook_configuration(NAME),
    ]
    return {hook.client_config.ca_bundle for c in configs for hook in c.webhooks}


def certificates(b64: str) -> list[x509.Certificate]:
    return x509.load_pem_x509_certificates(base64.b64decode(b64))


def helm(plane: ControlPlane, verb: str, *sets: str) -> None:
    args = [verb, NAME, str(CHART), "--namespace", NAMESPACE, "--set", f"fullnameOverride={NAME}"]
    for value in sets:
        args += ["--set", value]
    plane.run_helm(*args, *(["--create-namespace"] if verb == "install" else []))


@pytest.fixture
def installed_release(control_plane: ControlPlane) -> Iterator[None]:
    try:
        yield
    finally:
        control_plane.run_helm("uninstall", NAME, "--namespace", NAMESPACE)


def test_an_upgrade_past_renew_after_rotates_and_trusts_both_cas(
    control_plane: ControlPlane, api_client: client.ApiClient, installed_release: None
) -> None:
    # renew-after is the install itself: the next upgrade renews
    helm(control_plane, "install", "tls.validityDays=1", "tls.renewBeforeDays=1")
    first = secret(api_client)
    (old_ca,) = certificates(first.data["ca.crt"])
    assert bundles(api_client) == {first.data["ca.crt"]}

    helm(control_plane, "upgrade")  # the defaults: a year, renewed in its last 180 days
    second = secret(api_client)
    assert second.data["tls.crt"] != first.data["tls.crt"]
    new_ca, kept = certificates(second.data["ca.crt"])
    assert kept == old_ca and new_ca != old_ca
    leaf = x509.load_pem_x509_certificate(base64.b64decode(second.data["tls.crt"]))
    leaf.verify_directly_issued_by(new_ca)
    assert bundles(api_client) == {second.data["ca.crt"]}
    renew_after = second.metadata.annotations["gpu2dra.io/renew-after"]
    assert int(renew_after) > int(first.metadata.annotations["gpu2dra.io/renew-after"])

    helm(control_plane, "upgrade", "replicaCount=3")  # not due: everything kept
    third = secret(api_client)
    assert third.data == second.data
    assert third.metadata.annotations["gpu2dra.io/renew-after"] == renew_after

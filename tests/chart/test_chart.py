"""The Helm chart as `helm lint` and `helm template` see it, checked against the strict
Kubernetes 1.35 schemas."""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from cryptography import x509

from app.policy import load_policy, parse_policy
from tests.e2e.webhook import CHART, of_kind, render_chart

Obj = dict[str, Any]
# Kinds of cert-manager and the Prometheus operator: CRDs, with no upstream schema to check.
CUSTOM_KINDS = {"Certificate", "Issuer", "ServiceMonitor"}

MODES = {
    "helm": (),
    "cert-manager": ("tls.mode=cert-manager",),
    "secret": ("tls.mode=secret", "tls.secretName=my-tls", "tls.caBundle=Q0EK"),
    "everything": (
        "tls.mode=cert-manager",
        "networkPolicy.enabled=true",
        "serviceMonitor.enabled=true",
        "server.translateEndpoint=false",
        "policy.defaultMode=audit",
        "webhook.excludeNamespaces={ci,monitoring}",
    ),
}


def test_lint(helm: Path) -> None:
    done = subprocess.run(
        [str(helm), "lint", "--strict", str(CHART)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("mode", MODES)
def test_every_object_is_valid_kubernetes_1_35(helm: Path, mode: str) -> None:
    docs = render_chart(helm, *MODES[mode])
    checked = 0
    for doc in docs:
        if doc["kind"] in CUSTOM_KINDS:
            continue
        kubernetes_validate.validate(doc, "1.35", strict=True)
        checked += 1
    assert checked >= 9


def test_default_install(helm: Path) -> None:
    docs = render_chart(helm)
    kinds = sorted(d["kind"] for d in docs)
    assert kinds == sorted(
        [
            "ClusterRole",
            "ClusterRoleBinding",
            "ConfigMap",
            "Deployment",
            "MutatingWebhookConfiguration",
            "PodDisruptionBudget",
            "Secret",
            "Service",
            "ServiceAccount",
            "ValidatingWebhookConfiguration",
        ]
    )
    secret = of_kind(docs, "Secret")
    ca = base64.b64decode(secret["data"]["ca.crt"])
    cert = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
    cert.verify_directly_issued_by(x509.load_pem_x509_certificate(ca))
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "gpu2dra.gpu2dra-system.svc" in sans.get_values_for_type(x509.DNSName)
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        for hook in of_kind(docs, kind)["webhooks"]:
            assert hook["clientConfig"]["caBundle"] == secret["data"]["ca.crt"]
            assert hook["clientConfig"]["service"] == {
                "name": "gpu2dra",
                "namespace": "gpu2dra-system",
                "path": "/mutate" if kind.startswith("Mutating") else "/validate",
                "port": 443,
            }
            assert hook["admissionReviewVersions"] == ["v1"]


def test_mutating_webhook_settings(helm: Path) -> None:
    (hook,) = of_kind(render_chart(helm), "MutatingWebhookConfiguration")["webhooks"]
    assert hook["sideEffects"] == "NoneOnDryRun"
    assert hook["failurePolicy"] == "Ignore"
    assert hook["reinvocationPolicy"] == "IfNeeded"
    assert hook["timeoutSeconds"] == 5
    assert hook["rules"] == [
        {
            "operations": ["CREATE"],
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "resources": ["pods"],
            "scope": "Namespaced",
        }
    ]
    assert hook["namespaceSelector"]["matchExpressions"] == [
        {"key": "gpu2dra.io/migration", "operator": "In", "values": ["enabled", "audit"]},
        {
            "key": "kubernetes.io/metadata.name",
            "operator": "NotIn",
            "values": ["kube-system", "gpu2dra-system"],
        },
    ]
    (condition,) = hook["matchConditions"]
    assert "'nvidia.com/gpu', 'nvidia.com/mig-'" in condition["expression"]


def test_default_mode_widens_the_selector(helm: Path) -> None:
    docs = render_chart(helm, "policy.defaultMode=enabled", "webhook.excludeNamespaces={ci}")
    (hook,) = of_kind(docs, "MutatingWebhookConfiguration")["webhooks"]
    assert hook["namespaceSelector"]["matchExpressions"] == [
        {"key": "gpu2dra.io/migration", "operator": "NotIn", "values": ["disabled"]},
        {
            "key": "kubernetes.io/metadata.name",
            "operator": "NotIn",
            "values": ["kube-system", "gpu2dra-system", "ci"],
        },
    ]


def test_deployment_is_hardened(helm: Path) -> None:
    deployment = of_kind(render_chart(helm), "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert deployment["spec"]["replicas"] == 2
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["resources"]["limits"]["memory"] == "256Mi"
    assert "podAntiAffinity" in pod["affinity"]
    assert container["args"][:2] == ["--port=8443", "--cert=/etc/gpu2dra/tls/tls.crt"]


def test_pdb_only_with_replicas(helm: Path) -> None:
    assert "PodDisruptionBudget" not in {d["kind"] for d in render_chart(helm, "replicaCount=1")}


def test_rbac_is_least_privilege(helm: Path) -> None:
    rules = of_kind(render_chart(helm), "ClusterRole")["rules"]
    granted = {
        (g, r, v)
        for rule in rules
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
    }
    assert granted == {
        ("", "namespaces", "list"),
        ("", "namespaces", "watch"),
        ("resource.k8s.io", "deviceclasses", "list"),
        ("resource.k8s.io", "deviceclasses", "watch"),
        ("resource.k8s.io", "resourceclaimtemplates", "get"),
        ("resource.k8s.io", "resourceclaimtemplates", "list"),
        ("resource.k8s.io", "resourceclaimtemplates", "watch"),
        ("resource.k8s.io", "resourceclaimtemplates", "create"),
        ("resource.k8s.io", "resourceclaims", "get"),
    }


def test_cert_manager_injects_the_ca(helm: Path) -> None:
    docs = render_chart(helm, "tls.mode=cert-manager")
    assert "Secret" not in {d["kind"] for d in docs}
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        config = of_kind(docs, kind)
        assert config["metadata"]["annotations"] == {
            "cert-manager.io/inject-ca-from": "gpu2dra-system/gpu2dra-serving"
        }
        assert all("caBundle" not in h["clientConfig"] for h in config["webhooks"])
    serving = [d for d in docs if d["kind"] == "Certificate" and not d["spec"].get("isCA")]
    assert serving[0]["spec"]["secretName"] == "gpu2dra-tls"


def test_bring_your_own_secret(helm: Path) -> None:
    docs = render_chart(helm, *MODES["secret"])
    assert "Secret" not in {d["kind"] for d in docs}
    volumes = of_kind(docs, "Deployment")["spec"]["template"]["spec"]["volumes"]
    assert {"name": "tls", "secret": {"secretName": "my-tls"}} in volumes
    (hook,) = of_kind(docs, "MutatingWebhookConfiguration")["webhooks"]
    assert hook["clientConfig"]["caBundle"] == "Q0EK"


def test_policy_reaches_the_config_map(helm: Path) -> None:
    data = of_kind(render_chart(helm), "ConfigMap")["data"]["policy.yaml"]
    assert parse_policy(yaml.safe_load(data)) == load_policy(None)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (("webhok.url=https://x",), "additional properties 'webhok' not allowed"),
        (("policy.defaultMode=on",), "defaultMode"),
        (("webhook.mutating.failurePolicy=ignore",), "failurePolicy"),
        (("tls.mode=secret",), "tls.caBundle is required with tls.mode=secret"),
        (("webhook.url=http://insecure",), "/webhook/url"),
    ],
)
def test_mistakes_fail_the_install(helm: Path, values: tuple[str, ...], message: str) -> None:
    with pytest.raises(AssertionError) as err:
        render_chart(helm, *values)
    assert message in str(err.value)

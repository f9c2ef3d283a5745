"""The Helm chart as `helm lint` and `helm template` see it, checked against the strict
Kubernetes schemas of every release the control plane is tested on (1.37 and 1.34)."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import tarfile
import tomllib
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from jsonschema import Draft7Validator  # type: ignore[import-untyped]

from app.core.patch import RECORD_ANNOTATION
from app.core.policy import DEFAULT_POLICY_YAML, load_policy, parse_policy
from app.core.templates import TEMPLATE_PREFIX
from app.exporter.gpuinfo import EXTENDED_CLAIM
from tests.chart.render import CI_VALUES, render_setup, setup_values
from tests.support.crds import ValidationError, is_custom, validate_custom
from tests.support.rbac import GRANTED
from tests.support.validation import K8S_VERSIONS
from tests.support.webhook import CHART, of_kind, render_chart
from tools import k8s_schema

Obj = dict[str, Any]
Crds = dict[tuple[str, str], Obj]
# How many cert-manager and Prometheus operator objects each setup of ci/ renders (none when
# not listed).
CUSTOM_OBJECTS = {
    "cert-manager": 4,
    "own-issuer": 1,
    "everything": 6,
    "monitoring": 2,
    "secure-metrics": 2,
}
SETUPS = list(CI_VALUES)


def open_objects(node: Any, path: str = "") -> list[str]:
    """Where the schema lets an object hold properties it does not name."""
    if isinstance(node, list):
        return [p for i, item in enumerate(node) for p in open_objects(item, f"{path}/{i}")]
    if not isinstance(node, dict):
        return []
    types = node.get("type", [])
    is_open = "object" in types and node.get("additionalProperties", True) is True
    found = [path] if is_open else []
    return found + [p for k, v in node.items() for p in open_objects(v, f"{path}/{k}")]


def test_values_schema_is_closed_and_follows_the_newest_kubernetes() -> None:
    schema = json.loads(k8s_schema.SCHEMA_FILE.read_text())
    assert open_objects(schema) == ["/properties/global"]
    assert "subchart" in schema["properties"]["global"]["description"]
    expected = k8s_schema.regenerated(json.loads(k8s_schema.SCHEMA_FILE.read_text()))
    assert schema == expected, "run python -m tools.k8s_schema"


TYPOS = {
    "podSecurityContext.runAsNonRot=true": "at '/podSecurityContext': additional properties "
    "'runAsNonRot' not allowed",
    "resources.limit.cpu=1": "at '/resources': additional properties 'limit' not allowed",
    "securityContext.capabilities.dorp={ALL}": "at '/securityContext/capabilities': "
    "additional properties 'dorp' not allowed",
    "securityContext.seccompProfile.tpye=RuntimeDefault": "at '/securityContext/seccompProfile'"
    ": additional properties 'tpye' not allowed",
    "affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0]"
    ".podAffinityTerm.labelSelector.matchLabel.app=x": "at '/affinity/podAntiAffinity/"
    "preferredDuringSchedulingIgnoredDuringExecution/0/podAffinityTerm/labelSelector': "
    "additional properties 'matchLabel' not allowed",
    "tolerations[0].efect=NoSchedule": "at '/tolerations/0': additional properties 'efect'",
    "imagePullSecrets[0].nmae=registry": "at '/imagePullSecrets/0': additional properties "
    "'nmae' not allowed",
}


@pytest.mark.parametrize("command", ["template", "lint"])
@pytest.mark.parametrize("typo", TYPOS)
def test_a_nested_typo_fails_naming_the_field(helm: Path, command: str, typo: str) -> None:
    args = [str(helm), command, str(CHART), "--set", typo]
    done = subprocess.run(
        [*args, *(["--strict"] if command == "lint" else [])],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode != 0
    assert TYPOS[typo] in done.stdout + done.stderr


def test_lint(helm: Path) -> None:
    done = subprocess.run(
        [str(helm), "lint", "--strict", str(CHART)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_setup_has_values_the_schema_takes() -> None:
    schema = json.loads(k8s_schema.SCHEMA_FILE.read_text())
    validator = Draft7Validator(schema)
    assert len(SETUPS) >= 8
    for setup in SETUPS:
        errors = [e.message for e in validator.iter_errors(setup_values(setup))]
        assert errors == [], setup


def test_every_setup_is_in_the_readme_table() -> None:
    template = (CHART / "README.md.gotmpl").read_text()
    for path in CI_VALUES.values():
        assert f"| `{path.name}` |" in template


@pytest.mark.parametrize("setup", SETUPS)
def test_lint_every_setup(helm: Path, setup: str) -> None:
    done = subprocess.run(
        [str(helm), "lint", "--strict", str(CHART), "--values", str(CI_VALUES[setup])],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("setup", SETUPS)
def test_every_object_is_valid_kubernetes(helm: Path, setup: str, version: str) -> None:
    builtin = [d for d in render_setup(helm, setup) if not is_custom(d)]
    for doc in builtin:
        kubernetes_validate.validate(doc, version, strict=True)
    assert len(builtin) >= 9


@pytest.mark.parametrize("setup", SETUPS)
def test_every_custom_object_matches_its_crd(helm: Path, crds: Crds, setup: str) -> None:
    custom = [d for d in render_setup(helm, setup) if is_custom(d)]
    for doc in custom:
        validate_custom(doc, crds)
    assert len(custom) == CUSTOM_OBJECTS.get(setup, 0)


def test_the_package_leaves_out_the_setups_and_the_readme_template(
    helm: Path, tmp_path: Path
) -> None:
    done = subprocess.run(
        [str(helm), "package", str(CHART), "--destination", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    (package,) = tmp_path.glob("gpu2dra-*.tgz")
    with tarfile.open(package) as tar:
        names = {name.removeprefix("gpu2dra/") for name in tar.getnames()}
    assert {"Chart.yaml", "values.yaml", "values.schema.json", "README.md"} <= names
    assert "templates/tls-secret.yaml" in names
    assert not [n for n in names if n.startswith("ci/") or n.endswith(".gotmpl")]


def test_the_chart_names_the_project_where_the_package_and_the_image_do() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    urls = tomllib.loads((CHART.parents[1] / "pyproject.toml").read_text())["project"]["urls"]
    label = re.search(
        r'org\.opencontainers\.image\.source="([^"]+)"',
        (CHART.parents[1] / "Dockerfile").read_text(),
    )
    assert label is not None
    assert chart["home"] == urls["Homepage"]
    assert chart["sources"] == [urls["Source"]] == [label[1]]
    assert [m["url"] for m in chart["maintainers"]] == [urls["Homepage"]]


def test_crd_check_rejects_what_the_api_server_would(helm: Path, crds: Crds) -> None:
    docs = render_setup(helm, "cert-manager")
    (serving,) = [d for d in docs if d["metadata"]["name"] == "gpu2dra-serving"]
    for mistake, message in (
        ({"dnsName": ["x"]}, "'dnsName' was unexpected"),
        ({"privateKey": {"algorithm": "ECDSA", "sise": 256}}, "'sise' was unexpected"),
        ({"isCA": "yes"}, "'yes' is not of type 'boolean'"),
    ):
        wrong = {**serving, "spec": {**serving["spec"], **mistake}}
        with pytest.raises(ValidationError, match=message):
            validate_custom(wrong, crds)
    with pytest.raises(LookupError, match=r"no CRD serves cert-manager\.io/v2 Certificate"):
        validate_custom({**serving, "apiVersion": "cert-manager.io/v2"}, crds)
    with pytest.raises(kubernetes_validate.ValidationError):
        validate_custom({**serving, "metadata": {"name": "x", "lables": {}}}, crds)


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
            "ResourceQuota",  # admits the webhook's system-cluster-critical pods (GKE)
            "Secret",
            "Service",
            "ServiceAccount",
            "ValidatingWebhookConfiguration",
            # the account `helm test` runs doctor under (helmTest.enabled; its Pod is a hook)
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",
        ]
    )
    secret = of_kind(docs, "Secret")
    ca = base64.b64decode(secret["data"]["ca.crt"])
    cert = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
    cert.verify_directly_issued_by(x509.load_pem_x509_certificate(ca))
    # ECDSA P-256, as cert-manager's: a handshake costs gpu2dra half an RSA 2048 one's CPU
    key = serialization.load_pem_private_key(base64.b64decode(secret["data"]["tls.key"]), None)
    assert isinstance(key, ec.EllipticCurvePrivateKey) and key.curve.name == "secp256r1"
    assert isinstance(x509.load_pem_x509_certificate(ca).public_key(), ec.EllipticCurvePublicKey)
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
            "operations": ["CREATE", "UPDATE"],
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
    gpus, updates = hook["matchConditions"]
    assert "'nvidia.com/gpu', 'nvidia.com/mig-'" in gpus["expression"]
    # an UPDATE reaches gpu2dra only for a pod that carries its record
    assert f"'{RECORD_ANNOTATION}' in oldObject.metadata.annotations" in updates["expression"]


def test_validating_webhooks_see_only_what_they_can_refuse(helm: Path) -> None:
    claims, pods = of_kind(render_chart(helm), "ValidatingWebhookConfiguration")["webhooks"]
    # and a template's UPDATE: its labels can take gpu2dra's (reserved to gpu2dra's identity)
    assert [(r["resources"], r["operations"]) for r in claims["rules"] + pods["rules"]] == [
        (["resourceclaims"], ["CREATE"]),
        (["resourceclaimtemplates"], ["CREATE", "UPDATE"]),
        (["pods"], ["CREATE"]),
    ]
    made, itself = claims["matchConditions"]
    assert (
        "'resource.kubernetes.io/pod-claim-name' in object.metadata.annotations"
        in made["expression"]
    )
    # the annotation the scheduler puts on the claim it makes for the in-tree path
    assert f"'{EXTENDED_CLAIM}' in object.metadata.annotations" in made["expression"]
    # gpu2dra's own template creates are not sent back to it; it names its identity exactly
    assert itself["expression"] == (
        "request.userInfo.username != 'system:serviceaccount:gpu2dra-system:gpu2dra'"
    )
    _, translated = pods["matchConditions"]
    assert f"'{RECORD_ANNOTATION}' in object.metadata.annotations" in translated["expression"]
    assert f"startsWith('{TEMPLATE_PREFIX}')" in translated["expression"]


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
    assert "podAntiAffinity" in pod["affinity"]
    # The image's entrypoint is gpu2dra: the command comes first.
    assert container["args"][:3] == ["serve", "--port=8443", "--cert=/etc/gpu2dra/tls/tls.crt"]


def test_resources_request_cpu_and_memory_and_limit_only_memory(helm: Path) -> None:
    (container,) = of_kind(render_chart(helm), "Deployment")["spec"]["template"]["spec"][
        "containers"
    ]
    assert container["resources"] == {
        "requests": {"cpu": "100m", "memory": "128Mi"},
        "limits": {"memory": "256Mi"},
    }


def pdb(docs: list[Obj]) -> Obj | None:
    found = [d for d in docs if d["kind"] == "PodDisruptionBudget"]
    return found[0]["spec"] if found else None


def test_pdb_keeps_one_replica_and_never_guards_a_single_one(helm: Path) -> None:
    selector = {
        "matchLabels": {
            "app.kubernetes.io/name": "gpu2dra",
            "app.kubernetes.io/instance": "gpu2dra",
            "app.kubernetes.io/component": "webhook",
        }
    }
    assert pdb(render_chart(helm)) == {"minAvailable": 1, "selector": selector}
    assert pdb(render_chart(helm, "podDisruptionBudget.minAvailable=50%")) == {
        "minAvailable": "50%",
        "selector": selector,
    }
    assert pdb(render_setup(helm, "ha")) == {"maxUnavailable": 1, "selector": selector}
    assert pdb(render_chart(helm, "podDisruptionBudget.maxUnavailable=0")) == {
        "maxUnavailable": 0,
        "selector": selector,
    }
    assert pdb(render_chart(helm, "podDisruptionBudget.enabled=false")) is None
    assert pdb(render_chart(helm, "replicaCount=1")) is None
    assert pdb(render_chart(helm, "replicaCount=1", "podDisruptionBudget.enabled=true")) is None


def test_rbac_is_least_privilege(helm: Path) -> None:
    rules = by_name(render_chart(helm), "ClusterRole")["gpu2dra"]["rules"]
    granted = {
        (g, r, v)
        for rule in rules
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
    }
    assert granted == GRANTED


def by_name(docs: list[Obj], kind: str) -> dict[str, Obj]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def assert_cert_manager_serves(docs: list[Obj], issuer_ref: Obj) -> None:
    """The serving Certificate, issued by `issuer_ref`, and cert-manager injecting its CA."""
    assert "Secret" not in {d["kind"] for d in docs}
    serving = by_name(docs, "Certificate")["gpu2dra-serving"]["spec"]
    assert serving["issuerRef"] == issuer_ref
    assert serving["secretName"] == "gpu2dra-tls"
    assert serving["dnsNames"] == [
        "gpu2dra",
        "gpu2dra.gpu2dra-system",
        "gpu2dra.gpu2dra-system.svc",
    ]
    volumes = of_kind(docs, "Deployment")["spec"]["template"]["spec"]["volumes"]
    assert {"name": "tls", "secret": {"secretName": "gpu2dra-tls"}} in volumes
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        config = of_kind(docs, kind)
        assert config["metadata"]["annotations"] == {
            "cert-manager.io/inject-ca-from": "gpu2dra-system/gpu2dra-serving"
        }
        assert all("caBundle" not in h["clientConfig"] for h in config["webhooks"])


def test_cert_manager_with_its_own_ca(helm: Path) -> None:
    docs = render_setup(helm, "cert-manager")
    issuers = by_name(docs, "Issuer")
    assert {name: d["spec"] for name, d in issuers.items()} == {
        "gpu2dra-selfsigned": {"selfSigned": {}},
        "gpu2dra-ca": {"ca": {"secretName": "gpu2dra-ca"}},
    }
    certificates = by_name(docs, "Certificate")
    assert set(certificates) == {"gpu2dra-ca", "gpu2dra-serving"}
    ca = certificates["gpu2dra-ca"]["spec"]
    assert ca["isCA"] is True
    assert ca["secretName"] == "gpu2dra-ca"
    assert ca["issuerRef"] == {"name": "gpu2dra-selfsigned", "kind": "Issuer"}
    assert_cert_manager_serves(docs, {"name": "gpu2dra-ca", "kind": "Issuer"})


def test_cert_manager_with_your_issuer(helm: Path) -> None:
    docs = render_setup(helm, "own-issuer")
    assert "Issuer" not in {d["kind"] for d in docs}
    assert set(by_name(docs, "Certificate")) == {"gpu2dra-serving"}
    assert_cert_manager_serves(
        docs, {"name": "corp-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"}
    )


def test_bring_your_own_secret(helm: Path) -> None:
    docs = render_setup(helm, "secret")
    assert "Secret" not in {d["kind"] for d in docs}
    volumes = of_kind(docs, "Deployment")["spec"]["template"]["spec"]["volumes"]
    assert {"name": "tls", "secret": {"secretName": "my-tls"}} in volumes
    (hook,) = of_kind(docs, "MutatingWebhookConfiguration")["webhooks"]
    assert hook["clientConfig"]["caBundle"] == "Q0EK"


def config_map_policy(docs: list[Obj]) -> Obj:
    (config,) = [d for d in docs if d["kind"] == "ConfigMap" and "policy.yaml" in d["data"]]
    raw: Obj = yaml.safe_load(config["data"]["policy.yaml"])
    return raw


def test_no_overrides_run_the_embedded_default_policy(helm: Path) -> None:
    raw = config_map_policy(render_chart(helm))
    assert raw == {}
    assert parse_policy(raw) == load_policy(None)
    assert parse_policy(raw) == parse_policy(yaml.safe_load(DEFAULT_POLICY_YAML))


def test_policy_overrides_reach_the_config_map_alone(helm: Path) -> None:
    raw = config_map_policy(render_setup(helm, "policy"))
    assert raw == setup_values("policy")["policy"]
    policy = parse_policy(raw)
    assert policy.default_mode == "enabled"
    assert policy.on_error == "deny"
    assert [m.resource for m in policy.mappings] == ["example.com/gpu"]
    # what the overrides leave out is the embedded default's
    assert policy.skip_namespaces == load_policy(None).skip_namespaces
    assert policy.device_classes == load_policy(None).device_classes
    docs = render_chart(helm, "policy.keepNodeSelectors=true")
    assert config_map_policy(docs) == {"keepNodeSelectors": True}


def sent_resources(docs: list[Obj]) -> set[str]:
    """The resource names (patterns without their `*`) whose pods the mutating webhook's
    matchConditions send to gpu2dra."""
    (hook,) = of_kind(docs, "MutatingWebhookConfiguration")["webhooks"]
    condition = hook["matchConditions"][0]["expression"]
    (listed,) = set(re.findall(r"\[([^]]*)\]\.exists\(p, k\.startsWith\(p\)\)", condition))
    return set(re.findall(r"'([^']*)'", listed))


@pytest.mark.parametrize("setup", ["default", *SETUPS])
def test_webhooks_follow_the_policy_the_server_runs(helm: Path, setup: str) -> None:
    """The chart knows the two keys of the embedded default policy that its webhooks depend
    on (defaultMode, the mappings' names): they agree with the server's, for every setup."""
    docs = render_chart(helm) if setup == "default" else render_setup(helm, setup)
    policy = parse_policy(config_map_policy(docs))
    assert sent_resources(docs) == {m.resource.removesuffix("*") for m in policy.mappings}
    operator = "In" if policy.default_mode == "disabled" else "NotIn"
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        for hook in of_kind(docs, kind)["webhooks"]:
            assert hook["namespaceSelector"]["matchExpressions"][0]["operator"] == operator


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (("webhok.url=https://x",), "additional properties 'webhok' not allowed"),
        (("policy.defaultMode=on",), "defaultMode"),
        (("webhook.mutating.failurePolicy=ignore",), "failurePolicy"),
        (("tls.mode=secret",), "tls.caBundle is required with tls.mode=secret"),
        (("webhook.url=http://insecure",), "/webhook/url"),
        (("image.digest=latest",), "/image/digest"),
        (("containerPort=0",), "/containerPort"),
        (("podDisruptionBudget.minAvailabe=1",), "additional properties 'minAvailabe'"),
        (("serviceMonitor.labels.a=b",), "additional properties 'labels' not allowed"),
        (("serviceMonitor.tlsConfig.insecureSkipVerfy=true",), "'insecureSkipVerfy'"),
        (("prometheusRule.disabled.Gpu2draDwn=true",), "Gpu2draDwn"),
        (("readinessProbe.periodSecond=3",), "'periodSecond'"),
        (("topologySpreadConstraints[0].maxSkw=1",), "'maxSkw'"),
        (("extraEnv[0].nme=X",), "'nme'"),
        (("policy.mappings.x/y.deviceClas=z",), "'deviceClas'"),
    ],
)
def test_mistakes_fail_the_install(helm: Path, values: tuple[str, ...], message: str) -> None:
    with pytest.raises(AssertionError) as err:
        render_chart(helm, *values)
    assert message in str(err.value)

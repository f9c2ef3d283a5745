"""The chart's `helm test`: a Pod that runs `gpu2dra doctor` with the webhook's image and
hardening, under a ServiceAccount whose roles grant the reads doctor makes, get and list only,
and nothing else."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from app.diagnose.doctor.gather import gather
from app.readers.client import NotFound, Reader
from app.readers.cluster_policy import cluster_policy
from tests.chart.render import helm_template
from tests.support.webhook import RELEASE_NAMESPACE, of_kind, render_chart

Obj = dict[str, Any]
NAME = "gpu2dra-doctor"
HOOK = {"helm.sh/hook": "test", "helm.sh/hook-delete-policy": "before-hook-creation"}
# (api group, resource, verb, name or None for any, namespace or None for the cluster)
Grant = tuple[str, str, str, str | None, str | None]


def of_the_test(docs: list[Obj]) -> list[Obj]:
    return [d for d in docs if d["metadata"]["labels"]["app.kubernetes.io/component"] == "test"]


def named(docs: list[Obj], kind: str) -> Obj:
    (found,) = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == NAME]
    return found


def test_a_helm_test_hook_runs_doctor_with_the_webhook_s_image_and_hardening(helm: Path) -> None:
    docs = helm_template(helm)
    pod = named(docs, "Pod")
    assert pod["metadata"]["annotations"] == HOOK
    assert pod["metadata"]["namespace"] == RELEASE_NAMESPACE
    deployment = of_kind(docs, "Deployment")["spec"]["template"]["spec"]
    (webhook,) = deployment["containers"]
    spec = pod["spec"]
    (doctor,) = spec["containers"]
    assert doctor["command"] == ["gpu2dra"]
    assert doctor["args"] == ["doctor"]
    assert spec["restartPolicy"] == "Never"
    assert doctor["image"] == webhook["image"]
    assert doctor["imagePullPolicy"] == webhook["imagePullPolicy"]
    assert doctor["resources"] == webhook["resources"]
    assert (
        spec["securityContext"]
        == deployment["securityContext"]
        == {
            "runAsNonRoot": True,
            "runAsUser": 65532,
            "runAsGroup": 65532,
            "fsGroup": 65532,
            "seccompProfile": {"type": "RuntimeDefault"},
        }
    )
    assert (
        doctor["securityContext"]
        == webhook["securityContext"]
        == {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        }
    )
    # Not one of the webhook's pods: its Service and PodDisruptionBudget select component webhook
    assert pod["metadata"]["labels"]["app.kubernetes.io/component"] == "test"
    assert spec["serviceAccountName"] == named(docs, "ServiceAccount")["metadata"]["name"]


@pytest.mark.parametrize(
    "values",
    [
        ("image.digest=sha256:" + "0" * 64,),
        ("image.registry=", "image.repository=localhost/gpu2dra", "image.tag=dev"),
        ("imagePullSecrets[0].name=pull", "image.pullPolicy=Never"),
    ],
)
def test_the_test_pod_follows_the_image_values(helm: Path, values: tuple[str, ...]) -> None:
    docs = helm_template(helm, *values)
    deployment = of_kind(docs, "Deployment")["spec"]["template"]["spec"]
    (webhook,) = deployment["containers"]
    spec = named(docs, "Pod")["spec"]
    (doctor,) = spec["containers"]
    assert (doctor["image"], doctor["imagePullPolicy"]) == (
        webhook["image"],
        webhook["imagePullPolicy"],
    )
    assert spec.get("imagePullSecrets") == deployment.get("imagePullSecrets")


def test_only_the_pod_is_a_hook_and_helm_install_creates_its_account(helm: Path) -> None:
    """`helm test --logs` reads the logs of every test hook as a pod's: the account and roles
    are the release's, installed with it and removed with it."""
    objects = of_the_test(helm_template(helm))
    assert sorted(d["kind"] for d in objects) == [
        "ClusterRole",
        "ClusterRoleBinding",
        "Pod",
        "Role",
        "RoleBinding",
        "ServiceAccount",
    ]
    assert [d["kind"] for d in objects if d["metadata"].get("annotations")] == ["Pod"]
    installed = of_the_test(render_chart(helm))  # what `helm install` creates
    assert sorted(d["kind"] for d in installed) == sorted(
        d["kind"] for d in objects if d["kind"] != "Pod"
    )


def test_nothing_of_it_when_disabled(helm: Path) -> None:
    docs = helm_template(helm, "helmTest.enabled=false")
    assert of_the_test(docs) == []
    assert sorted(d["kind"] for d in docs) == sorted(
        d["kind"] for d in helm_template(helm) if d not in of_the_test(helm_template(helm))
    )


def grants(docs: list[Obj]) -> set[Grant]:
    """What the test's ServiceAccount may do, rule by rule, through its bindings."""
    account = named(docs, "ServiceAccount")["metadata"]
    subject = {"kind": "ServiceAccount", "name": account["name"], "namespace": RELEASE_NAMESPACE}
    found: set[Grant] = set()
    for binding_kind, role_kind in (("ClusterRoleBinding", "ClusterRole"), ("RoleBinding", "Role")):
        binding = named(docs, binding_kind)
        assert binding["subjects"] == [subject]
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": role_kind,
            "name": NAME,
        }
        role = named(docs, role_kind)
        scope = role["metadata"].get("namespace")
        found |= {
            (group, resource, verb, name, scope)
            for rule in role["rules"]
            for group in rule["apiGroups"]
            for resource in rule["resources"]
            for verb in rule["verbs"]
            for name in rule.get("resourceNames") or [None]
        }
    return found


class Recorder(Reader):
    """A reader that answers every list with nothing (the webhook configurations with the
    chart's, without a caBundle: nothing is dialled) and every object with a 404, and
    records what doctor asked for."""

    def __init__(self, configurations: list[Obj]) -> None:
        self.configurations = configurations
        self.paths: list[str] = []

    def get(self, path: str, **query: str) -> Obj:
        self.paths.append(path)
        if path.startswith("/apis/admissionregistration.k8s.io/v1/"):
            kind = path.rsplit("/", 1)[1]
            items = [c for c in self.configurations if f"{c['kind'].lower()}s" == kind]
            return {"items": items}
        if query.get("limit"):
            return {"items": []}
        if path == "/version":
            return {"major": "1", "minor": "37"}
        if path == "/apis/resource.k8s.io":
            return {"versions": [{"version": "v1"}]}
        raise NotFound(f"GET {path}: not found")


def reads(path: str) -> Grant:
    """The grant a GET of `path` needs: a list, or a get of one object by name."""
    parts = path.strip("/").split("/")
    group = "" if parts[0] == "api" else parts[1]
    rest = parts[2:] if parts[0] == "api" else parts[3:]
    namespace = None
    if rest[0] == "namespaces" and len(rest) >= 3:
        namespace, rest = rest[1], rest[2:]
    if len(rest) == 1:
        return (group, rest[0], "list", None, namespace)
    return (group, rest[0], "get", rest[1], namespace)


def allowed(grant: Grant, granted: set[Grant]) -> Grant | None:
    """The rule that allows `grant`: the same name, or any name; a Role in its namespace."""
    group, resource, verb, name, namespace = grant
    for scope in (None, namespace) if namespace else (None,):
        for candidate in (
            (group, resource, verb, name, scope),
            (group, resource, verb, None, scope),
        ):
            if candidate in granted:
                return candidate
    return None


def test_the_roles_grant_what_doctor_reads_get_and_list_only(helm: Path) -> None:
    docs = helm_template(helm)
    granted = grants(docs)
    assert {verb for _, _, verb, _, _ in granted} == {"get", "list"}
    assert not [g for g in granted if g[1] == "secrets"]
    configurations = [copy.deepcopy(d) for d in docs if d["kind"].endswith("WebhookConfiguration")]
    for configuration in configurations:
        for hook in configuration["webhooks"]:
            hook["clientConfig"].pop("caBundle", None)
    reader = Recorder(configurations)
    _, source = cluster_policy(reader, None)  # as `gpu2dra doctor` does, in this order
    gather(reader)
    assert source == f"embedded default (no ConfigMap {RELEASE_NAMESPACE}/gpu2dra)"
    # What every authenticated user may read (system:discovery, system:public-info-viewer)
    needed = {reads(p) for p in reader.paths if p not in ("/version", "/apis/resource.k8s.io")}
    assert {g: allowed(g, granted) for g in needed if allowed(g, granted) is None} == {}
    # and nothing doctor does not read
    assert granted == {allowed(g, granted) for g in needed}

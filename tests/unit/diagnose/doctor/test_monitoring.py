"""doctor's monitoring checks as tables of facts: dcgm-exporter's DRA mapping (environment and
RBAC) and the attribution each enabled namespace keeps."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from app.core.policy import parse_policy
from app.diagnose.doctor.checks import run_checks
from app.diagnose.doctor.checks.monitoring import (
    Exporter,
    check_attribution,
    check_dcgm_exporter,
    dcgm_exporters,
    gpu2dra_exporter,
    reads_slices,
)
from app.diagnose.doctor.facts import Facts
from app.readers.client import ReadError

Obj = dict[str, Any]
POLICY = parse_policy({})
IMAGE = "nvcr.io/nvidia/k8s/dcgm-exporter:4.4.0-4.5.0-ubuntu22.04"


def dcgm(env: dict[str, str] | None = None, account: str = "dcgm") -> Obj:
    container = {
        "name": "exporter",
        "image": IMAGE,
        "env": [{"name": k, "value": v} for k, v in (env or {}).items()],
    }
    return {
        "metadata": {"namespace": "gpu-operator", "name": "nvidia-dcgm-exporter"},
        "spec": {"template": {"spec": {"serviceAccountName": account, "containers": [container]}}},
    }


def role(name: str, resources: list[str], verbs: list[str], group: str = "resource.k8s.io") -> Obj:
    rules = [{"apiGroups": [group], "resources": resources, "verbs": verbs}]
    return {"metadata": {"name": name}, "rules": rules}


def binding(role_name: str, subject: Obj) -> Obj:
    return {
        "metadata": {"name": role_name},
        "roleRef": {"kind": "ClusterRole", "name": role_name},
        "subjects": [subject],
    }


SA = {"kind": "ServiceAccount", "name": "dcgm", "namespace": "gpu-operator"}
ROLES = [role("read-slices", ["resourceslices"], ["get", "list", "watch"])]
BINDINGS = [binding("read-slices", SA)]
ENV = {"KUBERNETES_ENABLE_DRA": "true"}


def gpu2dra_exporter_deployment() -> Obj:
    return {
        "metadata": {"namespace": "gpu2dra-system", "name": "gpu2dra-exporter"},
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {"name": "exporter", "command": ["gpu2dra"], "args": ["exporter"]}
                    ]
                }
            }
        },
    }


def namespace(name: str, mode: str | None = None) -> Obj:
    labels = {"gpu2dra.io/migration": mode} if mode else {}
    return {"metadata": {"name": name, "labels": labels}}


def test_rbac_to_read_slices_through_a_cluster_role_binding() -> None:
    assert reads_slices("gpu-operator", "dcgm", ROLES, BINDINGS) is True
    assert reads_slices("gpu-operator", "other", ROLES, BINDINGS) is False
    only_get = [role("read-slices", ["resourceslices"], ["get"])]
    assert reads_slices("gpu-operator", "dcgm", only_get, BINDINGS) is False
    star = [role("read-slices", ["*"], ["*"], group="*")]
    assert reads_slices("gpu-operator", "dcgm", star, BINDINGS) is True
    group = [
        binding("read-slices", {"kind": "Group", "name": "system:serviceaccounts:gpu-operator"})
    ]
    assert reads_slices("gpu-operator", "dcgm", ROLES, group) is True
    assert reads_slices("gpu-operator", "dcgm", ROLES, ReadError("403")) is None
    role_ref = [{**BINDINGS[0], "roleRef": {"kind": "Role", "name": "read-slices"}}]
    assert reads_slices("gpu-operator", "dcgm", ROLES, role_ref) is False


def test_dcgm_exporter_maps_dra_devices_with_its_environment_and_rbac() -> None:
    (told,) = dcgm_exporters([dcgm(ENV)], [], ROLES, BINDINGS)
    assert told == Exporter("DaemonSet gpu-operator/nvidia-dcgm-exporter", env=True, rbac=True)
    facts = Facts(daemonsets=[dcgm(ENV)], cluster_roles=ROLES, cluster_role_bindings=BINDINGS)
    check = check_dcgm_exporter(facts, POLICY)
    assert (check.status, check.summary) == (
        "PASS",
        "dcgm-exporter maps DRA devices to pods (namespace, pod, container)",
    )
    assert check.details == (
        "DaemonSet gpu-operator/nvidia-dcgm-exporter: KUBERNETES_ENABLE_DRA true; "
        "may read resourceslices",
    )


def test_dcgm_exporter_without_the_variable_or_the_rbac_warns() -> None:
    for env, bindings, detail in (
        ({}, BINDINGS, "KUBERNETES_ENABLE_DRA not true; may read resourceslices"),
        (ENV, [], "KUBERNETES_ENABLE_DRA true; may not list and watch resourceslices"),
        (ENV, ReadError("403"), "KUBERNETES_ENABLE_DRA true; RBAC not readable"),
    ):
        facts = Facts(daemonsets=[dcgm(env)], cluster_roles=ROLES, cluster_role_bindings=bindings)
        check = check_dcgm_exporter(facts, POLICY)
        assert check.status == "WARN", detail
        assert check.details == (f"DaemonSet gpu-operator/nvidia-dcgm-exporter: {detail}",)
        assert "KUBERNETES_ENABLE_DRA=true" in check.fix
        assert "gpu2dra exporter" in check.fix


def test_no_dcgm_exporter_and_unreadable_daemonsets() -> None:
    assert check_dcgm_exporter(Facts(), POLICY).status == "PASS"
    assert check_dcgm_exporter(Facts(daemonsets=ReadError("403")), POLICY).summary == (
        "cannot read: 403"
    )


def test_what_attribution_each_enabled_namespace_keeps() -> None:
    namespaces = [namespace("ml", "enabled"), namespace("web"), namespace("lab", "audit")]
    rbac = Facts(namespaces=namespaces, cluster_roles=ROLES, cluster_role_bindings=BINDINGS)
    mapping, plain = [dcgm(ENV)], [dcgm()]  # a dcgm-exporter that maps DRA devices, one not
    ours = [gpu2dra_exporter_deployment()]
    both = check_attribution(replace(rbac, daemonsets=mapping, deployments=ours), POLICY)
    assert (both.status, both.summary) == (
        "PASS",
        "1 enabled namespace(s) (ml) keep per-pod GPU metrics",
    )
    assert both.details == (
        "dcgm-exporter's labels (namespace, pod, container; no pod UID)",
        "gpu2dra_pod_gpu_info (Deployment gpu2dra-system/gpu2dra-exporter): joined on(UUID), "
        "with the pod UID",
    )
    lost = check_attribution(replace(rbac, daemonsets=plain), POLICY)
    assert (lost.status, lost.summary) == (
        "WARN",
        "1 enabled namespace(s) (ml): no per-pod GPU metrics",
    )
    assert check_attribution(replace(rbac, daemonsets=plain, deployments=ours), POLICY).status == (
        "PASS"
    )
    assert check_attribution(Facts(namespaces=namespaces), POLICY).status == "PASS"
    web = replace(rbac, namespaces=[namespace("web")], daemonsets=plain)
    assert check_attribution(web, POLICY).summary.startswith("no namespace is enabled")
    assert check_attribution(Facts(namespaces=ReadError("403")), POLICY).status == "WARN"


def test_the_gpu2dra_exporter_is_found_by_its_command() -> None:
    found = gpu2dra_exporter([gpu2dra_exporter_deployment()])
    assert found == "Deployment gpu2dra-system/gpu2dra-exporter"
    assert gpu2dra_exporter([dcgm()]) is None
    assert gpu2dra_exporter(ReadError("403")) is None


def test_doctor_runs_both_checks_last() -> None:
    err = ReadError("forbidden")
    facts = Facts(
        version=err,
        resource_versions=err,
        device_classes=err,
        slices=err,
        nodes=err,
        namespaces=[namespace("ml", "enabled")],
        registrations=err,
        daemonsets=[dcgm()],
    )
    *_, exporter, attribution = run_checks(facts, POLICY)
    assert (exporter.name, exporter.status) == ("dcgm-exporter", "WARN")
    assert (attribution.name, attribution.status) == ("attribution", "WARN")

"""Doctor checks that the control plane in the end-to-end tests cannot show: old versions,
an API not served, unreadable kinds; and the text output's shape."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from app.cli import main
from app.core.policy import load_policy, parse_policy
from app.diagnose.doctor.checks import CHECKS
from app.diagnose.doctor.checks.cluster import check_kubernetes
from app.diagnose.doctor.checks.kueue import check_kueue
from app.diagnose.doctor.checks.namespaces import check_namespaces
from app.diagnose.doctor.checks.preemption import check_preemption
from app.diagnose.doctor.checks.quota import check_quota
from app.diagnose.doctor.checks.verdict import Check
from app.diagnose.doctor.facts import Facts
from app.diagnose.doctor.render import render_text
from app.readers.client import ReadError


def version(minor: str) -> dict[str, str]:
    return {"major": "1", "minor": minor, "gitVersion": f"v1.{minor.rstrip('+')}.0"}


def test_kubernetes_version_and_served_versions() -> None:
    policy = load_policy(None)
    old = check_kubernetes(
        Facts(version=version("33+"), resource_versions=["v1beta1", "v1beta2"]), policy
    )
    assert (old.status, old.summary) == (
        "FAIL",
        "v1.33.0: DRA resource.k8s.io/v1 needs Kubernetes 1.34 or later",
    )
    off = check_kubernetes(Facts(version=version("34"), resource_versions=["v1beta1"]), policy)
    assert off.status == "FAIL"
    assert "resource.k8s.io/v1 is not served (served: v1beta1)" in off.summary
    assert "--runtime-config=resource.k8s.io/v1=true" in off.fix
    both = check_kubernetes(
        Facts(version=version("35"), resource_versions=["v1", "v1beta2"]), policy
    )
    assert (both.status, both.summary) == (
        "PASS",
        "v1.35.0; resource.k8s.io/v1 served (also served: v1beta2)",
    )


def test_unreadable_is_a_warning_with_a_fix() -> None:
    err = ReadError("GET /api/v1/namespaces: 403 forbidden")
    check = check_namespaces(Facts(namespaces=err), load_policy(None))
    assert check.status == "WARN"
    assert check.summary == "cannot read: GET /api/v1/namespaces: 403 forbidden"
    assert "readOnlyRole.create=true" in check.fix


def test_namespace_modes_are_counted() -> None:
    namespaces: list[dict[str, Any]] = [
        {"metadata": {"name": "a", "labels": {"gpu2dra.io/migration": "enabled"}}},
        {"metadata": {"name": "b", "labels": {"gpu2dra.io/migration": "audit"}}},
        {"metadata": {"name": "c", "labels": {"gpu2dra.io/migration": "typo"}}},
        {"metadata": {"name": "kube-system"}},
    ]
    check = check_namespaces(Facts(namespaces=namespaces), load_policy(None))
    assert check.summary.startswith("1 enabled, 1 audit, 1 disabled, 1 never changed")


def test_text_output_one_line_per_check() -> None:
    checks = [
        Check("kubernetes", "PASS", "v1.35.0"),
        Check(
            "coexistence",
            "FAIL",
            "node n offers GPUs twice",
            fix="remove one",
            details=("node n: x",),
        ),
    ]
    assert render_text(checks, "embedded default").splitlines() == [
        "policy: embedded default",
        "PASS  kubernetes   v1.35.0",
        "FAIL  coexistence  node n offers GPUs twice",
        "                   - node n: x",
        "                   fix: remove one",
    ]


def test_unreachable_api_server_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    for command in (["doctor"], ["report", "-A"], ["explain", "pod", "p"]):
        assert main([*command, "--kubeconfig", str(kubeconfig)]) == 1
        out, err = capsys.readouterr()
        assert out == ""
        assert err.startswith("gpu2dra: cannot reach the API server at https://127.0.0.1:1: ")
        assert len(err.splitlines()) == 1
    assert main(["doctor", "--kubeconfig", str(tmp_path / "none")]) == 1
    assert capsys.readouterr().err == f"gpu2dra: kubeconfig {tmp_path / 'none'}: no such file\n"


# ---- quota and Kueue ---------------------------------------------------------------------

GPU_DEVICES = "gpu.nvidia.com.deviceclass.resource.k8s.io/devices"


def ns(name: str, mode: str | None = None) -> dict[str, Any]:
    labels = {"gpu2dra.io/migration": mode} if mode else {}
    return {"metadata": {"name": name, "labels": labels}}


def rq(namespace: str, name: str, **hard: str) -> dict[str, Any]:
    return {"metadata": {"namespace": namespace, "name": name}, "spec": {"hard": hard}}


def dc(name: str, extended: str | None = None) -> dict[str, Any]:
    spec = {"extendedResourceName": extended} if extended else {}
    return {"metadata": {"name": name}, "spec": spec}


LEGACY = {"requests.nvidia.com/gpu": "2"}
CLASSES = [dc("gpu.nvidia.com"), dc("mig.nvidia.com")]


@pytest.mark.parametrize(
    ("namespaces", "quotas", "classes", "status", "why"),
    [
        ([ns("a", "enabled")], [], CLASSES, "PASS", "no quota"),
        ([ns("a", "enabled")], [rq("a", "gpus", **LEGACY)], CLASSES, "FAIL", "legacy only"),
        ([ns("a", "audit")], [rq("a", "gpus", **LEGACY)], CLASSES, "FAIL", "audit translates too"),
        ([ns("a")], [rq("a", "gpus", **LEGACY)], CLASSES, "PASS", "disabled by default"),
        (
            [{**ns("a", "enabled"), "status": {"phase": "Terminating"}}],
            [rq("a", "gpus", **LEGACY)],
            CLASSES,
            "PASS",
            "being deleted: no pod can be created",
        ),
        (
            [ns("kube-system", "enabled")],
            [rq("kube-system", "g", **LEGACY)],
            CLASSES,
            "PASS",
            "skipped",
        ),
        (
            [ns("a", "enabled")],
            [rq("a", "gpus", **LEGACY), rq("a", "dra", **{GPU_DEVICES: "2"})],
            CLASSES,
            "PASS",
            "DRA side limited",
        ),
        (
            [ns("a", "enabled")],
            [rq("a", "gpus", **LEGACY)],
            [dc("gpu.nvidia.com", "nvidia.com/gpu")],
            "PASS",
            "KEP-5004 counts claims against requests.nvidia.com/gpu",
        ),
        (
            [ns("a", "enabled")],
            [rq("b", "gpus", **LEGACY)],
            CLASSES,
            "PASS",
            "the quota is in a namespace gpu2dra leaves alone",
        ),
        (
            [ns("a", "enabled")],
            [rq("a", "cpu", **{"requests.cpu": "4"})],
            CLASSES,
            "PASS",
            "no GPU in the quota",
        ),
    ],
)
def test_quota_check(
    namespaces: list[Any], quotas: list[Any], classes: list[Any], status: str, why: str
) -> None:
    facts = Facts(namespaces=namespaces, quotas=quotas, device_classes=classes)
    check = check_quota(facts, load_policy(None))
    assert check.status == status, why


def test_quota_check_names_the_namespace_quota_and_fix() -> None:
    one = Facts(
        namespaces=[ns("team-a", "enabled")],
        quotas=[rq("team-a", "gpus", **LEGACY)],
        device_classes=CLASSES,
    )
    check = check_quota(one, load_policy(None))
    assert check.fix == "gpu2dra quota -n team-a | kubectl apply -f -"
    assert check.details == (
        "team-a: ResourceQuota gpus limits requests.nvidia.com/gpu and no quota limits "
        f"{GPU_DEVICES}",
    )
    two = check_quota(
        Facts(
            namespaces=[ns("a", "enabled"), ns("b", "enabled")],
            quotas=[rq("a", "g", **LEGACY), rq("b", "g", **LEGACY)],
            device_classes=ReadError("forbidden"),
        ),
        load_policy(None),
    )
    assert two.fix == "gpu2dra quota -A | kubectl apply -f -" and len(two.details) == 2


def kueue(config: str | None) -> dict[str, Any]:
    return {"data": {"controller_manager_config.yaml": config}} if config else {"data": {}}


def manager(version: str = "v0.17.1", *args: str) -> dict[str, Any]:
    container = {"name": "manager", "image": f"registry.k8s.io/kueue/kueue:{version}"}
    return {"spec": {"template": {"spec": {"containers": [{**container, "args": list(args)}]}}}}


PODS = """
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
integrations:
  frameworks: [batch/job, pod]
"""
BOTH = (
    PODS
    + """
resources:
  deviceClassMappings:
  - name: whole-gpus
    deviceClassNames: [gpu.nvidia.com]
  - name: mig-slices
    deviceClassNames: [mig.nvidia.com]
"""
)
GATE_ON = "--feature-gates=TopologyAwareScheduling=true,DynamicResourceAllocation=true"
# Without a MIG mapping no claim gpu2dra makes carries selectors of its own.
WHOLE_ONLY = {"mappings": {"nvidia.com/gpu": {"deviceClassName": "gpu.nvidia.com"}}}


@pytest.mark.parametrize(
    ("configmap", "deployment", "policy", "status", "words"),
    [
        (None, None, None, "PASS", "Kueue not installed"),
        (ReadError("403 forbidden"), manager(), None, "WARN", "cannot read"),
        (kueue(PODS), ReadError("403 forbidden"), None, "WARN", "cannot read"),
        (kueue(None), manager(), None, "WARN", "holds no Kueue Configuration"),
        (None, manager(), None, "WARN", "kueue-manager-config is missing"),
        (kueue(PODS), None, None, "WARN", "cannot tell Kueue's version"),
        (kueue(PODS), manager("latest"), None, "WARN", "cannot tell Kueue's version"),
        (
            kueue(PODS.replace(", pod]", "]")),
            manager(),
            None,
            "PASS",
            "builds no Workload from pods",
        ),
        (kueue(BOTH), manager("v0.13.4", GATE_ON), None, "FAIL", "counts no DRA claim"),
        # v0.17's alpha gate is off by default: claims are ignored, the pods escape.
        (kueue(BOTH), manager(), None, "FAIL", "DRA gate DynamicResourceAllocation off (its"),
        (
            kueue(BOTH),
            manager("v0.17.1", "--feature-gates", "DynamicResourceAllocation=false"),
            None,
            "FAIL",
            "off (--feature-gates)",
        ),
        (
            kueue(
                BOTH.replace(
                    "kind: Configuration",
                    "kind: Configuration\nfeatureGates:\n  KueueDRAIntegration: false",
                )
            ),
            manager("v0.18.0"),
            None,
            "FAIL",
            "DRA gate KueueDRAIntegration off (the Configuration's featureGates)",
        ),
        (
            kueue(PODS),
            manager("v0.17.1", GATE_ON),
            None,
            "FAIL",
            "has no entry for gpu.nvidia.com, mig.nvidia.com: pods of its pod integration",
        ),
        (
            kueue(BOTH.replace("mig.nvidia.com", "other")),
            manager("v0.18.0"),  # on by default from v0.18
            None,
            "FAIL",
            "has no entry for mig.nvidia.com:",
        ),
        (
            kueue(BOTH),
            manager("v0.17.1", GATE_ON),
            None,
            "WARN",
            "refuses a claim with CEL selectors",
        ),
        (
            kueue(BOTH.replace("[batch/job, pod]", "[deployment]")),
            manager("v0.17.1", GATE_ON),
            WHOLE_ONLY,
            "PASS",
            "Kueue v0.17 counts gpu.nvidia.com as whole-gpus",
        ),
    ],
)
def test_kueue_check(configmap: Any, deployment: Any, policy: Any, status: str, words: str) -> None:
    facts = Facts(kueue=configmap, kueue_manager=deployment)
    check = check_kueue(facts, parse_policy(policy or {}))
    assert (check.status, words in check.summary) == (status, True), check.summary
    if status == "FAIL":
        assert "restart Kueue" in check.fix or "upgrade Kueue" in check.fix, check.fix
    if "has no entry" in words:
        assert "deviceClassMappings" in check.fix


# ---- priority and preemption -------------------------------------------------------------


def priority_class(name: str, value: int, never: bool = False) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "value": value,
        **({"preemptionPolicy": "Never"} if never else {}),
    }


def gpu_pod_in(namespace: str, name: str, **spec: Any) -> dict[str, Any]:
    limits = {"nvidia.com/gpu": "1"}
    containers = [{"name": "c", "resources": {"limits": limits}}]
    return {
        "metadata": {"namespace": namespace, "name": name},
        "spec": {"containers": containers, **spec},
    }


def plugin_node(gpus: str) -> dict[str, Any]:
    return {"metadata": {"name": "n"}, "status": {"allocatable": {"nvidia.com/gpu": gpus}}}


PREEMPTION_CASES = [
    ("no preempting pods", [], [plugin_node("1")], None, ("PASS", "no GPU pod of a preempting")),
    (
        "left on the device plugin, which still serves",
        [gpu_pod_in("ml", "a", priorityClassName="high")],
        [plugin_node("1")],
        None,
        ("PASS", "1 GPU pod(s) of preempting PriorityClasses (high) stay on the device plugin"),
    ),
    (
        "left, and no device-plugin node remains",
        [gpu_pod_in("ml", "a", priorityClassName="high")],
        [plugin_node("0")],
        None,
        ("FAIL", "no node offers GPUs through it: they cannot schedule"),
    ),
    (
        "translated: preemption lost",
        [gpu_pod_in("ml", "a", priorityClassName="high")],
        [],
        "translate",
        ("WARN", "are translated, and the scheduler does not preempt for DRA claims"),
    ),
    (
        "a class that never preempts, a pod without GPUs, a disabled namespace",
        [
            gpu_pod_in("ml", "a", priorityClassName="batch"),
            {"metadata": {"namespace": "ml", "name": "b"}, "spec": {"priorityClassName": "high"}},
            gpu_pod_in("legacy", "c", priorityClassName="high"),
            gpu_pod_in("ml", "d", priorityClassName="high", preemptionPolicy="Never"),
        ],
        [plugin_node("0")],
        None,
        ("PASS", "no GPU pod of a preempting PriorityClass in the 1 namespace(s)"),
    ),
]


@pytest.mark.parametrize(
    ("pods", "nodes", "setting", "expected"),
    [c[1:] for c in PREEMPTION_CASES],
    ids=[c[0] for c in PREEMPTION_CASES],
)
def test_preemption_check(
    pods: list[dict[str, Any]],
    nodes: list[dict[str, Any]],
    setting: str | None,
    expected: tuple[str, str],
) -> None:
    policy = parse_policy({"preemptingPods": setting}) if setting else load_policy(None)
    classes = [priority_class("high", 1000), priority_class("batch", 10, never=True)]
    namespaces = [ns("ml", "enabled"), ns("legacy")]
    facts = Facts(namespaces=namespaces, priority_classes=classes, pods=pods, nodes=nodes)
    check = check_preemption(facts, policy)
    assert CHECKS["preemption"] is check_preemption
    assert (check.status, expected[1] in check.summary) == (expected[0], True), check.summary
    named = check.status != "PASS" or "stay" in check.summary
    assert check.details == (("- high (1000): 1 pod(s): ml/a",) if named else ())


def test_preemption_check_says_what_it_cannot_read() -> None:
    err = ReadError("GET /apis/scheduling.k8s.io/v1/priorityclasses: 403 forbidden")
    facts = Facts(namespaces=[ns("ml", "enabled")], priority_classes=err, pods=[], nodes=[])
    check = check_preemption(facts, load_policy(None))
    assert (check.status, check.summary) == ("WARN", f"cannot read: {err}")

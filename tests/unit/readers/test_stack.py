"""Known components of a GPU cluster, told by their workloads' images."""

from __future__ import annotations

from typing import Any

from app.readers.stack import KNOWN, components, maps_dra

Obj = dict[str, Any]


def workload(name: str, image: str, env: list[Obj] | None = None, init: bool = False) -> Obj:
    container: Obj = {"name": "c", "image": image, "env": env or []}
    where = "initContainers" if init else "containers"
    return {
        "metadata": {"namespace": "gpu-operator", "name": name},
        "spec": {
            "template": {"spec": {where: [container], "containers": [] if init else [container]}}
        },
    }


def test_each_known_component_is_told_by_its_image() -> None:
    objects = [
        workload(
            "nvidia-dcgm-exporter", "nvcr.io/nvidia/k8s/dcgm-exporter:4.4.0-4.5.0-ubuntu22.04"
        ),
        workload(
            "nvidia-driver-daemonset",
            "nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.8.1",
            init=True,
        ),
        workload("hami-scheduler", "docker.io/projecthami/hami:v2.6.0"),
        workload("volcano-scheduler", "docker.io/volcanosh/vc-scheduler:v1.12.0"),
        workload("kubecost-cost-analyzer", "gcr.io/kubecost1/cost-model:prod-2.8"),
        workload("opencost", "ghcr.io/opencost/opencost:1.115"),
        workload(
            "nvsentinel-fault-remediation", "ghcr.io/nvidia/nvsentinel/fault-remediation:v0.4"
        ),
        workload(
            "kube-state-metrics", "registry.k8s.io/kube-state-metrics/kube-state-metrics:v2.17.0"
        ),
        workload("web", "nginx:1.27"),
    ]
    found = [(f.known.key, f.name) for f in components("Deployment", objects)]
    assert found == [
        ("dcgm-exporter", "nvidia-dcgm-exporter"),
        ("driver-manager", "nvidia-driver-daemonset"),
        ("hami", "hami-scheduler"),
        ("volcano", "volcano-scheduler"),
        ("cost", "kubecost-cost-analyzer"),
        ("cost", "opencost"),
        ("nvsentinel", "nvsentinel-fault-remediation"),
        ("kube-state-metrics", "kube-state-metrics"),
    ]
    assert {k.key for k in KNOWN} == {key for key, _ in found}
    for known in KNOWN:
        assert known.change and known.action, known.key


def test_dcgm_exporter_maps_dra_devices_only_when_told_to() -> None:
    image = "nvcr.io/nvidia/k8s/dcgm-exporter:4.4.0"
    (plain,) = components("DaemonSet", [workload("dcgm", image)])
    assert not maps_dra(plain)
    env: list[Obj] = [
        {"name": "KUBERNETES_ENABLE_DRA", "value": "True"},
        {"name": "X", "valueFrom": {}},
    ]
    (told,) = components("DaemonSet", [workload("dcgm", image, env)])
    assert maps_dra(told)
    assert (told.kind, told.namespace, told.env) == (
        "DaemonSet",
        "gpu-operator",
        {"KUBERNETES_ENABLE_DRA": "True", "X": ""},
    )


def test_odd_shapes_find_nothing() -> None:
    assert list(components("Deployment", [{"metadata": {}}, {"spec": {"template": {}}}])) == []

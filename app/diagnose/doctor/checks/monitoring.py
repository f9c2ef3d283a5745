"""The doctor checks on the monitoring stack, pure functions of what was read: whether
dcgm-exporter maps DRA devices to pods (its environment, and RBAC to read ResourceSlices), and
what per-pod GPU attribution each namespace gpu2dra translates in keeps."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import KW_ONLY, dataclass

from app.core.kube import Obj
from app.core.policy import Policy
from app.core.scope import namespace_mode
from app.diagnose.doctor.checks.verdict import Verdict, unreadable
from app.diagnose.doctor.facts import Facts
from app.readers.client import Listed, ReadError
from app.readers.stack import DCGM_EXPORTER, DRA_ENV, components, maps_dra

EXPORTER_FIX = (
    "set KUBERNETES_ENABLE_DRA=true in dcgm-exporter's environment (GPU Operator: "
    "dcgmExporter.env) and let its ServiceAccount list and watch resourceslices, or run "
    "gpu2dra exporter (chart value exporter.enabled) and join on(UUID)"
)


@dataclass(frozen=True, slots=True)
class Exporter:
    """A dcgm-exporter workload and how far it maps DRA devices to pods."""

    where: str  # "DaemonSet gpu-operator/nvidia-dcgm-exporter"
    _: KW_ONLY
    env: bool  # KUBERNETES_ENABLE_DRA=true
    rbac: bool | None  # its ServiceAccount may list and watch resourceslices; None: unknown

    @property
    def maps_dra(self) -> bool:
        return self.env and self.rbac is True


def _grants(rules: Iterable[Obj]) -> set[str]:
    """The verbs rules grant on resource.k8s.io resourceslices."""
    verbs: set[str] = set()
    for rule in rules:
        groups, resources = rule.get("apiGroups") or [], rule.get("resources") or []
        if ({"resource.k8s.io", "*"} & set(groups)) and ({"resourceslices", "*"} & set(resources)):
            verbs |= set(rule.get("verbs") or [])
    return verbs


def reads_slices(namespace: str, account: str, roles: Listed, bindings: Listed) -> bool | None:
    """Whether ClusterRoleBindings give the ServiceAccount list and watch on resourceslices
    (cluster-scoped: only a ClusterRoleBinding can); None when RBAC could not be read."""
    if isinstance(roles, ReadError) or isinstance(bindings, ReadError):
        return None
    rules = {str(r["metadata"]["name"]): r.get("rules") or [] for r in roles}
    names = {"system:serviceaccounts", f"system:serviceaccounts:{namespace}"}
    verbs: set[str] = set()
    for binding in bindings:
        ref = binding.get("roleRef") or {}
        if ref.get("kind") != "ClusterRole":
            continue
        for subject in binding.get("subjects") or []:
            if (
                subject.get("kind") == "ServiceAccount"
                and subject.get("name") == account
                and subject.get("namespace") == namespace
            ) or (subject.get("kind") == "Group" and subject.get("name") in names):
                verbs |= _grants(rules.get(str(ref.get("name")), []))
    return "*" in verbs or {"list", "watch"} <= verbs


def dcgm_exporters(
    daemonsets: Listed, deployments: Listed, roles: Listed, bindings: Listed
) -> list[Exporter]:
    found = []
    for kind, listed in (("DaemonSet", daemonsets), ("Deployment", deployments)):
        if isinstance(listed, ReadError):
            continue
        by_name = {(o["metadata"].get("namespace"), o["metadata"].get("name")): o for o in listed}
        for seen in components(kind, listed):
            if seen.known.key != DCGM_EXPORTER:
                continue
            pod = (
                (by_name[seen.namespace, seen.name].get("spec") or {}).get("template") or {}
            ).get("spec") or {}
            account = str(pod.get("serviceAccountName") or "default")
            found.append(
                Exporter(
                    f"{kind} {seen.namespace}/{seen.name}",
                    env=maps_dra(seen),
                    rbac=reads_slices(seen.namespace, account, roles, bindings),
                )
            )
    return found


def gpu2dra_exporter(deployments: Listed) -> str | None:
    """The Deployment running `gpu2dra exporter`, if any."""
    if isinstance(deployments, ReadError):
        return None
    for obj in deployments:
        pod = ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}
        for container in pod.get("containers") or []:
            args = [*(container.get("command") or []), *(container.get("args") or [])]
            if "gpu2dra" in args and "exporter" in args:
                return f"Deployment {obj['metadata'].get('namespace')}/{obj['metadata']['name']}"
    return None


def exporters_of(facts: Facts) -> list[Exporter]:
    """The dcgm-exporters that run, and how far each maps DRA devices to pods."""
    return dcgm_exporters(
        facts.daemonsets, facts.deployments, facts.cluster_roles, facts.cluster_role_bindings
    )


def check_dcgm_exporter(facts: Facts, policy: Policy) -> Verdict:
    exporters, daemonsets = exporters_of(facts), facts.daemonsets
    if isinstance(daemonsets, ReadError):
        return unreadable(daemonsets)
    if not exporters:
        return Verdict(
            "PASS", "dcgm-exporter not installed (no DaemonSet or Deployment runs its image)"
        )
    details = tuple(
        f"{e.where}: {DRA_ENV} {'true' if e.env else 'not true'}; "
        + {
            True: "may read resourceslices",
            False: "may not list and watch resourceslices",
            None: "RBAC not readable",
        }[e.rbac]
        for e in exporters
    )
    if all(e.maps_dra for e in exporters):
        return Verdict(
            "PASS",
            "dcgm-exporter maps DRA devices to pods (namespace, pod, container)",
            details=details,
        )
    return Verdict(
        "WARN",
        "dcgm-exporter does not map DRA devices to pods: GPU metrics of translated pods "
        "carry no pod",
        EXPORTER_FIX,
        details,
    )


def check_attribution(facts: Facts, policy: Policy) -> Verdict:
    """What per-pod GPU attribution each namespace gpu2dra translates in keeps."""
    namespaces, exporters = facts.namespaces, exporters_of(facts)
    ours = gpu2dra_exporter(facts.deployments)
    if isinstance(namespaces, ReadError):
        return unreadable(namespaces)
    enabled = sorted(
        ns["metadata"]["name"] for ns in namespaces if namespace_mode(ns, policy) == "enabled"
    )
    if not enabled:
        return Verdict(
            "PASS",
            "no namespace is enabled: every GPU pod keeps the device plugin's attribution",
        )
    keeps = []
    if any(e.maps_dra for e in exporters):
        keeps.append("dcgm-exporter's labels (namespace, pod, container; no pod UID)")
    if ours:
        keeps.append(f"gpu2dra_pod_gpu_info ({ours}): joined on(UUID), with the pod UID")
    listed = ", ".join(enabled)
    if not keeps:
        lost = "no per-pod GPU metrics" if exporters else "no dcgm-exporter to attribute"
        return Verdict(
            "WARN" if exporters else "PASS",
            f"{len(enabled)} enabled namespace(s) ({listed}): {lost}",
            EXPORTER_FIX if exporters else "",
        )
    return Verdict(
        "PASS",
        f"{len(enabled)} enabled namespace(s) ({listed}) keep per-pod GPU metrics",
        details=tuple(keeps),
    )

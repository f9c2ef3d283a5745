"""The checks of `gpu2dra doctor`, in the order it prints them: each a pure function of what
was read (`Facts`), tested as tables of facts, like the translator, as well as on the real
control plane. One module per area; a new check is one entry here."""

from __future__ import annotations

from collections.abc import Callable

from app.core.policy import Policy
from app.diagnose.doctor.checks.check import Check, Facts
from app.diagnose.doctor.checks.cluster import (
    check_coexistence,
    check_device_classes,
    check_kubernetes,
    check_slices,
)
from app.diagnose.doctor.checks.kueue import check_kueue
from app.diagnose.doctor.checks.monitoring import (
    Exporter,
    check_attribution,
    check_dcgm_exporter,
    dcgm_exporters,
    gpu2dra_exporter,
)
from app.diagnose.doctor.checks.namespaces import check_namespaces
from app.diagnose.doctor.checks.paths import check_paths
from app.diagnose.doctor.checks.preemption import check_preemption
from app.diagnose.doctor.checks.quota import check_quota
from app.diagnose.doctor.checks.sharing import check_sharing
from app.diagnose.doctor.checks.webhooks import check_endpoints, check_registration, check_tls

CHECKS: tuple[Callable[[Facts, Policy], Check], ...] = (
    lambda f, p: check_kubernetes(f.version, f.resource_versions),
    lambda f, p: check_device_classes(f.device_classes, p),
    lambda f, p: check_slices(f.slices, f.device_classes, p),
    lambda f, p: check_coexistence(f.nodes, f.slices, f.device_classes, p),
    lambda f, p: check_sharing(f.slices, p),
    lambda f, p: check_registration(f.registrations),
    lambda f, p: check_tls(f.registrations, f.tls),
    lambda f, p: check_endpoints(f.registrations, f.ready_endpoints, f.tls),
    lambda f, p: check_namespaces(f.namespaces, p),
    lambda f, p: check_paths(f.device_classes, f.namespaces, f.slices, p),
    lambda f, p: check_quota(f.namespaces, f.quotas, f.device_classes, p),
    lambda f, p: check_kueue(f.kueue, f.kueue_manager, p),
    lambda f, p: check_preemption(f.namespaces, f.priority_classes, f.pods, f.nodes, p),
    lambda f, p: check_dcgm_exporter(_exporters(f), f.daemonsets),
    lambda f, p: check_attribution(f.namespaces, _exporters(f), gpu2dra_exporter(f.deployments), p),
)


def _exporters(f: Facts) -> list[Exporter]:
    return dcgm_exporters(f.daemonsets, f.deployments, f.cluster_roles, f.cluster_role_bindings)


def run_checks(facts: Facts, policy: Policy) -> list[Check]:
    return [check(facts, policy) for check in CHECKS]

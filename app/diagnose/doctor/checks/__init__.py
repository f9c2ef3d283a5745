"""The checks of `gpu2dra doctor`, keyed by the name users see, in the order it prints them:
each a pure function of what was read (`Facts`) and the policy, tested as tables of facts,
like the translator, as well as on the real control plane. One module per area; a new check
is one entry here."""

from __future__ import annotations

from collections.abc import Callable

from app.core.policy import Policy
from app.diagnose.doctor.checks.capacity import check_autoscaling, check_capacity
from app.diagnose.doctor.checks.cluster import (
    check_coexistence,
    check_conversions,
    check_deviceclasses,
    check_kubernetes,
    check_resourceslices,
)
from app.diagnose.doctor.checks.kueue import check_kueue
from app.diagnose.doctor.checks.monitoring import check_attribution, check_dcgm_exporter
from app.diagnose.doctor.checks.namespaces import check_namespaces
from app.diagnose.doctor.checks.paths import check_paths
from app.diagnose.doctor.checks.preemption import check_preemption
from app.diagnose.doctor.checks.quota import check_quota
from app.diagnose.doctor.checks.sharing import check_sharing
from app.diagnose.doctor.checks.verdict import Check, Verdict
from app.diagnose.doctor.checks.webhooks import (
    check_webhook_service,
    check_webhook_tls,
    check_webhooks,
)
from app.diagnose.doctor.facts import Facts

CHECKS: dict[str, Callable[[Facts, Policy], Verdict]] = {
    "kubernetes": check_kubernetes,
    "deviceclasses": check_deviceclasses,
    "resourceslices": check_resourceslices,
    "coexistence": check_coexistence,
    "conversions": check_conversions,
    "sharing": check_sharing,
    "webhooks": check_webhooks,
    "webhook-tls": check_webhook_tls,
    "webhook-service": check_webhook_service,
    "namespaces": check_namespaces,
    "paths": check_paths,
    "quota": check_quota,
    "kueue": check_kueue,
    "preemption": check_preemption,
    "autoscaling": check_autoscaling,
    "capacity": check_capacity,
    "dcgm-exporter": check_dcgm_exporter,
    "attribution": check_attribution,
}


def run_checks(facts: Facts, policy: Policy) -> list[Check]:
    return [Check.named(name, check(facts, policy)) for name, check in CHECKS.items()]

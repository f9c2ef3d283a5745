"""The doctor check on Kueue: whether its ClusterQueues count the claims of the pods gpu2dra
translates, read from its manager's ConfigMap and Deployment (what each version does:
app/core/kueue.py, which admission reads the same way)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from app.core import kueue
from app.core.kube import Obj
from app.core.policy import Policy
from app.diagnose.doctor.checks.cluster import mapped_classes
from app.diagnose.doctor.checks.verdict import Verdict, unreadable
from app.diagnose.doctor.facts import Facts
from app.readers.client import ReadError

_WHERE = f"ConfigMap {kueue.NAMESPACE}/{kueue.CONFIG}"
_MANAGER = f"Deployment {kueue.NAMESPACE}/{kueue.DEPLOYMENT}"


def check_kueue(facts: Facts, policy: Policy) -> Verdict:
    """FAIL where pods gpu2dra translates escape a ClusterQueue or are held for good; WARN
    where a shape of them would be refused."""
    read = _read(facts)
    return read if isinstance(read, Verdict) else _counts(read, policy)


class _Read(NamedTuple):
    config: Obj  # Kueue's Configuration
    deployment: Obj
    at: tuple[int, int]  # its version


def _read(facts: Facts) -> _Read | Verdict:
    """Kueue's Configuration, Deployment and version; the Verdict when Kueue is not
    installed, or they cannot be read or told."""
    configmap, deployment = facts.kueue, facts.kueue_manager
    if configmap is None and deployment is None:
        return Verdict("PASS", f"Kueue not installed (no {_WHERE})")
    for read in (configmap, deployment):
        if isinstance(read, ReadError):
            return unreadable(read)
    if not isinstance(configmap, dict) or (config := kueue.configuration(configmap)) is None:
        absent = "is missing" if configmap is None else "holds no Kueue Configuration"
        return Verdict("WARN", f"{_WHERE} {absent}", "check Kueue's install")
    if not isinstance(deployment, dict) or (at := kueue.version(deployment)) is None:
        return Verdict(
            "WARN",
            f"cannot tell Kueue's version (no {_MANAGER} with an image tag vX.Y): whether it "
            "counts the DRA claims of the pods gpu2dra translates depends on it",
            "run Kueue from its release image, or check its DRA gate and deviceClassMappings "
            "by hand (docs/concepts/quota.md#kueue)",
        )
    return _Read(config, deployment, at)


def _counts(read: _Read, policy: Policy) -> Verdict:
    """Whether this Kueue counts the claims of the pods gpu2dra translates."""
    config, deployment, at = read
    shown = f"Kueue v{at[0]}.{at[1]}"
    based = kueue.pod_based(config)
    if not based:
        return Verdict(
            "PASS",
            f"{shown} builds no Workload from pods (integrations "
            f"{', '.join(kueue.POD_BASED)} off): it counts GPUs from the pod templates "
            "admission never changes",
        )
    integrations = f"its {' and '.join(based)} integration"
    restart = "restart Kueue (it reads its configuration at start-up)"
    if at < kueue.FIRST:
        return Verdict(
            "FAIL",
            f"{shown} counts no DRA claim: pods of {integrations} that gpu2dra translates "
            "escape their ClusterQueue's GPU quota",
            "upgrade Kueue to a release that counts DRA claims (v0.14 or later), or keep its "
            "namespaces disabled in gpu2dra",
        )
    dra = kueue.gate(deployment, config, at)
    if not dra.on:
        return Verdict(
            "FAIL",
            f"{shown} has its DRA gate {dra.name} off ({dra.why}): it ignores claims, so "
            f"pods of {integrations} that gpu2dra translates escape their ClusterQueue's GPU "
            "quota",
            f"start Kueue with --feature-gates={dra.name}=true, map the DeviceClasses in "
            f"resources.deviceClassMappings, and {restart}",
        )
    classes = kueue.mapped(config)
    needed: Sequence[str] = sorted(mapped_classes(policy))
    if missing := [c for c in needed if c not in classes]:
        example = ", ".join(f"{{name: <quota name>, deviceClassNames: [{c}]}}" for c in missing)
        return Verdict(
            "FAIL",
            f"{shown} counts DRA claims and its resources.deviceClassMappings has no entry for "
            f"{', '.join(missing)}: pods of {integrations} that gpu2dra translates are "
            'inadmissible for good ("DeviceClass ... is not mapped", on their Workloads)',
            f"add to {kueue.CONFIG_KEY} in {_WHERE}: resources: "
            f"{{deviceClassMappings: [{example}]}}, give the name a nominalQuota in the "
            f"ClusterQueues, and {restart}",
        )
    counted = ", ".join(f"{c} as {classes[c]}" for c in needed)
    if selecting := _selecting(policy):
        return Verdict(
            "WARN",
            f'{shown} counts {counted}, but Kueue refuses a claim with CEL selectors ("CEL '
            "selectors are not supported\", in v0.17's pkg/dra/claims.go): pods of "
            f"{integrations} that ask for {', '.join(selecting)}, or whose GFD node labels or "
            "HAMi annotations gpu2dra turns into selectors, stay held by Kueue",
            "keep such pods out of namespaces gpu2dra translates, or in Kueue's Job-style "
            "integrations, which count their templates",
        )
    return Verdict("PASS", f"{shown} counts {counted}")


def _selecting(policy: Policy) -> list[str]:
    """The resources whose claims always carry CEL selectors: MIG profiles, and mappings with
    selectors of their own."""
    return [m.resource for m in policy.mappings if m.node_labels == "mig" or m.selectors]

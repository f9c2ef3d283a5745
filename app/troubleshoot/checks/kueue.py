"""The doctor check on Kueue: whether its ClusterQueues count the claims of the pods gpu2dra
translates, read from its manager's ConfigMap and Deployment.

What each version does, from Kueue's source (pkg/features/kube_features.go, pkg/dra/,
pkg/controller/jobs/): v0.14 to v0.17 count DRA claims behind the alpha gate
DynamicResourceAllocation, off by default, and ignore claims silently while it is off; v0.18
renamed it KueueDRAIntegration, beta, on. With the gate on, a claim of a DeviceClass that no
resources.deviceClassMappings entry names makes its Workload inadmissible for good, and v0.17
refuses a claim with CEL selectors. Only Workloads built from pods (the `pod` and
`deployment` integrations) see the claims gpu2dra adds at admission; a Job, JobSet,
StatefulSet or LeaderWorkerSet is counted from its pod template, which admission never
changes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from app.core.kube import Obj
from app.core.policy import Policy
from app.troubleshoot.checks.check import Check, unreadable
from app.troubleshoot.checks.cluster import mapped_classes
from app.troubleshoot.client import ReadError

KUEUE_NAMESPACE, KUEUE_CONFIG = "kueue-system", "kueue-manager-config"
KUEUE_DEPLOYMENT = "kueue-controller-manager"
KUEUE_KEY = "controller_manager_config.yaml"
# The integrations whose Workloads are built from the pods themselves.
POD_BASED = ("pod", "deployment")
# The version that renamed the gate and turned it on; the first that counted claims at all.
RENAMED, FIRST = (0, 18), (0, 14)


@dataclass(frozen=True, slots=True)
class Gate:
    name: str  # as this version spells it
    on: bool
    why: str  # where the value comes from


def kueue_configuration(configmap: Obj) -> Obj | None:
    """The `Configuration` in Kueue's ConfigMap (its usual key first); None if none parses."""
    data = configmap.get("data") or {}
    for key in sorted(data, key=lambda k: k != KUEUE_KEY):
        try:
            doc = yaml.safe_load(data[key])
        except yaml.YAMLError:
            continue
        if isinstance(doc, dict) and doc.get("kind") == "Configuration":
            return doc
    return None


def kueue_mapped(configuration: Obj) -> dict[str, str]:
    """DeviceClass -> the Kueue resource name its claims count as (deviceClassMappings)."""
    resources: Any = configuration.get("resources") or {}
    found: dict[str, str] = {}
    for mapping in (
        resources.get("deviceClassMappings") or [] if isinstance(resources, dict) else []
    ):
        if isinstance(mapping, dict):
            for device_class in mapping.get("deviceClassNames") or []:
                found[str(device_class)] = str(mapping.get("name"))
    return found


def _manager(deployment: Obj) -> Obj:
    containers = ((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}
    found = [c for c in containers.get("containers") or [] if isinstance(c, dict)]
    named = [c for c in found if c.get("name") == "manager"]
    return (named or found or [{}])[0]


def kueue_version(deployment: Obj) -> tuple[int, int] | None:
    """(major, minor) from the manager's image tag (registry.k8s.io/kueue/kueue:v0.17.1)."""
    image = str(_manager(deployment).get("image") or "")
    match = re.search(r":v(\d+)\.(\d+)(?:\.\d+)?(?:[-@].*)?$", image)
    return (int(match[1]), int(match[2])) if match else None


def _flag_gates(manager: Obj) -> dict[str, bool]:
    words = [str(w) for w in (manager.get("command") or []) + (manager.get("args") or [])]
    gates: dict[str, bool] = {}
    for i, word in enumerate(words):
        if word.startswith("--feature-gates="):
            value = word.split("=", 1)[1]
        elif word == "--feature-gates" and i + 1 < len(words):
            value = words[i + 1]
        else:
            continue
        for pair in value.split(","):
            key, _, on = pair.partition("=")
            gates[key.strip()] = on.strip().lower() == "true"
    return gates


def kueue_gate(deployment: Obj, configuration: Obj, version: tuple[int, int]) -> Gate:
    """Kueue's DRA gate as this version names it, and whether it is on."""
    name = "KueueDRAIntegration" if version >= RENAMED else "DynamicResourceAllocation"
    flags = _flag_gates(_manager(deployment))
    if name in flags:
        return Gate(name, flags[name], "--feature-gates")
    config = configuration.get("featureGates")
    if isinstance(config, dict) and isinstance(config.get(name), bool):
        return Gate(name, config[name], "the Configuration's featureGates")
    return Gate(name, version >= RENAMED, "its default")


def _pod_based(configuration: Obj) -> list[str]:
    integrations = configuration.get("integrations")
    frameworks = integrations.get("frameworks") if isinstance(integrations, dict) else None
    return [f for f in POD_BASED if f in (frameworks or [])]


def check_kueue(
    configmap: Obj | ReadError | None, deployment: Obj | ReadError | None, policy: Policy
) -> Check:
    """FAIL where pods gpu2dra translates escape a ClusterQueue or are held for good; WARN
    where a shape of them would be refused."""
    name = "kueue"
    where = f"ConfigMap {KUEUE_NAMESPACE}/{KUEUE_CONFIG}"
    if configmap is None and deployment is None:
        return Check(name, "PASS", f"Kueue not installed (no {where})")
    for read in (configmap, deployment):
        if isinstance(read, ReadError):
            return unreadable(name, read)
    manager = f"Deployment {KUEUE_NAMESPACE}/{KUEUE_DEPLOYMENT}"
    if not isinstance(configmap, dict) or (configuration := kueue_configuration(configmap)) is None:
        absent = "is missing" if configmap is None else "holds no Kueue Configuration"
        return Check(name, "WARN", f"{where} {absent}", "check Kueue's install")
    if not isinstance(deployment, dict) or (version := kueue_version(deployment)) is None:
        return Check(
            name,
            "WARN",
            f"cannot tell Kueue's version (no {manager} with an image tag vX.Y): whether it "
            "counts the DRA claims of the pods gpu2dra translates depends on it",
            "run Kueue from its release image, or check its DRA gate and deviceClassMappings "
            "by hand (docs/concepts/quota.md#kueue)",
        )
    shown = f"Kueue v{version[0]}.{version[1]}"
    pod_based = _pod_based(configuration)
    if not pod_based:
        return Check(
            name,
            "PASS",
            f"{shown} builds no Workload from pods (integrations {', '.join(POD_BASED)} off): "
            "it counts GPUs from the pod templates admission never changes",
        )
    integrations = f"its {' and '.join(pod_based)} integration"
    restart = "restart Kueue (it reads its configuration at start-up)"
    if version < FIRST:
        return Check(
            name,
            "FAIL",
            f"{shown} counts no DRA claim: pods of {integrations} that gpu2dra translates "
            "escape their ClusterQueue's GPU quota",
            "upgrade Kueue to a release that counts DRA claims (v0.14 or later), or keep its "
            "namespaces disabled in gpu2dra",
        )
    gate = kueue_gate(deployment, configuration, version)
    if not gate.on:
        return Check(
            name,
            "FAIL",
            f"{shown} has its DRA gate {gate.name} off ({gate.why}): it ignores claims, so "
            f"pods of {integrations} that gpu2dra translates escape their ClusterQueue's GPU "
            "quota",
            f"start Kueue with --feature-gates={gate.name}=true, map the DeviceClasses in "
            f"resources.deviceClassMappings, and {restart}",
        )
    mapped = kueue_mapped(configuration)
    needed: Sequence[str] = sorted(mapped_classes(policy))
    if missing := [c for c in needed if c not in mapped]:
        example = ", ".join(f"{{name: <quota name>, deviceClassNames: [{c}]}}" for c in missing)
        return Check(
            name,
            "FAIL",
            f"{shown} counts DRA claims and its resources.deviceClassMappings has no entry for "
            f"{', '.join(missing)}: pods of {integrations} that gpu2dra translates are "
            'inadmissible for good ("DeviceClass ... is not mapped", on their Workloads)',
            f"add to {KUEUE_KEY} in {where}: resources: {{deviceClassMappings: [{example}]}}, "
            f"give the name a nominalQuota in the ClusterQueues, and {restart}",
        )
    counted = ", ".join(f"{c} as {mapped[c]}" for c in needed)
    if selecting := _selecting(policy):
        return Check(
            name,
            "WARN",
            f'{shown} counts {counted}, but Kueue refuses a claim with CEL selectors ("CEL '
            "selectors are not supported\", in v0.17's pkg/dra/claims.go): pods of "
            f"{integrations} that ask for {', '.join(selecting)}, or whose GFD node labels or "
            "HAMi annotations gpu2dra turns into selectors, stay held by Kueue",
            "keep such pods out of namespaces gpu2dra translates, or in Kueue's Job-style "
            "integrations, which count their templates",
        )
    return Check(name, "PASS", f"{shown} counts {counted}")


def _selecting(policy: Policy) -> list[str]:
    """The resources whose claims always carry CEL selectors: MIG profiles, and mappings with
    selectors of their own."""
    return [m.resource for m in policy.mappings if m.node_labels == "mig" or m.selectors]

"""Kueue and translation: a pod Kueue queues must never escape its ClusterQueue's GPU quota.

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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from app.core.kube import Obj, command_words, flag_values
from app.core.outcomes import Code, Finding

NAMESPACE, CONFIG, DEPLOYMENT = "kueue-system", "kueue-manager-config", "kueue-controller-manager"
CONFIG_KEY = "controller_manager_config.yaml"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
# The integrations whose Workloads are built from the pods themselves.
POD_BASED = ("pod", "deployment")
# The version that renamed the gate and turned it on; the first that counted claims at all.
RENAMED, FIRST = (0, 18), (0, 14)
# Controllers whose pods Kueue counts from the controller's pod template (Job-style), by
# the kind of the pod's controller: a ReplicaSet's pods are the deployment integration's.
TEMPLATE_COUNTED = frozenset(
    [
        "Job",
        "JobSet",
        "StatefulSet",
        "LeaderWorkerSet",
        "RayCluster",
        "MPIJob",
        "PyTorchJob",
        "TFJob",
        "XGBoostJob",
        "PaddleJob",
        "JAXJob",
        "TrainJob",
        "AppWrapper",
    ]
)


@dataclass(frozen=True, slots=True)
class Gate:
    name: str  # as this version spells it
    on: bool
    why: str  # where the value comes from


@dataclass(frozen=True, slots=True)
class Kueue:
    """What admission needs of a running Kueue, read from its ConfigMap and Deployment."""

    version: tuple[int, int] | None  # None: the image tag does not say
    gate: Gate | None  # None: before v0.14, or the version is unknown
    pod_based: tuple[str, ...]  # the POD_BASED integrations it runs
    mapped: Mapping[str, str] = field(default_factory=dict)  # DeviceClass -> quota name

    @property
    def shown(self) -> str:
        return f"Kueue v{self.version[0]}.{self.version[1]}" if self.version else "Kueue"


def configuration(configmap: Obj) -> Obj | None:
    """The `Configuration` in Kueue's ConfigMap (its usual key first); None if none parses."""
    data = configmap.get("data") or {}
    for key in sorted(data, key=lambda k: k != CONFIG_KEY):
        try:
            doc = yaml.safe_load(data[key])
        except yaml.YAMLError:
            continue
        if isinstance(doc, dict) and doc.get("kind") == "Configuration":
            return doc
    return None


def mapped(config: Obj) -> dict[str, str]:
    """DeviceClass -> the Kueue resource name its claims count as (deviceClassMappings)."""
    resources: Any = config.get("resources") or {}
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


def version(deployment: Obj) -> tuple[int, int] | None:
    """(major, minor) from the manager's image tag (registry.k8s.io/kueue/kueue:v0.17.1)."""
    image = str(_manager(deployment).get("image") or "")
    match = re.search(r":v([0-9]+)\.([0-9]+)(?:\.[0-9]+)?(?:[-@].*)?$", image)
    return (int(match[1]), int(match[2])) if match else None


def _flag_gates(manager: Obj) -> dict[str, bool]:
    gates: dict[str, bool] = {}
    for value in flag_values(command_words(manager), "feature-gates"):
        for pair in value.split(","):
            key, _, on = pair.partition("=")
            gates[key.strip()] = on.strip().lower() == "true"
    return gates


def gate(deployment: Obj, config: Obj, at: tuple[int, int]) -> Gate:
    """Kueue's DRA gate as version `at` names it, and whether it is on."""
    name = "KueueDRAIntegration" if at >= RENAMED else "DynamicResourceAllocation"
    flags = _flag_gates(_manager(deployment))
    if name in flags:
        return Gate(name, flags[name], "--feature-gates")
    gates = config.get("featureGates")
    if isinstance(gates, dict) and isinstance(gates.get(name), bool):
        return Gate(name, gates[name], "the Configuration's featureGates")
    return Gate(name, at >= RENAMED, "its default")


def pod_based(config: Obj) -> tuple[str, ...]:
    integrations = config.get("integrations")
    frameworks = integrations.get("frameworks") if isinstance(integrations, dict) else None
    return tuple(f for f in POD_BASED if f in (frameworks or []))


def read(configmap: Obj | None, deployment: Obj | None) -> Kueue | None:
    """Kueue as its objects say; None when neither exists (Kueue is not installed). What
    cannot be read counts as the worst: no version, no gate."""
    if configmap is None and deployment is None:
        return None
    config = configuration(configmap) if configmap is not None else None
    config = config or {}
    at = version(deployment) if deployment is not None else None
    found = gate(deployment or {}, config, at) if at is not None and at >= FIRST else None
    # Without its Configuration Kueue runs its defaults, which include the pod integration
    # in no release; but an unreadable one is no proof: assume the pods are its.
    based = pod_based(config) if config else POD_BASED
    return Kueue(at, found, based, mapped(config))


def queued(metadata: object) -> bool:
    """Whether Kueue's pod-based integrations count the pod of `metadata` from the pod itself:
    it has a queue, and no controller that Kueue counts from its template (a ReplicaSet's
    pods are the deployment integration's)."""
    labels = metadata.get("labels") if isinstance(metadata, dict) else None
    if not isinstance(labels, dict) or not labels.get(QUEUE_LABEL):
        return False
    owners = metadata.get("ownerReferences") if isinstance(metadata, dict) else None
    for owner in owners if isinstance(owners, list) else ():
        if isinstance(owner, dict) and owner.get("controller") is True:
            return owner.get("kind") not in TEMPLATE_COUNTED
    return True


def selecting(templates: Iterable[Obj]) -> bool:
    """Whether a request of the templates has CEL selectors (what v0.17 refuses)."""
    return any(
        r["exactly"].get("selectors")
        for t in templates
        for r in t["spec"]["spec"]["devices"]["requests"]
    )


def uncounted(kueue: Kueue, classes: Iterable[str], selects: bool, then: str) -> Finding | None:
    """Why this Kueue would not count a queued pod's claims of `classes` (or would hold the
    pod for good), ending with `then`; None when it counts them."""
    if not kueue.pod_based:
        return None
    said = {"kueue": kueue.shown, "then": then}
    if kueue.gate is None:
        return Finding(Code.KUEUE_NO_DRA, **said)
    if not kueue.gate.on:
        return Finding(Code.KUEUE_GATE_OFF, gate=kueue.gate.name, **said)
    if missing := sorted(set(classes) - kueue.mapped.keys()):
        return Finding(Code.KUEUE_UNMAPPED, classes=", ".join(missing), **said)
    if selects:
        return Finding(Code.KUEUE_SELECTORS, **said)
    return None

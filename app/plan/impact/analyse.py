"""What would stop seeing pods once gpu2dra translates them, a pure function of what was read
(`Inputs`): webhooks whose match conditions name a mapped resource, known components
(app/readers/stack.py), custom resources known to read GPU counts, ResourceQuotas and Kueue
ClusterQueues; each finding with what changes and what to do."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from app.core.kube import Obj
from app.core.policy import Policy
from app.core.quota import DEVICES_SUFFIX, legacy_use
from app.readers.client import (
    Listed,
    ReadError,
    cannot_read,
)
from app.readers.registrations import MUTATING_WEBHOOK, VALIDATING_WEBHOOKS
from app.readers.stack import components, maps_dra

Level = Literal["WARN", "INFO"]
OWN_WEBHOOKS = frozenset((MUTATING_WEBHOOK, *VALIDATING_WEBHOOKS))
# Custom resources known to read GPU counts from their own spec, which admission never changes.
READERS = {
    "ray.io": (
        "KubeRay",
        "sets `ray start --num-gpus` and the Ray autoscaler's GPU count from each group's "
        "nvidia.com/gpu limit in the RayCluster, which gpu2dra does not change: unaffected",
        "translate the pods at admission; a RayCluster translated offline (gpu2dra "
        "translate) keeps the count in rayStartParams.num-gpus (docs/concepts/workloads.md)",
    ),
    "trainer.kubeflow.org": (
        "Kubeflow Trainer",
        "reads processes per node from the runtime's node container GPU limit, in the "
        "TrainJob or its runtime: unaffected while the custom resource keeps it",
        "translate the pods at admission, never the custom resource itself",
    ),
    "scheduling.volcano.sh": (
        "Volcano Queues",
        "a Queue's capability counts nvidia.com/gpu: translated pods no longer count there",
        "limit GPUs on the DRA side too (gpu2dra quota), or keep Volcano's namespaces disabled",
    ),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    level: Level
    kind: str  # webhook | component | custom-resource | quota | queue
    subject: str
    change: str
    action: str
    details: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Inputs:
    mutating: Listed
    validating: Listed
    deployments: Listed
    daemonsets: Listed
    crds: Listed
    quotas: Listed  # the namespaces' in scope
    cluster_queues: Listed | None = None  # None: Kueue is not installed
    # The namespace about to be enabled and its labels; None: every namespace.
    namespace: tuple[str, Mapping[str, str]] | None = None
    unreadable: list[str] = field(default_factory=list)


def resource_names(policy: Policy) -> tuple[str, ...]:
    """The mapped resources as text to look for: `nvidia.com/gpu`, `nvidia.com/mig-`."""
    return tuple(dict.fromkeys(m.resource.rstrip("*") for m in policy.mappings))


def _covers_pod_create(hook: Obj) -> bool:
    for rule in hook.get("rules") or []:
        groups, resources = rule.get("apiGroups") or [], rule.get("resources") or []
        operations = rule.get("operations") or []
        if (
            ("" in groups or "*" in groups)
            and ("pods" in resources or "*" in resources or "*/*" in resources)
            and ("CREATE" in operations or "*" in operations)
        ):
            return True
    return False


def selects(selector: Any, labels: Mapping[str, str]) -> bool:
    """A label selector (matchLabels, matchExpressions) applied to `labels`; none: all."""
    if not isinstance(selector, dict):
        return True
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for term in selector.get("matchExpressions") or []:
        key, op, values = term.get("key"), term.get("operator"), term.get("values") or []
        present = key in labels
        if (
            (op == "In" and labels.get(key) not in values)
            or (op == "NotIn" and present and labels[key] in values)
            or (op == "Exists" and not present)
            or (op == "DoesNotExist" and present)
        ):
            return False
    return True


def webhook_findings(
    kind: str,
    configs: Iterable[Obj],
    *,
    names: tuple[str, ...],
    shown: str,
    namespace: tuple[str, Mapping[str, str]] | None = None,
) -> list[Finding]:
    """With `namespace` (its name and labels), a webhook whose namespaceSelector does not
    select it is INFO: that namespace's pods are not sent to it anyway."""
    found = []
    for config in configs:
        for hook in config.get("webhooks") or []:
            if hook.get("name") in OWN_WEBHOOKS or not _covers_pod_create(hook):
                continue
            naming = [
                f"{c.get('name')}: {c.get('expression')}"
                for c in hook.get("matchConditions") or []
                if any(n in str(c.get("expression", "")) for n in names)
            ]
            if not naming:
                continue
            when = (
                "validating webhooks see the pod as stored, translated"
                if kind == "ValidatingWebhookConfiguration"
                else "a mutating webhook called after gpu2dra sees the translated pod"
            )
            level: Level = "WARN"
            elsewhere = ""
            if namespace and not selects(hook.get("namespaceSelector"), namespace[1]):
                level = "INFO"
                elsewhere = f" (its namespaceSelector leaves out namespace {namespace[0]})"
            found.append(
                Finding(
                    level=level,
                    kind="webhook",
                    subject=f"{kind} {config['metadata']['name']}, webhook {hook.get('name')}",
                    change=(
                        f"its match conditions send it only pods that ask for {shown}; "
                        f"{when}, which asks for none: it no longer sees migrated pods{elsewhere}"
                    ),
                    action=(
                        "match pods with claims too (object.spec.?resourceClaims.orValue([]) != "
                        "[]), or keep the namespaces it serves disabled"
                    ),
                    details=tuple(naming),
                )
            )
    return found


def component_findings(deployments: Listed, daemonsets: Listed) -> list[Finding]:
    seen: dict[str, list[str]] = {}
    by_key = {}
    for kind, listed in (("Deployment", deployments), ("DaemonSet", daemonsets)):
        if isinstance(listed, ReadError):
            continue
        for found in components(kind, listed):
            where = f"{kind} {found.namespace}/{found.name}"
            if found.known.key == "dcgm-exporter" and maps_dra(found):
                where += " (KUBERNETES_ENABLE_DRA=true)"
            seen.setdefault(found.known.key, []).append(where)
            by_key[found.known.key] = found.known
    return [
        Finding(
            level="WARN",
            kind="component",
            subject=f"{by_key[key].name}: {', '.join(objects)}",
            change=by_key[key].change,
            action=by_key[key].action,
        )
        for key, objects in seen.items()
    ]


def crd_findings(crds: Iterable[Obj]) -> list[Finding]:
    groups: dict[str, list[str]] = {}
    for crd in crds:
        group = str((crd.get("spec") or {}).get("group", ""))
        if group in READERS:
            groups.setdefault(group, []).append(str(crd["metadata"]["name"]))
    found = []
    for group, names in sorted(groups.items()):
        name, change, action = READERS[group]
        level: Level = "WARN" if group == "scheduling.volcano.sh" else "INFO"
        found.append(
            Finding(
                level=level,
                kind="custom-resource",
                subject=f"{name}: {', '.join(names)}",
                change=change,
                action=action,
            )
        )
    return found


def quota_findings(quotas: Iterable[Obj], policy: Policy) -> list[Finding]:
    by_namespace: dict[str, list[Obj]] = {}
    for quota in quotas:
        by_namespace.setdefault(str(quota["metadata"].get("namespace", "")), []).append(quota)
    found = []
    for namespace, objs in sorted(by_namespace.items()):
        keys = {k for q in objs for k in ((q.get("spec") or {}).get("hard") or {})}
        for quota in objs:
            for key in (quota.get("spec") or {}).get("hard") or {}:
                use = legacy_use(key, policy)
                if use is None:
                    continue
                resource, device_class = use
                mirrored = device_class + DEVICES_SUFFIX in keys
                subject = f"ResourceQuota {namespace}/{quota['metadata']['name']} ({key})"
                change = f"translated pods ask for no {resource}: this quota no longer counts them"
                if mirrored:
                    found.append(
                        Finding(
                            level="INFO",
                            kind="quota",
                            subject=subject,
                            change=f"{change}; {device_class}{DEVICES_SUFFIX} limits their devices",
                            action="nothing: both sides are limited",
                        )
                    )
                else:
                    found.append(
                        Finding(
                            level="WARN",
                            kind="quota",
                            subject=subject,
                            change=(
                                f"{change}, and no quota of the namespace limits "
                                f"{device_class}{DEVICES_SUFFIX}: gpu2dra leaves its GPU pods on "
                                "the device plugin"
                            ),
                            action=f"gpu2dra quota -n {namespace} | kubectl apply -f -",
                        )
                    )
    return found


def queue_findings(queues: Iterable[Obj], names: tuple[str, ...]) -> list[Finding]:
    found = []
    for queue in queues:
        covered = sorted(
            {
                str(r)
                for group in (queue.get("spec") or {}).get("resourceGroups") or []
                for r in group.get("coveredResources") or []
                if any(str(r).startswith(n) for n in names)
            }
        )
        if covered:
            found.append(
                Finding(
                    level="WARN",
                    kind="queue",
                    subject=f"ClusterQueue {queue['metadata']['name']} ({', '.join(covered)})",
                    change=(
                        "a translated pod asks for none of these: Kueue counts its claims only "
                        "with its DRA gate on and their DeviceClass mapped "
                        "(resources.deviceClassMappings), under the mapped name"
                    ),
                    action=(
                        "see gpu2dra doctor's kueue check; give the queue a quota for the mapped "
                        "name (docs/concepts/quota.md#kueue)"
                    ),
                )
            )
    return found


def analyse(inputs: Inputs, policy: Policy) -> tuple[list[Finding], list[str]]:
    """The findings, WARN first, and what could not be read."""
    names = resource_names(policy)
    shown = " or ".join(m.resource for m in policy.mappings)
    findings: list[Finding] = []
    unreadable = list(inputs.unreadable)
    for kind, listed in (
        ("MutatingWebhookConfiguration", inputs.mutating),
        ("ValidatingWebhookConfiguration", inputs.validating),
    ):
        if isinstance(listed, ReadError):
            unreadable.append(cannot_read(listed, f"{kind}s"))
        else:
            findings += webhook_findings(
                kind, listed, names=names, shown=shown, namespace=inputs.namespace
            )
    for what, listed in (("deployments", inputs.deployments), ("daemonsets", inputs.daemonsets)):
        if isinstance(listed, ReadError):
            unreadable.append(cannot_read(listed, what))
    findings += component_findings(inputs.deployments, inputs.daemonsets)
    if isinstance(inputs.crds, ReadError):
        unreadable.append(cannot_read(inputs.crds, "customresourcedefinitions"))
    else:
        findings += crd_findings(inputs.crds)
    if isinstance(inputs.quotas, ReadError):
        unreadable.append(cannot_read(inputs.quotas, "resourcequotas"))
    else:
        findings += quota_findings(inputs.quotas, policy)
    if isinstance(inputs.cluster_queues, ReadError):
        unreadable.append(cannot_read(inputs.cluster_queues, "clusterqueues"))
    elif inputs.cluster_queues is not None:
        findings += queue_findings(inputs.cluster_queues, names)
    findings.sort(key=lambda f: f.level != "WARN")
    return findings, unreadable

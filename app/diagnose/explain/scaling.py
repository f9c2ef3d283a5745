"""Whether a node can be found or added for a pod whose claims wait, for `gpu2dra explain`:
what the node autoscalers said of the pod (their events), and which of them can add a node
with DRA devices at all (app/core/autoscalers.py). A translated pod no autoscaler adds a node
for is Pending for good; the steps say so, and what gets it a node."""

from __future__ import annotations

from app.core.autoscalers import Autoscaler
from app.core.kube import Obj
from app.diagnose.explain.facts import PodFacts
from app.diagnose.explain.step import Step, unreadable_step
from app.readers.client import ReadError

# Who writes the events, as their recorders name themselves: Karpenter's controllers
# ("karpenter", pkg/controllers/controllers.go) and Cluster Autoscaler ("cluster-autoscaler").
KARPENTER, CLUSTER_AUTOSCALER = "karpenter", "cluster-autoscaler"
# What each says when it adds no node for a pod, and when it adds one (FAQ: "What events are
# emitted by CA?"; Karpenter's scheduling/events.go and its Nominated event).
_REFUSALS = {(KARPENTER, "FailedScheduling"), (CLUSTER_AUTOSCALER, "NotTriggerScaleUp")}
_ADDING = {(KARPENTER, "Nominated"), (CLUSTER_AUTOSCALER, "TriggeredScaleUp")}
_NAMES = {KARPENTER: "Karpenter", CLUSTER_AUTOSCALER: "Cluster Autoscaler"}
_BACK = (
    "to run it on the device plugin now: gpu2dra leaves such pods when no device is published "
    "and no autoscaler can add one (policy noDraCapacity: leave, the default); recreate the "
    "pod, or set the namespace to audit and recreate it"
)


def _component(event: Obj) -> str:
    return str(
        (event.get("source") or {}).get("component")
        or event.get("reportingComponent")
        or event.get("reportingController")
        or ""
    )


def _said(events: list[Obj]) -> list[Step]:
    """The latest refusal or scale-up of each autoscaler that wrote about the pod."""
    latest: dict[str, Obj] = {}
    for event in events:  # oldest first: a later one replaces an earlier
        key = (_component(event), str(event.get("reason") or ""))
        if key in _REFUSALS or key in _ADDING:
            latest[key[0]] = event
    steps = []
    for component, event in sorted(latest.items()):
        who, message = _NAMES[component], str(event.get("message") or "")
        if (component, event.get("reason")) in _ADDING:
            steps.append(Step("info", f"{who} is adding a node for it: {message}"))
            continue
        hint = (
            (
                "Karpenter adds nodes for pods with claims only with --ignore-dra-requests=false "
                "and a cloud provider that predicts the devices of its instance types",
                _BACK,
            )
            if component == KARPENTER
            else (_BACK,)
        )
        steps.append(Step("FAIL", f"{who} adds no node for it: {message}", hint))
    return steps


def _able(found: tuple[Autoscaler, ...]) -> Step:
    if not found:
        return Step("info", "no node autoscaler found: no node is added for it")
    if any(a.adds_dra_nodes for a in found):
        return Step(
            "info",
            "a node autoscaler can add nodes with DRA devices: "
            + "; ".join(a.said for a in found if a.adds_dra_nodes),
        )
    return Step(
        "WARN",
        "no node autoscaler can add a node with DRA devices for it",
        tuple(a.said for a in found),
    )


def _unschedulable(pod: Obj) -> bool:
    return any(
        c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def scaling_steps(facts: PodFacts, events: list[Obj]) -> list[Step]:
    """For a pod with claims that is not bound: what the autoscalers said and can do.
    `events` are the pod's, oldest first."""
    spec = facts.pod.get("spec") or {}
    if spec.get("nodeName") or not spec.get("resourceClaims"):
        return []
    steps = _said(events)
    if not _unschedulable(facts.pod):  # gated, or not judged yet: no autoscaler looks at it
        return steps
    if isinstance(facts.autoscalers, ReadError):
        return [*steps, unreadable_step("the node autoscalers' Deployments", facts.autoscalers)]
    return [*steps, _able(facts.autoscalers)]

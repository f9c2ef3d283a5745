"""Why a GPU pod is in its state, a pure function of what was read of it (`PodFacts`):
translated or not (and why), its claims (claims.py), scheduling, and the events as evidence."""

from __future__ import annotations

from dataclasses import dataclass

from app.core.catalog import Catalog
from app.core.failclosed import yunikorn_mark
from app.core.intree import native_classes
from app.core.kube import Obj
from app.core.kueue import selecting, uncounted
from app.core.outcomes import KUEUE_THEN, NO_PREEMPTION
from app.core.policy import MODE_LABEL, Policy, mode_label
from app.core.priority import preempting_class
from app.core.quota import Quota, quota_warning, unguarded
from app.core.resources import legacy_devices
from app.core.scope import skip_reason
from app.core.templates import TEMPLATE_PREFIX
from app.core.translate import Translation, describe, translate
from app.diagnose.explain.claims import claim_steps, extended_steps
from app.diagnose.explain.facts import PodFacts
from app.diagnose.explain.scaling import scaling_steps
from app.diagnose.explain.step import Step, StepCode, unreadable_step
from app.diagnose.explain.workload import ADMISSION_GATE, admission_gated, waiting_for
from app.readers.client import ReadError, cannot_read


@dataclass(frozen=True, slots=True)
class Explanation:
    headline: str
    steps: tuple[Step, ...]
    events: tuple[str, ...]


def _not_translated(facts: PodFacts, policy: Policy, legacy: dict[str, int]) -> list[Step]:
    pod, spec = facts.pod, facts.pod.get("spec") or {}
    namespace = pod["metadata"].get("namespace", "")
    asks = ", ".join(f"{n} x {r}" for r, n in legacy.items())
    notes = []
    if isinstance(facts.device_classes, ReadError):
        notes.append(
            unreadable_step("DeviceClasses (the policy's list stands in)", facts.device_classes)
        )
        catalog = Catalog.of(policy.device_classes)
    else:
        catalog = Catalog.from_objects(facts.device_classes)
    if isinstance(facts.autoscalers, ReadError):
        notes.append(unreadable_step("the node autoscalers' Deployments", facts.autoscalers))
    if isinstance(facts.slices, list):  # which drivers share or publish devices, as admission
        found = facts.autoscalers if isinstance(facts.autoscalers, tuple) else ()
        catalog = catalog.seeing(facts.slices, found)
    else:
        notes.append(
            unreadable_step("ResourceSlices (shared devices taken as published)", facts.slices)
        )
    native = native_classes(legacy, catalog)
    in_tree = len(native) == len(legacy)  # the scheduler serves every resource it asks for
    uses = "it is served in-tree" if in_tree else "it uses the device plugin"
    more = extended_steps(facts, native, legacy) if in_tree else []
    if reason := skip_reason(pod, namespace, policy):
        return [*notes, Step("info", f"not translated ({asks}): {reason}; {uses}"), *more]
    if isinstance(facts.namespace_labels, ReadError):
        return [unreadable_step(f"namespace {namespace}, so its mode", facts.namespace_labels)]
    mode = policy.mode_for(facts.namespace_labels)
    label = mode_label(facts.namespace_labels)
    where = f"label {MODE_LABEL}={label}" if label is not None else "no label: the default mode"
    meta = pod["metadata"]
    translation = translate(
        spec, policy, catalog, meta.get("annotations"), yunikorn=yunikorn_mark(meta)
    )
    if translation.in_tree and mode != "disabled":
        why = f"not translated ({asks}): gpu2dra leaves it to the in-tree path"
        return [*notes, Step("info", f"{why} ({translation.in_tree})"), *more]
    if mode != "disabled" and isinstance(facts.quotas, list):
        moved = translation.uses
        quotas = map(Quota.of, facts.quotas)
        if lifted := unguarded(moved, quotas, catalog, translation.capacities):
            warning = quota_warning(namespace, lifted)
            return [*notes, Step("info", f"not translated ({asks}): {warning}"), *more]
    if mode != "disabled" and translation.changed and policy.kueue_pods == "leave":
        if isinstance(facts.kueue, ReadError):
            notes.append(unreadable_step("Kueue's ConfigMap and Deployment", facts.kueue))
        elif facts.kueue is not None:
            classes = {c for _, c in translation.uses}
            selects = selecting(translation.templates)
            if held := uncounted(facts.kueue, classes, selects, KUEUE_THEN["leave"]):
                return [*notes, Step("info", f"not translated ({asks}): {held}"), *more]
    verdict = _verdict(facts, asks=asks, mode=mode, where=where, translation=translation, uses=uses)
    return notes + verdict + more


def _verdict(
    facts: PodFacts, *, asks: str, mode: str, where: str, translation: Translation, uses: str
) -> list[Step]:
    """Why gpu2dra left the pod untranslated in a namespace of this mode."""
    spec = facts.pod.get("spec") or {}
    namespace = facts.pod["metadata"].get("namespace", "")
    if mode == "disabled":
        return [
            Step(
                "info",
                f"not translated ({asks}): namespace {namespace} is in mode disabled ({where}); "
                f"{uses}",
                (
                    f"to move it to DRA: kubectl label namespace {namespace} {MODE_LABEL}=enabled "
                    "--overwrite, then recreate the pod",
                ),
            )
        ]
    if mode == "audit":
        would = describe(spec, translation) if translation.changed else "change nothing"
        return [
            Step(
                "info",
                f"not translated ({asks}): namespace {namespace} is in audit mode ({where}): "
                f"admitted unchanged; gpu2dra would {would}",
                translation.warnings,
            )
        ]
    if not translation.changed:
        return [
            Step(
                "FAIL",
                f"not translated ({asks}): gpu2dra leaves this pod as it is",
                translation.warnings,
            )
        ]
    why = (
        "the mutating webhook is not registered"
        if facts.webhook_registered is False
        else "the webhook did not see its creation: the pod predates the opt-in, or gpu2dra was "
        "down (failurePolicy Ignore admits pods unchanged)"
    )
    return [
        Step(
            "FAIL",
            f"not translated ({asks}) although namespace {namespace} is enabled: {why}",
            (
                "pod claims can only be added when a pod is created: delete the pod so that its "
                "controller recreates it",
                *translation.warnings,
            ),
        )
    ]


def _schedule_step(facts: PodFacts) -> Step:
    pod = facts.pod
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    if spec.get("nodeName"):
        return Step("PASS", f"scheduled and bound to node {spec['nodeName']}")
    if admission_gated(spec):
        return _held_by_kueue(facts.workload)
    if spec.get("schedulingGates"):
        gates = ", ".join(g.get("name", "") for g in spec["schedulingGates"])
        return Step("FAIL", f"not scheduled: scheduling gates {gates} are still set")
    for c in status.get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False":
            return Step("FAIL", f"not scheduled ({c.get('reason')}): {c.get('message', '')}")
    return Step("FAIL", "not scheduled yet: the scheduler has not judged it (is it running?)")


def _held_by_kueue(workload: Obj | ReadError | None) -> Step:
    """Why Kueue's admission gate is still on the pod, as its Workload's conditions say."""
    held = f"not scheduled: Kueue holds it (scheduling gate {ADMISSION_GATE})"
    if isinstance(workload, ReadError):
        return Step("FAIL", held, (cannot_read(workload, "its Workload"),))
    if workload is None:
        return Step("FAIL", f"{held}: no Workload of it yet (is Kueue's manager running?)")
    name = workload["metadata"].get("name")
    return Step("FAIL", f"{held}: Workload {name}: {waiting_for(workload)}")


def _event_line(event: Obj) -> str:
    when = event.get("lastTimestamp") or event.get("eventTime") or ""
    count = event.get("count") or (event.get("series") or {}).get("count") or 1
    times = f" x{count}" if int(count) > 1 else ""
    return f"{when} {event.get('type')} {event.get('reason')}{times}: {event.get('message', '')}"


def explain(facts: PodFacts, policy: Policy) -> Explanation:
    pod = facts.pod
    meta, spec = pod["metadata"], pod.get("spec") or {}
    phase = (pod.get("status") or {}).get("phase", "Unknown")
    where = f"on node {spec['nodeName']}" if spec.get("nodeName") else "not scheduled"
    headline = f"pod {meta.get('namespace')}/{meta.get('name')}: {phase}, {where}"
    legacy = legacy_devices(spec, policy)
    steps: list[Step] = []
    if legacy:
        steps += _not_translated(facts, policy, legacy)
    elif not spec.get("resourceClaims"):
        steps.append(Step("info", "no GPU request: neither legacy GPU resources nor claims"))
    else:
        ours = [
            c["name"]
            for c in spec["resourceClaims"]
            if str(c.get("resourceClaimTemplateName", "")).startswith(TEMPLATE_PREFIX)
        ]
        if ours:
            steps.append(Step("PASS", f"translated by gpu2dra: claim(s) {', '.join(ours)}"))
        steps += claim_steps(facts)
    refused = any(s.code is StepCode.CLAIM_OVER_QUOTA for s in steps)
    if refused and not spec.get("nodeName"):
        steps.append(Step("FAIL", "not scheduled: the scheduler waits until its claims exist"))
    else:
        steps.append(_schedule_step(facts))
    waiting = not spec.get("nodeName") and spec.get("resourceClaims")
    if waiting and (preempting := preempting_class(spec)) is not None:
        steps.append(
            Step(
                "info",
                f"priorityClassName {preempting} can preempt, but {NO_PREEMPTION}: the pod "
                "waits until matching devices are free",
            )
        )
    if isinstance(facts.events, ReadError):
        steps.append(unreadable_step("the pod's events", facts.events))
    events = sorted(
        facts.events if isinstance(facts.events, list) else [],
        key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""),
    )
    steps += scaling_steps(facts, events)
    return Explanation(headline, tuple(steps), tuple(_event_line(e) for e in events[-8:]))

"""`gpu2dra explain pod NAME -n NS`: why a GPU pod is in its state, step by step.

`gather` reads the pod and what it depends on (GETs only); `explain` is a pure function of it:
translated or not (and why), template, ResourceClaim, allocation (device by device, with the
selectors evaluated as the scheduler does), scheduling, and the events as evidence.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal

from app.core.catalog import Catalog
from app.core.kube import Obj
from app.core.policy import MODE_LABEL, Policy
from app.core.translate import TEMPLATE_PREFIX, Translation, translate
from app.troubleshoot.celdevices import Device, SelectorError, class_selectors, devices_of, matches
from app.troubleshoot.client import (
    MUTATING_WEBHOOK,
    RESOURCE,
    Reader,
    ReadError,
    Unreachable,
    attempt,
    cluster_policy,
    connect,
    registrations,
)
from app.webhook.mutate import Mutator, describe

State = Literal["ok", "FAIL", "WARN", "info"]
MAX_DEVICE_LINES = 16


@dataclass(frozen=True, slots=True)
class Step:
    state: State
    text: str
    details: tuple[str, ...] = ()


# What was read; a ReadError in place of what could not be (None: it does not exist).
Listed = list[Obj] | ReadError
Found = Obj | ReadError | None


@dataclass(frozen=True, slots=True)
class PodFacts:
    pod: Obj
    namespace_labels: Mapping[str, str] | ReadError | None
    device_classes: Listed
    templates: dict[str, Found] = field(default_factory=dict)  # by name
    claim_names: dict[str, str | None] = field(default_factory=dict)  # pod claim -> ResourceClaim
    claims: dict[str, Found] = field(default_factory=dict)  # by ResourceClaim name
    all_claims: Listed = field(default_factory=list)
    slices: Listed = field(default_factory=list)
    events: Listed = field(default_factory=list)
    webhook_registered: bool | None = None  # None: could not tell


@dataclass(frozen=True, slots=True)
class Explanation:
    headline: str
    steps: tuple[Step, ...]
    events: tuple[str, ...]


# ---- the pure part -----------------------------------------------------------------------


def _unreadable(what: str, err: ReadError) -> Step:
    return Step("WARN", f"cannot read {what}: {err}")


def _legacy(spec: Obj, policy: Policy) -> list[str]:
    found = []
    for field_name in ("initContainers", "containers"):
        for c in spec.get(field_name) or []:
            res = c.get("resources") if isinstance(c, dict) else None
            for key in ("limits", "requests"):
                amounts = res.get(key) if isinstance(res, dict) else None
                for r in amounts or {}:
                    if policy.mapping_for(r) is not None and r not in found:
                        found.append(r)
    return found


def _not_translated(facts: PodFacts, policy: Policy, legacy: list[str]) -> list[Step]:
    pod, spec = facts.pod, facts.pod.get("spec") or {}
    namespace = pod["metadata"].get("namespace", "")
    review: Any = {
        "uid": "",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "operation": "CREATE",
        "namespace": namespace,
        "object": pod,
    }
    asks = ", ".join(legacy)
    if reason := Mutator(policy).skip_reason(review):
        return [Step("info", f"not translated ({asks}): {reason}; it uses the device plugin")]
    if isinstance(facts.namespace_labels, ReadError):
        return [_unreadable(f"namespace {namespace}, so its mode", facts.namespace_labels)]
    notes = []
    if isinstance(facts.device_classes, ReadError):
        notes.append(
            _unreadable("DeviceClasses (the policy's list stands in)", facts.device_classes)
        )
        catalog = Catalog.of(policy.device_classes)
    else:
        catalog = Catalog.from_objects(facts.device_classes)
    mode = policy.mode_for(facts.namespace_labels)
    label = (facts.namespace_labels or {}).get(MODE_LABEL)
    where = f"label {MODE_LABEL}={label}" if label is not None else "no label: the default mode"
    translation = translate(spec, policy, catalog)
    return notes + _verdict(facts, asks, mode, where, translation)


def _verdict(
    facts: PodFacts, asks: str, mode: str, where: str, translation: Translation
) -> list[Step]:
    """Why gpu2dra left the pod untranslated in a namespace of this mode."""
    spec = facts.pod.get("spec") or {}
    namespace = facts.pod["metadata"].get("namespace", "")
    if mode == "disabled":
        return [
            Step(
                "info",
                f"not translated ({asks}): namespace {namespace} is in mode disabled ({where}); "
                "it uses the device plugin",
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


def _allocated_to(all_claims: list[Obj]) -> dict[tuple[str, str, str], str]:
    owners = {}
    for claim in all_claims:
        meta = claim.get("metadata") or {}
        allocation = (claim.get("status") or {}).get("allocation") or {}
        for r in (allocation.get("devices") or {}).get("results") or []:
            key = (str(r.get("driver")), str(r.get("pool")), str(r.get("device")))
            owners[key] = f"{meta.get('namespace')}/{meta.get('name')}"
    return owners


def _requests(claim_spec: Obj) -> list[tuple[str, Obj]]:
    """(name, exact request) of a claim: `exactly`, each `firstAvailable` choice, v1beta1."""
    found = []
    for req in (claim_spec.get("devices") or {}).get("requests") or []:
        name = str(req.get("name", ""))
        if isinstance(req.get("exactly"), dict):
            found.append((name, req["exactly"]))
        elif req.get("firstAvailable"):
            found.extend((f"{name}/{s.get('name')}", s) for s in req["firstAvailable"])
        elif req.get("deviceClassName"):
            found.append((name, req))
    return found


def _selectors(request: Obj) -> list[str]:
    return [
        s["cel"]["expression"]
        for s in request.get("selectors") or []
        if isinstance(s, dict) and isinstance(s.get("cel"), dict)
    ]


def analyse_request(
    name: str,
    request: Obj,
    claim: str,
    classes: Mapping[str, Obj],
    devices: list[Device],
    owners: Mapping[tuple[str, str, str], str],
) -> Step:
    """Why a request of an unallocated claim has no devices: each device of its class, whether
    it matches the request's selectors, and whether another claim holds it."""
    class_name = str(request.get("deviceClassName", ""))
    mode = request.get("allocationMode") or "ExactCount"
    need = int(request.get("count") or 1) if mode == "ExactCount" else 0
    wants = f"{need} x {class_name}" if need else f"all {class_name}"
    device_class = classes.get(class_name)
    if device_class is None:
        return Step(
            "FAIL", f"request {name} asks for {wants}: DeviceClass {class_name} does not exist"
        )
    lines, usable, errors = [], Counter[str](), 0
    in_class = matching = taken = 0
    exprs = _selectors(request)
    for device in devices:
        where = f"{device.node or device.pool}/{device.name}"
        try:
            if not all(matches(e, device) for e in class_selectors(device_class)):
                continue
        except SelectorError as err:
            errors += 1
            lines.append(f"{where}: DeviceClass selector fails: {err}")
            continue
        in_class += 1
        verdict = _match(exprs, device)
        if verdict is not None:
            if verdict.startswith("selector"):
                errors += 1
            lines.append(f"{where}: {verdict}")
            continue
        matching += 1
        owner = owners.get(device.key)
        if owner is not None and owner != claim and not device.allow_multiple:
            taken += 1
            lines.append(f"{where}: matches, but allocated to claim {owner}")
            continue
        usable[device.node] += 1
        lines.append(f"{where}: matches and is free")
    shared = usable.pop("", 0)  # devices not bound to a node go with any node
    best_node, best = max(usable.items(), key=lambda kv: kv[1], default=("", 0))
    best += shared
    counts = (
        f"{in_class} device(s) in the class, {matching} match the selectors, {taken} of those "
        f"are allocated to other claims"
    )
    if len(lines) > MAX_DEVICE_LINES:
        lines = [*lines[:MAX_DEVICE_LINES], f"... and {len(lines) - MAX_DEVICE_LINES} more"]
    if errors:
        return Step(
            "FAIL",
            f"request {name} asks for {wants}: a selector fails on {errors} device(s); the "
            "scheduler aborts allocation with a CEL runtime error",
            tuple(lines),
        )
    if need and best >= need:
        return Step(
            "info",
            f"request {name} asks for {wants}: {counts}; {best} free on node {best_node or '-'} "
            "is enough: see the scheduler's events",
            tuple(lines),
        )
    if not in_class:
        why = "no device of the class is published (no driver, or no such devices)"
    elif not need:
        why = "allocationMode All"
    elif not matching:
        why = "no device matches the request's selectors"
    elif matching < need:
        why = f"only {matching} device(s) match the request's selectors"
    elif matching - taken < need:
        why = "capacity exhausted: the matching devices are allocated to other claims"
    else:
        why = f"no single node has {need} free matching device(s) (at most {best})"
    return Step("FAIL", f"request {name} asks for {wants}: {why}; {counts}", tuple(lines))


def _match(exprs: list[str], device: Device) -> str | None:
    """None when every selector matches; else what does not."""
    for number, expr in enumerate(exprs, 1):
        try:
            if not matches(expr, device):
                return f"does not match selector #{number}: {expr}"
        except SelectorError as err:
            return f"selector #{number} fails: {err}"
    return None


def _claim_steps(facts: PodFacts) -> list[Step]:
    pod = facts.pod
    namespace = pod["metadata"].get("namespace", "")
    steps: list[Step] = []
    for pod_claim in (pod.get("spec") or {}).get("resourceClaims") or []:
        label = f"claim {pod_claim.get('name')}"
        template_name = pod_claim.get("resourceClaimTemplateName")
        if template_name:
            template = facts.templates.get(template_name)
            by = "gpu2dra's " if str(template_name).startswith(TEMPLATE_PREFIX) else ""
            if isinstance(template, ReadError):
                steps.append(_unreadable(f"{label}'s ResourceClaimTemplate", template))
            elif template is None:
                steps.append(
                    Step(
                        "FAIL",
                        f"{label}: {by}ResourceClaimTemplate {namespace}/{template_name} is "
                        "missing: no ResourceClaim can be made (FailedResourceClaimCreation)",
                    )
                )
                continue
            else:
                steps.append(_template_step(label, by, str(template_name), template))
        claim_name = pod_claim.get("resourceClaimName") or facts.claim_names.get(
            str(pod_claim.get("name"))
        )
        if not claim_name:
            steps.append(
                Step(
                    "FAIL",
                    f"{label}: no ResourceClaim created yet (the resourceclaim controller in "
                    "kube-controller-manager creates it from the template)",
                )
            )
            continue
        claim = facts.claims.get(claim_name)
        if isinstance(claim, ReadError):
            steps.append(_unreadable(f"{label}'s ResourceClaim {claim_name}", claim))
            continue
        if claim is None:
            steps.append(Step("FAIL", f"{label}: ResourceClaim {namespace}/{claim_name} not found"))
            continue
        allocation = (claim.get("status") or {}).get("allocation")
        if allocation:
            results = (allocation.get("devices") or {}).get("results") or []
            got = ", ".join(f"{r.get('pool')}/{r.get('device')}" for r in results)
            steps.append(Step("ok", f"{label}: ResourceClaim {claim_name} allocated: {got}"))
            continue
        steps.append(Step("FAIL", f"{label}: ResourceClaim {claim_name} is not allocated"))
        steps += _devices_steps(facts, claim, f"{namespace}/{claim_name}")
        constraints = (claim.get("spec") or {}).get("devices", {}).get("constraints")
        if constraints:
            steps.append(Step("info", f"{label}: its constraints ({constraints}) are not checked"))
    return steps


def _template_step(label: str, by: str, name: str, template: Obj) -> Step:
    spec = (template.get("spec") or {}).get("spec") or {}
    wants = "; ".join(
        f"{r.get('count') or 1} x {r.get('deviceClassName')}"
        + (f" where {' && '.join(_selectors(r))}" if _selectors(r) else "")
        for _, r in _requests(spec)
    )
    return Step("ok", f"{label}: {by}ResourceClaimTemplate {name} exists ({wants})")


def _devices_steps(facts: PodFacts, claim: Obj, key: str) -> list[Step]:
    """Each request of an unallocated claim against the devices, when all of them were read."""
    classes, slices, claims = facts.device_classes, facts.slices, facts.all_claims
    if isinstance(classes, ReadError):
        return [_unreadable("DeviceClasses, so no device is checked", classes)]
    if isinstance(slices, ReadError):
        return [_unreadable("ResourceSlices, so no device is checked", slices)]
    if isinstance(claims, ReadError):
        return [_unreadable("all ResourceClaims, so no device is checked", claims)]
    by_name = {c["metadata"]["name"]: c for c in classes}
    owners, devices = _allocated_to(claims), devices_of(slices)
    return [
        analyse_request(name, request, key, by_name, devices, owners)
        for name, request in _requests(claim.get("spec") or {})
    ]


def _schedule_step(pod: Obj) -> Step:
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    if spec.get("nodeName"):
        return Step("ok", f"scheduled and bound to node {spec['nodeName']}")
    if spec.get("schedulingGates"):
        gates = ", ".join(g.get("name", "") for g in spec["schedulingGates"])
        return Step("FAIL", f"not scheduled: scheduling gates {gates} are still set")
    for c in status.get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False":
            return Step("FAIL", f"not scheduled ({c.get('reason')}): {c.get('message', '')}")
    return Step("FAIL", "not scheduled yet: the scheduler has not judged it (is it running?)")


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
    legacy = _legacy(spec, policy)
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
            steps.append(Step("ok", f"translated by gpu2dra: claim(s) {', '.join(ours)}"))
        steps += _claim_steps(facts)
    steps.append(_schedule_step(pod))
    if isinstance(facts.events, ReadError):
        steps.append(_unreadable("the pod's events", facts.events))
    events = sorted(
        facts.events if isinstance(facts.events, list) else [],
        key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""),
    )
    return Explanation(headline, tuple(steps), tuple(_event_line(e) for e in events[-8:]))


def render(explanation: Explanation) -> str:
    lines = [explanation.headline]
    for step in explanation.steps:
        lines.append(f"  {step.state:<4}  {step.text}")
        lines.extend(f"          {d}" for d in step.details)
    if explanation.events:
        lines.append("  events (oldest first):")
        lines.extend(f"          {e}" for e in explanation.events)
    return "\n".join(lines) + "\n"


# ---- reading the cluster -----------------------------------------------------------------


def gather(reader: Reader, namespace: str, name: str) -> PodFacts:
    """The pod (which must be readable) and what it depends on, each as far as it can be read."""
    try:
        pod = reader.find(f"/api/v1/namespaces/{namespace}/pods/{name}")
    except Unreachable:
        raise
    except ReadError as err:
        raise ReadError(f"cannot read pod {namespace}/{name}: {err}") from None
    if pod is None:
        raise ReadError(f"pod {namespace}/{name} not found")
    ns = attempt(partial(reader.find, f"/api/v1/namespaces/{namespace}"))
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    in_ns = f"{RESOURCE}/namespaces/{namespace}"
    templates = {
        str(t): attempt(partial(reader.find, f"{in_ns}/resourceclaimtemplates/{t}"))
        for c in spec.get("resourceClaims") or []
        if (t := c.get("resourceClaimTemplateName"))
    }
    claim_names = {
        str(s.get("name")): s.get("resourceClaimName")
        for s in status.get("resourceClaimStatuses") or []
    }
    wanted = {
        str(n)
        for c in spec.get("resourceClaims") or []
        if (n := c.get("resourceClaimName") or claim_names.get(str(c.get("name"))))
    }
    claims = {
        n: attempt(partial(reader.find, f"{in_ns}/resourceclaims/{n}")) for n in sorted(wanted)
    }
    unallocated = any(
        isinstance(c, dict) and not (c.get("status") or {}).get("allocation")
        for c in claims.values()
    )
    events = attempt(
        lambda: reader.items(
            f"/api/v1/namespaces/{namespace}/events",
            fieldSelector=f"involvedObject.kind=Pod,involvedObject.name={name}",
        )
    )
    regs = attempt(lambda: registrations(reader))
    registered = (
        None
        if isinstance(regs, ReadError)
        else any(h.get("name") == MUTATING_WEBHOOK for r in regs for h in r.webhooks)
    )
    return PodFacts(
        pod=pod,
        namespace_labels=ns
        if isinstance(ns, ReadError)
        else ((ns or {}).get("metadata") or {}).get("labels") or {},
        device_classes=attempt(partial(reader.items, f"{RESOURCE}/deviceclasses")),
        templates=templates,
        claim_names=claim_names,
        claims=claims,
        all_claims=attempt(partial(reader.items, f"{RESOURCE}/resourceclaims"))
        if unallocated
        else [],
        slices=attempt(partial(reader.items, f"{RESOURCE}/resourceslices")) if unallocated else [],
        events=events,
        webhook_registered=registered,
    )


def main(args: argparse.Namespace) -> int:
    reader = connect(args.kubeconfig)
    policy, _ = cluster_policy(reader, args.policy)
    sys.stdout.write(render(explain(gather(reader, args.namespace, args.name), policy)))
    return 0

"""A pod's claims, step by step, for `gpu2dra explain`: gpu2dra's templates and the claims
made from them, the in-tree path's extended resource claim, their allocation (device by
device) and a claim refused over quota."""

from __future__ import annotations

from app.core.kube import Obj, dns_label
from app.core.resources import dra_requests
from app.core.templates import TEMPLATE_PREFIX, describe_template, is_managed
from app.diagnose.explain.allocation import allocated_to, analyse_request
from app.diagnose.explain.facts import PodFacts
from app.diagnose.explain.shares import capacity_requests, consumed_capacity
from app.diagnose.explain.step import Step, StepCode, unreadable_step
from app.readers.cel.devices import devices_of
from app.readers.client import ReadError


def extended_steps(
    facts: PodFacts, native: dict[str, tuple[str, ...]], legacy: dict[str, int]
) -> list[Step]:
    """The in-tree path (KEP-5004): the claim the scheduler makes for the pod as it binds it,
    recorded in status.extendedResourceClaimStatus, and its allocation."""
    pod = facts.pod
    namespace = pod["metadata"].get("namespace", "")
    served = "; ".join(f"{r} by DeviceClass {', '.join(c)}" for r, c in native.items())
    name = ((pod.get("status") or {}).get("extendedResourceClaimStatus") or {}).get(
        "resourceClaimName"
    )
    if not name:
        if (pod.get("spec") or {}).get("nodeName"):
            return [Step("info", f"bound without an extended resource claim ({served})")]
        requests = [
            {"name": dns_label(r), "exactly": {"deviceClassName": native[r][0], "count": n}}
            for r, n in legacy.items()
        ]
        wanted: Obj = {"spec": {"devices": {"requests": requests}}}
        return [
            Step(
                "info",
                f"in-tree ({served}): the scheduler makes the pod's extended resource claim "
                "when it binds the pod",
            ),
            *_devices_steps(facts, wanted, f"{namespace}/(extended resource claim)"),
        ]
    claim = facts.claims.get(name)
    label = f"extended resource claim {name}"
    if isinstance(claim, ReadError):
        return [unreadable_step(label, claim)]
    if claim is None:
        return [Step("FAIL", f"{label} not found")]
    allocation = (claim.get("status") or {}).get("allocation")
    if allocation:
        results = (allocation.get("devices") or {}).get("results") or []
        got = ", ".join(f"{r.get('pool')}/{r.get('device')}" for r in results)
        return [Step("PASS", f"{label} (made by the scheduler, {served}) allocated: {got}")]
    return [
        Step("FAIL", f"{label} is not allocated"),
        *_devices_steps(facts, claim, f"{namespace}/{name}"),
    ]


def claim_steps(facts: PodFacts) -> list[Step]:
    """Each of the pod's claims: its template, its ResourceClaim, the claim's allocation, and
    for an unallocated claim each request against the devices."""
    steps: list[Step] = []
    for pod_claim in (facts.pod.get("spec") or {}).get("resourceClaims") or []:
        template = _template_steps(facts, pod_claim)
        steps += template
        if not (template and template[-1].code is StepCode.TEMPLATE_MISSING):
            steps += _claim_steps(facts, pod_claim)
    return steps


def _template_steps(facts: PodFacts, pod_claim: Obj) -> list[Step]:
    """The template a pod claim names, if it names one."""
    label = f"claim {pod_claim.get('name')}"
    template_name = pod_claim.get("resourceClaimTemplateName")
    if not template_name:
        return []
    namespace = facts.pod["metadata"].get("namespace", "")
    template = facts.templates.get(template_name)
    by = "gpu2dra's " if str(template_name).startswith(TEMPLATE_PREFIX) else ""
    if isinstance(template, ReadError):
        return [unreadable_step(f"{label}'s ResourceClaimTemplate", template)]
    if template is None and not facts.claim_names.get(str(pod_claim.get("name"))):
        return [_missing_template(facts, label, by, f"{namespace}/{template_name}")]
    if template is None:
        # Its claim was made before the template went: the pod does not need it.
        return [Step("info", f"{label}: ResourceClaimTemplate {template_name} is gone")]
    return [_template_step(label, by, str(template_name), template)]


def _claim_steps(facts: PodFacts, pod_claim: Obj) -> list[Step]:
    """The ResourceClaim of a pod claim: not made yet (and why), unreadable, allocated, or not
    allocated and why not."""
    label = f"claim {pod_claim.get('name')}"
    namespace = facts.pod["metadata"].get("namespace", "")
    claim_name = pod_claim.get("resourceClaimName") or facts.claim_names.get(
        str(pod_claim.get("name"))
    )
    if not claim_name and (refused := _over_quota(facts, str(pod_claim.get("name")))):
        return [
            Step(
                "FAIL",
                f"{label}: no ResourceClaim: the namespace's ResourceQuota refuses it "
                f"({refused}); the pod waits until the quota has room",
                ("delete other pods' claims in the namespace, or raise the quota",),
                code=StepCode.CLAIM_OVER_QUOTA,
            )
        ]
    if not claim_name:
        return [
            Step(
                "FAIL",
                f"{label}: no ResourceClaim created yet (the resourceclaim controller in "
                "kube-controller-manager creates it from the template)",
            )
        ]
    claim = facts.claims.get(claim_name)
    if isinstance(claim, ReadError):
        return [unreadable_step(f"{label}'s ResourceClaim {claim_name}", claim)]
    if claim is None:
        return [Step("FAIL", f"{label}: ResourceClaim {namespace}/{claim_name} not found")]
    allocation = (claim.get("status") or {}).get("allocation")
    if allocation:
        results = (allocation.get("devices") or {}).get("results") or []
        got = ", ".join(f"{r.get('pool')}/{r.get('device')}" for r in results)
        return [Step("PASS", f"{label}: ResourceClaim {claim_name} allocated: {got}")]
    steps = [Step("FAIL", f"{label}: ResourceClaim {claim_name} is not allocated")]
    steps += _devices_steps(facts, claim, f"{namespace}/{claim_name}")
    constraints = (claim.get("spec") or {}).get("devices", {}).get("constraints")
    if constraints:
        steps.append(Step("info", f"{label}: its constraints ({constraints}) are not checked"))
    return steps


def _missing_template(facts: PodFacts, label: str, by: str, key: str) -> Step:
    """The template went after the pod was admitted (a cleanup script, a GitOps prune,
    `gpu2dra prune-templates`): the resourceclaim controller cannot make the pod's claim."""
    events = facts.events if isinstance(facts.events, list) else []
    said = [
        str(e.get("message") or "")
        for e in events
        if e.get("reason") == "FailedResourceClaimCreation"
        and f"PodResourceClaim {label.removeprefix('claim ')}:" in str(e.get("message") or "")
    ]
    remedy = (
        "delete the pod so that its controller recreates it: gpu2dra makes the template "
        "again for the new pod (and for the next pod of this shape)"
        if by
        else "recreate the template, or the pod with a template that exists"
    )
    evidence = (f"kube-controller-manager: {said[-1]}",) if said else ()
    return Step(
        "FAIL",
        f"{label}: {by}ResourceClaimTemplate {key} is missing: no ResourceClaim can be made "
        "(FailedResourceClaimCreation)",
        (*evidence, remedy),
        code=StepCode.TEMPLATE_MISSING,
    )


def _over_quota(facts: PodFacts, pod_claim: str) -> str | None:
    """`exceeded quota: q, requested: ..., used: ..., limited: ...` from the resourceclaim
    controller's latest event refusing the claim, if any."""
    events = facts.events if isinstance(facts.events, list) else []
    for event in sorted(events, key=lambda e: str(e.get("lastTimestamp") or ""), reverse=True):
        message = str(event.get("message") or "")
        if (
            event.get("reason") == "FailedResourceClaimCreation"
            and f"PodResourceClaim {pod_claim}:" in message
            and "exceeded quota: " in message
        ):
            return message[message.index("exceeded quota: ") :]
    return None


def _template_step(label: str, by: str, name: str, template: Obj) -> Step:
    wants = describe_template(template)
    if by and not is_managed(template):
        return Step(
            "WARN",
            f"{label}: ResourceClaimTemplate {name} ({wants}) has gpu2dra's name but not its "
            "label app.kubernetes.io/managed-by=gpu2dra: gpu2dra did not make it",
        )
    return Step("PASS", f"{label}: {by}ResourceClaimTemplate {name} exists ({wants})")


def _devices_steps(facts: PodFacts, claim: Obj, key: str) -> list[Step]:
    """Each request of an unallocated claim against the devices, when all of them were read."""
    classes, slices, claims = facts.device_classes, facts.slices, facts.all_claims
    if isinstance(classes, ReadError):
        return [unreadable_step("DeviceClasses, so no device is checked", classes)]
    if isinstance(slices, ReadError):
        return [unreadable_step("ResourceSlices, so no device is checked", slices)]
    if isinstance(claims, ReadError):
        return [unreadable_step("all ResourceClaims, so no device is checked", claims)]
    by_name = {c["metadata"]["name"]: c for c in classes}
    owners, devices = allocated_to(claims), devices_of(slices)
    consumed = consumed_capacity(claims, but=key)
    return [
        analyse_request(
            request,
            claim=key,
            classes=by_name,
            devices=devices,
            owners=owners,
            wants=capacity_requests(claim, request.name),
            consumed=consumed,
            refused=_unschedulable(facts.pod),
        )
        for request in dra_requests(claim.get("spec"))
    ]


def _unschedulable(pod: Obj) -> str | None:
    """The scheduler's message when it last found no node for the pod."""
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("reason") == "Unschedulable":
            return str(condition.get("message") or "")
    return None

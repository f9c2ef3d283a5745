"""Legacy GPU requests -> DRA claims: a pure function of the pod spec, the policy and the catalog.

Nothing here does I/O or changes its input: the result shares every subtree it did not touch
with the input and names the subtrees it replaced, so a patch for only those can be derived.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any, NamedTuple

from app.core import capacity, consumable, hostdevices
from app.core.catalog import Catalog
from app.core.claims import Plan, rewritten, whole, write_claims
from app.core.failclosed import (
    DeviceFilter,
    device_filter,
    scheduler_problem,
    watched_annotations,
)
from app.core.initclaims import Legacy
from app.core.intree import defer_reason, native_classes
from app.core.kube import Obj, Path
from app.core.mapping import ResourceMapping
from app.core.nvidia.gfd import (
    NO_SELECTION,
    NodeSelection,
    mig_single,
    select_devices,
    shared_terms,
)
from app.core.outcomes import Code, Finding
from app.core.policy import Policy
from app.core.priority import preempting_class, preemption_warning
from app.core.resources import (
    LegacyRequest,
    asks_extended_resources,
    container_label,
    containers,
    legacy_requests,
    vendor_companions,
)
from app.core.templates import describe_template


class Translation(NamedTuple):
    spec: Obj  # the translated pod spec; `is` the input when nothing changed
    templates: tuple[Obj, ...]
    warnings: tuple[Finding, ...]
    touched: tuple[Path, ...]  # what changed under the spec, for deriving a patch
    in_tree: str | None = None  # why the pod is left to the in-tree extended-resource path
    # (legacy resource, DeviceClass) of each claim it adds: what a GPU quota must also limit
    uses: tuple[tuple[str, str], ...] = ()
    # legacy resources that become consumable capacity (HAMi's nvidia.com/gpumem): no quota
    # counts them on the DRA side
    capacities: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        return bool(self.touched)


def _unchanged(spec: Obj, warnings: list[Finding]) -> Translation:
    return Translation(spec, (), tuple(dict.fromkeys(warnings)), ())


def translate(
    spec: Obj,
    policy: Policy,
    catalog: Catalog,
    annotations: Any = None,
    *,
    yunikorn: str | None = None,
) -> Translation:
    """Rewrite the legacy GPU requests of one pod spec into DRA claims; `annotations` are
    the pod's (its metadata's), of which only those in a watched domain are read; `yunikorn`
    says what in its metadata marks it for YuniKorn (failclosed.yunikorn_mark), if anything.

    In phases, each of which can leave the pod whole: what its containers ask for, what
    else can pick its GPUs, the devices each request becomes, then the claims."""
    if not asks_extended_resources(spec):
        return _unchanged(spec, [])
    warnings: list[Finding] = []
    asked = _asked(spec, policy, warnings)
    if not asked.legacy and not asked.left:
        return _unchanged(spec, warnings)
    # Every reason that leaves the pod is named, not only the first.
    hami = _fail_closed(
        spec, policy, catalog, annotations, warnings, asked=asked, yunikorn=yunikorn
    )
    if hami is None:
        return _unchanged(spec, warnings)
    pod_claims = spec.get("resourceClaims")
    pod_claims = [] if pod_claims is None else pod_claims  # `or []` would take false for []
    if not isinstance(pod_claims, list):
        warnings.append(Finding(Code.POD_CLAIMS_NOT_A_LIST))
        return _unchanged(spec, warnings)
    plan = _plan(spec, asked.legacy, hami=hami, policy=policy, catalog=catalog, warnings=warnings)
    if isinstance(plan, _InTree):
        return _unchanged(spec, warnings)._replace(in_tree=plan.reason)
    if plan is None:
        return _unchanged(spec, warnings)
    return _claimed(spec, plan, pod_claims, warnings)


class _Asked(NamedTuple):
    legacy: Legacy  # the containers with mapped requests, and those requests
    left: bool  # a container cannot be translated, and so neither can its pod


def _asked(spec: Obj, policy: Policy, warnings: list[Finding]) -> _Asked:
    """What each container asks for, and whether one of them leaves the pod."""
    legacy: Legacy = {}
    unmapped: list[tuple[str, str]] = []
    left = False
    for field, index, container in containers(spec):
        found = legacy_requests(field, container, policy, warn=warnings, unmapped=unmapped)
        if found:
            who = container_label(field, container)
            found = consumable.with_memory(who, container, found, unmapped=unmapped, warn=warnings)
        if found is None:
            left = True
        elif not found:
            continue
        elif isinstance(container["resources"].get("claims"), (list, type(None))):  # null: none
            legacy[field, index] = container, found
        else:
            warnings.append(Finding(Code.CLAIMS_NOT_A_LIST, who=container_label(field, container)))
            left = True
    found_all = [lg for _, found in legacy.values() for lg in found]
    if companions := vendor_companions(unmapped, found_all, policy):
        warnings.append(companions)
        left = True
    return _Asked(legacy, left)


def _fail_closed(
    spec: Obj,
    policy: Policy,
    catalog: Catalog,
    annotations: Any,
    warnings: list[Finding],
    *,
    asked: _Asked,
    yunikorn: str | None,
) -> DeviceFilter | None:
    """What else can pick the pod's GPUs: its scheduler (YuniKorn's, where it marks the
    pod), the annotations a GPU scheduler reads, its priority's preemption. The device
    selectors HAMi's annotations become, or None when the pod is left (already, when
    `asked.left`: by a container)."""
    found = len(warnings)
    if scheduler := scheduler_problem(spec, policy, yunikorn):
        warnings.append(scheduler)
    hami = device_filter(watched_annotations(annotations, policy))
    warnings.extend(hami.problems)
    if asked.left or len(warnings) > found:
        return None
    if (preempting := preempting_class(spec)) is not None:
        if policy.preempting_pods == "translate":
            warnings.append(preemption_warning(preempting, True))
            return hami
        resources = {lg.resource for _, lgs in asked.legacy.values() for lg in lgs}
        served = native_classes(resources, catalog)
        whole = len(served) == len(resources)
        warnings.append(preemption_warning(preempting, False, served if whole else None))
        return None
    return hami


class _InTree(NamedTuple):
    """The in-tree extended-resource path serves the pod as well: it is left to it."""

    reason: str


def _plan(
    spec: Obj,
    legacy: Legacy,
    *,
    hami: DeviceFilter,
    policy: Policy,
    catalog: Catalog,
    warnings: list[Finding],
) -> Plan | _InTree | None:
    """What the requests become: MIG slices on MIG single-strategy nodes, sharing, GFD node
    terms as device selectors. None when the pod is left; _InTree when the in-tree
    extended-resource path serves it as well."""
    asked = _on_mig_single(spec, legacy, policy, warnings)
    if asked is None:
        return None
    legacy, used = asked.legacy, asked.used
    shared = _shared(spec, used, hami=hami, catalog=catalog, warnings=warnings)
    if shared is None:
        return None
    selection = _selection(spec, asked, policy, warnings)
    if selection is None:
        return None
    if not used:
        return Plan(legacy, used, selection=NO_SELECTION, hami=hami.selectors, shared=False)
    found = [(field, c, lgs) for (field, _), (c, lgs) in legacy.items()]
    # What the in-tree path cannot give: device selectors from GFD node terms, a MIG slice
    # for a single-strategy nvidia.com/gpu, the driver's sharing config, and the selectors
    # of HAMi's annotations (it reads no annotation).
    adds = any(selection.selectors.values()) or asked.mig_single or bool(shared)
    adds = adds or bool(hami.selectors) or any(lg.shared or lg.memory for lg in used)
    if native := defer_reason(found, adds, catalog):
        return _InTree(native)
    if not _has_room(spec, used, policy=policy, catalog=catalog, warnings=warnings):
        return None
    return Plan(legacy, used, selection=selection, hami=hami.selectors, shared=bool(shared))


class _Requests(NamedTuple):
    legacy: Legacy  # as asked, or as MIG requests on a MIG single-strategy node
    used: list[LegacyRequest]  # the requests for one device or more
    mig_single: bool  # the pod's node terms pick MIG single-strategy nodes


def _on_mig_single(
    spec: Obj, legacy: Legacy, policy: Policy, warnings: list[Finding]
) -> _Requests | None:
    """The requests, whole GPUs as MIG devices where the pod's node terms pick MIG
    single-strategy nodes; None when the pod is left (a profile that cannot be told, or no
    mapping for it)."""
    used = [lg for _, found in legacy.values() for lg in found if lg.devices]
    single = mig_single(spec) if any(whole(lg) for lg in used) else None
    if single is None:
        return _Requests(legacy, used, mig_single=False)
    if single.problem is not None or single.profile is None:
        warnings.append(Finding(Code.MIG_SINGLE, problem=single.problem))
        return None
    if policy.mig_single is None:
        warnings.append(Finding(Code.NO_MIG_SINGLE_MAPPING))
        return None
    legacy = _as_mig(legacy, policy.mig_single, single.profile)
    used = [lg for _, found in legacy.values() for lg in found if lg.devices]
    return _Requests(legacy, used, mig_single=True)


def _shared(
    spec: Obj,
    used: list[LegacyRequest],
    *,
    hami: DeviceFilter,
    catalog: Catalog,
    warnings: list[Finding],
) -> list[str] | None:
    """The pod's node terms that pick GPUs the device plugin shares, once its requests can
    become claims here: HAMi's selectors only on whole GPUs, shared GPUs only for mappings
    that keep them shared, consumable capacity its drivers publish, every DeviceClass there.
    None when the pod is left."""
    if hami.selectors and (others := sorted({lg.resource for lg in used if not whole(lg)})):
        warnings.append(Finding(Code.HAMI_NOT_WHOLE, resources=", ".join(others)))
        return None
    shared = shared_terms(spec) if used else []
    keeps = [lg for lg in used if lg.mapping.sharing or lg.mapping.takes_shares]
    if refused := sorted({lg.resource for lg in used if shared and lg not in keeps}):
        labels, resources = ", ".join(shared), ", ".join(refused)
        warnings.append(Finding(Code.SHARED_NODES, labels=labels, resources=resources))
        return None
    if cannot := consumable.problems(used, bool(shared), catalog):
        warnings.extend(cannot)
        return None
    if missing := sorted({lg.mapping.device_class for lg in used} - catalog.classes.keys()):
        warnings.append(Finding(Code.NO_DEVICE_CLASS, classes=", ".join(missing)))
        return None
    return shared


def _selection(
    spec: Obj, asked: _Requests, policy: Policy, warnings: list[Finding]
) -> NodeSelection | None:
    """The pod's GFD node terms as device selectors; None when a term is invalid, or names a
    watched label that cannot be translated (the pod is left)."""
    # Node terms are read for every pod with a mapped request: one that asks only for zero
    # devices keeps its node terms as they are, but a label it cannot translate leaves it too.
    asking = asked.used or [lg for _, found in asked.legacy.values() for lg in found]
    selection = select_devices(
        spec,
        sorted({lg.mapping.node_labels for lg in asking}),
        keep_node_terms=policy.keep_node_selectors,
        watched=policy.watches,
        slice_memory=asked.mig_single,
    )
    if selection.invalid:
        warnings.append(Finding(Code.INVALID_NODE_TERM, problem=selection.invalid[0]))
        return None
    if terms := selection.untranslated:
        they = "it" if len(terms) == 1 else "they"
        warnings.append(Finding(Code.NODE_LABEL, terms="; ".join(terms), they=they))
        return None
    return selection


def _has_room(
    spec: Obj,
    used: list[LegacyRequest],
    *,
    policy: Policy,
    catalog: Catalog,
    warnings: list[Finding],
) -> bool:
    """Whether the claims can be served: a device of their classes is published or an
    autoscaler can add one, and no node term pins the pod to a cloud pool gpu2dra cannot
    see publish devices; what is unknown is assumed to run (capacity.py). Both are named."""
    classes = {lg.mapping.device_class for lg in used}
    said = [
        capacity.unserved(classes, catalog, policy.no_dra_capacity),
        capacity.pinned(spec, catalog, policy.cloud_pools),
    ]
    found = [f for f in said if f is not None]
    warnings.extend(found)
    return all(f.code.kind != "left" for f in found)


def _claimed(spec: Obj, plan: Plan, pod_claims: list[Any], warnings: list[Finding]) -> Translation:
    """The pod spec with a claim per request (an init container reusing its app containers'
    where they cover it) and the templates the claims are made from."""
    shared = [lg for lg in plan.used if (plan.shared or lg.shared) and lg.mapping.sharing]
    if sharing := sorted({lg.mapping.sharing for lg in shared}):
        warnings.append(_sharing_note(sharing))
    if note := consumable.note(plan.used, plan.shared):
        warnings.append(note)
    warnings.extend(hostdevices.host_gpu_mounts(spec))
    warnings.extend(hostdevices.unaligned(spec))
    claims = write_claims(spec, plan, pod_claims, warnings)
    new_spec, touched = rewritten(spec, plan, pod_claims, claims)
    templates = {c.template_name: c.template for c in claims.made}
    return Translation(
        new_spec,
        tuple(templates.values()),
        tuple(dict.fromkeys(warnings)),
        tuple(touched),
        uses=tuple(sorted({(c.resource, c.device_class) for c in claims.made})),
        capacities=consumable.capacities(plan.used),
    )


def _as_mig(legacy: Legacy, mapping: ResourceMapping, profile: str) -> Legacy:
    """Whole-GPU requests as requests of the MIG mapping: on a MIG single-strategy node the
    device plugin's nvidia.com/gpu is one MIG device of `profile` (its `.shared` replicas,
    shared MIG devices: without a sharing of its own, the MIG mapping takes theirs)."""
    selectors = tuple(s.replace("{profile}", profile) for s in mapping.selectors)
    return {
        where: (
            container,
            [
                lg._replace(
                    mapping=replace(mapping, sharing=mapping.sharing or lg.mapping.sharing),
                    selectors=selectors,
                )
                if lg.mapping.node_labels == "gpu"
                else lg
                for lg in found
            ],
        )
        for where, (container, found) in legacy.items()
    }


_GATES = {"TimeSlicing": "TimeSlicingSettings", "MPS": "MPSSupport"}


def _sharing_note(sharings: list[str]) -> Finding:
    """What changes for a pod that shared GPUs with other pods under the device plugin."""
    strategies = sorted({json.loads(s)["strategy"] for s in sharings})
    gates = ", ".join(_GATES[s] for s in strategies)
    return Finding(Code.SHARING_NARROWED, strategies=" and ".join(strategies), gates=gates)


def describe(spec: Obj, translation: Translation) -> str:
    """One line saying what the translation does, for audit warnings and annotations."""
    before = len(spec.get("resourceClaims") or [])
    claims = translation.spec.get("resourceClaims", [])[before:]
    templates = {t["metadata"]["name"]: t for t in translation.templates}
    parts = [
        f"claim {claim['name']}: {describe_template(templates[name])} (template {name})"
        for claim in claims
        if (name := claim["resourceClaimTemplateName"]) in templates
    ]
    removed = [p[0] for p in translation.touched if p[0] in ("nodeSelector", "affinity")]
    text = "move GPU requests to DRA: " + "; ".join(parts) if parts else "drop zero GPU requests"
    if removed:
        text += f"; move GFD node terms in {', '.join(map(str, removed))} into device selectors"
    return text

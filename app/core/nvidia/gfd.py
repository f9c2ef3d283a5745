"""GPU Feature Discovery node labels, turned into CEL selectors on DRA device attributes.

GFD labels a node with facts about its GPUs; a DRA request can ask for the same facts of each
device. A pod that picked its nodes by GFD label picks its devices by CEL instead, so it no
longer depends on nodes carrying GFD labels (DRA nodes often do not run GFD).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

from app.core.kube import Obj
from app.core.mapping import NodeLabels
from app.core.nvidia.gfd_cel import (
    MIG_INFIX,
    PRODUCT,
    REPLICAS,
    SHARED_SUFFIX,
    SHARING_STRATEGY,
    requirement_cel,
)
from app.core.nvidia.mig import mig_profile

_GFD_PREFIXES = ("nvidia.com/gpu.", "nvidia.com/mig.", "nvidia.com/mig-", "nvidia.com/cuda.")
_ALL_KINDS: tuple[NodeLabels, ...] = ("gpu", "mig")


def is_gfd_label(key: str) -> bool:
    return key.startswith(_GFD_PREFIXES)


_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")


def is_label_value(value: str) -> bool:
    return len(value) <= 63 and _LABEL_VALUE.fullmatch(value) is not None


Requirement = tuple[str, str, list[str]]  # key, operator, values


class NodeSelection(NamedTuple):
    """What the pod's GFD node terms ask of devices, and the node terms left afterwards."""

    selectors: dict[NodeLabels, tuple[str, ...]]
    spec_changes: dict[str, Any]  # spec field -> new value, or REMOVE
    # Node terms on watched labels (a GPU vendor's domain) that no device selector says:
    # they can pick the pod's GPUs, so the pod is left as it is.
    untranslated: tuple[str, ...] = ()
    # GFD node terms the apiserver rejects: moving them into device selectors would turn a
    # pod it rejects into one it admits, so the pod is better left as it is
    invalid: tuple[str, ...] = ()


REMOVE: Any = object()  # a spec_changes value: delete the field
NO_SELECTION = NodeSelection({}, {})


class RequiredAffinity(NamedTuple):
    """A pod's required node affinity: the nodeAffinity map, its required map and its terms."""

    node_affinity: Obj
    required: Obj
    terms: list[Any]


def required_affinity(affinity: Any) -> RequiredAffinity | None:
    """affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution and its
    nodeSelectorTerms (a list); None when the pod has no such terms."""
    node_affinity = affinity.get("nodeAffinity") if isinstance(affinity, dict) else None
    if not isinstance(node_affinity, dict):
        return None
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    terms = required.get("nodeSelectorTerms") if isinstance(required, dict) else None
    if not isinstance(required, dict) or not isinstance(terms, list):
        return None
    return RequiredAffinity(node_affinity, required, terms)


def _requirements_of_term(term: Obj) -> list[Requirement] | None:
    exprs = term.get("matchExpressions") or []
    if not isinstance(exprs, list):
        return None
    reqs: list[Requirement] = []
    for e in exprs:
        if not isinstance(e, dict) or not isinstance(e.get("key"), str):
            return None
        values = e.get("values") or []
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            return None
        reqs.append((e["key"], str(e.get("operator")), values))
    return reqs


def _term(req: Requirement) -> str:
    key, op, values = req
    return f"{key} ({op} {','.join(values)})" if values else f"{key} ({op})"


def select_devices(
    spec: Obj,
    kinds: Sequence[NodeLabels],
    *,
    keep_node_terms: bool,
    watched: Callable[[str], bool],
    slice_memory: bool = False,
) -> NodeSelection:
    """Translate GFD terms of `spec` for requests of `kinds`; a term is dropped from the node
    side only when every kind could express it (a MIG device has no whole-GPU memory, but on
    a MIG single-strategy node, `slice_memory`, gpu.memory is the MIG device's). A term on a
    `watched` label that is not translated is named in `untranslated`."""
    found = _Terms(kinds, watched, slice_memory)
    changes: dict[str, Any] = {}
    node_selector = spec.get("nodeSelector")
    if isinstance(node_selector, dict) and any(
        is_gfd_label(k) or watched(k) for k in node_selector
    ):
        kept = {k: v for k, v in node_selector.items() if not found.settle_entry(k, v)}
        if len(kept) != len(node_selector) and not keep_node_terms:
            changes["nodeSelector"] = kept or REMOVE

    affinity = _translate_affinity(spec.get("affinity"), found.settle, watched, found.untranslated)
    if affinity is not None and not keep_node_terms:
        changes["affinity"] = affinity
    return NodeSelection(
        selectors={k: tuple(v) for k, v in found.selectors.items()},
        spec_changes=changes,
        untranslated=tuple(found.untranslated),
        invalid=tuple(found.invalid),
    )


class _Terms:
    """What select_devices gathers from a pod's node terms, one requirement at a time: the
    device selectors of each kind, the watched terms it could not translate, the invalid."""

    def __init__(
        self, kinds: Sequence[NodeLabels], watched: Callable[[str], bool], slice_memory: bool
    ) -> None:
        self.kinds, self.watched, self.slice_memory = kinds, watched, slice_memory
        self.selectors: dict[NodeLabels, list[str]] = {k: [] for k in _ALL_KINDS}
        self.untranslated: list[str] = []
        self.invalid: list[str] = []

    def take(self, req: Requirement) -> bool:
        """Whether every kind could express the requirement; if so, its selectors are kept."""
        key, op, values = req
        if bad := [v for v in values if not is_label_value(v)]:
            self.invalid.append(f"node label {key}: {bad[0]!r} is not a valid label value")
            return False
        if op in ("Exists", "DoesNotExist") and values:
            self.invalid.append(f"node label {key}: operator {op} takes no values")
            return False
        memory = self.slice_memory
        cels = {k: requirement_cel(key, op, values, k, slice_memory=memory) for k in self.kinds}
        if any(c is None for c in cels.values()):
            return False
        for k, cel in cels.items():
            if cel:
                self.selectors[k].append(cel)
        return True

    def settle(self, req: Requirement) -> bool:
        """Whether the requirement became device selectors; if not, and its label is
        watched, it is named."""
        if is_gfd_label(req[0]) and self.take(req):
            return True
        if self.watched(req[0]):
            self.untranslated.append(_term(req))
        return False

    def settle_entry(self, key: str, value: Any) -> bool:
        """settle() for a nodeSelector entry."""
        if isinstance(value, str):
            return self.settle((key, "In", [value]))
        if self.watched(key):
            self.untranslated.append(f"{key} (a value that is not a string)")
        return False


def _translate_affinity(
    affinity: Any,
    settle: Callable[[Requirement], bool],
    watched: Callable[[str], bool],
    untranslated: list[str],
) -> Any:
    """The new affinity (or REMOVE) after taking GFD terms, None when nothing was taken."""
    found = required_affinity(affinity)
    if found is None or not found.terms:
        return None
    node_affinity, required, terms = found
    parsed = [_requirements_of_term(t) if isinstance(t, dict) else None for t in terms]
    if not any(r and any(is_gfd_label(q[0]) or watched(q[0]) for q in r) for r in parsed):
        return None
    if len(terms) != 1 or parsed[0] is None:
        # Terms are ORed: one device selector cannot say "this product on those nodes, or
        # that product on these".
        untranslated.extend(
            f"{_term(q)} in one of {len(terms)} ORed node affinity terms"
            for r in parsed
            for q in r or ()
            if watched(q[0])
        )
        return None
    term, reqs = terms[0], parsed[0]
    keep = [
        e for e, r in zip(term.get("matchExpressions") or [], reqs, strict=True) if not settle(r)
    ]
    if len(keep) == len(reqs):
        return None
    new_term = (
        {**term, "matchExpressions": keep}
        if keep
        else {k: v for k, v in term.items() if k != "matchExpressions"}
    )
    if new_term.get("matchExpressions") or new_term.get("matchFields"):
        new_required: Any = {**required, "nodeSelectorTerms": [new_term]}
    else:
        new_required = REMOVE  # an empty term list is invalid; no term means no constraint
    new_node_affinity = _with(
        node_affinity, "requiredDuringSchedulingIgnoredDuringExecution", new_required
    )
    new_affinity = _with(affinity, "nodeAffinity", new_node_affinity or REMOVE)
    return new_affinity or REMOVE


def _with(obj: Obj, key: str, value: Any) -> Obj:
    """A shallow copy of `obj` with `key` set to `value`, or removed when value is REMOVE."""
    out = {k: v for k, v in obj.items() if k != key}
    if value is not REMOVE:
        out[key] = value
    return out


# ---- what the node terms say about the GPUs, before any is translated -----------------------


def _positive_requirements(spec: Obj) -> Iterator[Requirement]:
    """The nodeSelector (as `In`) and every requirement of every required affinity term."""
    node_selector = spec.get("nodeSelector")
    if isinstance(node_selector, dict):
        for key, value in node_selector.items():
            if isinstance(key, str) and isinstance(value, str):
                yield key, "In", [value]
    found = required_affinity(spec.get("affinity"))
    for term in found.terms if found is not None else ():
        reqs = _requirements_of_term(term) if isinstance(term, dict) else None
        yield from reqs or ()


node_requirements = _positive_requirements  # for the node terms capacity.py reads


def _count(value: str) -> int:
    """A replica count label value; -1 if it is none (`²` is a digit to str.isdigit)."""
    return int(value) if value.isascii() and value.isdigit() and len(value) <= 12 else -1


def shared_terms(spec: Obj) -> list[str]:
    """The pod's node terms that pick GPUs the device plugin shares (time-slicing or MPS
    replicas): a `-SHARED` product, a sharing strategy, more than one replica."""
    found = []
    for key, op, values in _positive_requirements(spec):
        if key == PRODUCT:
            shares = op == "In" and any(v.endswith(SHARED_SUFFIX) for v in values)
        elif key == SHARING_STRATEGY:
            shares = op == "In" and bool({"time-slicing", "mps"} & set(values))
        elif key == REPLICAS:
            shares = (
                op == "Exists"
                or (op == "In" and any(_count(v) > 1 for v in values))
                or (op == "Gt" and bool(values) and _count(values[0]) >= 0)
            )
        else:
            shares = False
        if shares:
            found.append(f"{key} ({op} {','.join(values)})" if values else f"{key} ({op})")
    return found


class MigSingle(NamedTuple):
    """A pod that picks MIG single-strategy nodes: their `nvidia.com/gpu` is a MIG device."""

    profile: str | None  # as the DRA driver spells it; None when it cannot be told
    problem: str | None = None  # why the pod cannot be translated, None when it can


def mig_single(spec: Obj) -> MigSingle | None:
    """What the GFD product terms say about MIG single strategy; None when nothing.

    GFD labels such a node `<model>-MIG-<profile>` with the profile spelled as the device
    plugin spells it (`+` written as `.`, so `1g.10gb+me` is `1g.10gb.me`), and
    `<model>-MIG-INVALID` when the node's MIG layout does not suit the single strategy."""
    values = [
        v
        for key, op, vs in _positive_requirements(spec)
        if key == PRODUCT and op == "In"
        for v in vs
    ]
    migs = [v.removesuffix(SHARED_SUFFIX) for v in values if MIG_INFIX in v]
    if not migs:
        return None
    spelled = {v.split(MIG_INFIX, 1)[1] for v in migs}
    if "INVALID" in spelled:
        return MigSingle(None, "selects MIG single-strategy nodes GFD labels -MIG-INVALID")
    profiles = {mig_profile(s) for s in spelled}
    if None in profiles:
        bad = sorted(s for s in spelled if mig_profile(s) is None)
        names = ", ".join(bad)
        return MigSingle(None, f"selects MIG profile {names}, which the DRA driver does not name")
    if len(profiles) > 1:
        return MigSingle(None, f"selects several MIG profiles ({', '.join(sorted(spelled))})")
    if len(migs) != len(values):
        return MigSingle(None, "selects whole GPUs and MIG single-strategy nodes at once")
    return MigSingle(profiles.pop())

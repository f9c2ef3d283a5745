"""GPU Feature Discovery node labels, turned into CEL selectors on DRA device attributes.

GFD labels a node with facts about its GPUs; a DRA request can ask for the same facts of each
device. A pod that picked its nodes by GFD label picks its devices by CEL instead, so it no
longer depends on nodes carrying GFD labels (DRA nodes often do not run GFD).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any, NamedTuple

from app.core.kube import Obj
from app.core.policy import NodeLabels

PRODUCT = "nvidia.com/gpu.product"
FAMILY = "nvidia.com/gpu.family"
MEMORY = "nvidia.com/gpu.memory"
_GFD_PREFIXES = ("nvidia.com/gpu.", "nvidia.com/mig.", "nvidia.com/mig-", "nvidia.com/cuda.")

_ATTR = "device.attributes['gpu.nvidia.com']"
_MEMORY = "device.capacity['gpu.nvidia.com'].memory"
# GFD derives gpu.family from the compute capability; the DRA driver's `architecture` names the
# same generations, capitalised and with spaces ("Ada Lovelace" <-> "ada-lovelace").
_FAMILIES = frozenset(
    {
        "kepler",
        "maxwell",
        "pascal",
        "volta",
        "turing",
        "ampere",
        "ada-lovelace",
        "hopper",
        "blackwell",
        "rubin",
    }
)
_ALL_KINDS: tuple[NodeLabels, ...] = ("gpu", "mig")


def is_gfd_label(key: str) -> bool:
    return key.startswith(_GFD_PREFIXES)


_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")


def is_label_value(value: str) -> bool:
    return len(value) <= 63 and _LABEL_VALUE.fullmatch(value) is not None


def _quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _one_of(expr: str, values: Sequence[str]) -> str:
    if len(values) == 1:
        return f"{expr} == {_quote(values[0])}"
    return f"{expr} in [{', '.join(_quote(v) for v in values)}]"


def _product(value: str) -> str:
    # GFD appends -MIG-<profile> (MIG single strategy) or -SHARED (sharing replicas) to the
    # product; the device's productName has neither.
    return value.split("-MIG-", 1)[0].removesuffix("-SHARED")


# GFD sanitises the NVML name: it drops characters outside [A-Za-z0-9-_. ] and joins words
# with dashes; productName keeps the spaces. Replacing spaces maps every real NVIDIA name.
_PRODUCT_EXPR = f"{_ATTR}.productName.replace(' ', '-')"
_FAMILY_EXPR = f"{_ATTR}.architecture.lowerAscii().replace(' ', '-')"


def _memory_range(mib: int) -> str:
    # GFD's gpu.memory is the total in MiB rounded down, so N means N Mi <= memory < N+1 Mi.
    return (
        f"({_MEMORY}.compareTo(quantity('{mib}Mi')) >= 0 && "
        f"{_MEMORY}.compareTo(quantity('{mib + 1}Mi')) < 0)"
    )


def _ints(values: Sequence[str]) -> list[int] | None:
    if values and all(v.isascii() and v.isdigit() and len(v) <= 12 for v in values):
        return [int(v) for v in values]
    return None


Requirement = tuple[str, str, list[str]]  # key, operator, values
# One CEL expression, "" when the requirement holds for every device, None when untranslatable.
Cel = str | None


def requirement_cel(req: Requirement, kind: NodeLabels) -> Cel:
    """The CEL selector that asks of a device what `req` asks of its node, for `kind` devices."""
    key, op, values = req
    # Pods of one workload repeat the same few node terms: each is turned into CEL once
    # (long value lists are not kept, so the cache stays small).
    convert = _cached_cel if len(values) <= 16 else _cel
    return convert(key, op, tuple(values), kind)


def _cel(key: str, op: str, values: tuple[str, ...], kind: NodeLabels) -> Cel:
    if kind == "none":
        return None
    if op == "Exists" and key in (PRODUCT, FAMILY, MEMORY):
        return ""  # every GPU node has these labels; the device request already implies it
    if op not in ("In", "NotIn") or not values:
        return None
    if key == PRODUCT:
        cel = _one_of(_PRODUCT_EXPR, sorted({_product(v) for v in values}))
    elif key == FAMILY and all(v in _FAMILIES for v in values):
        cel = _one_of(_FAMILY_EXPR, values)
    elif key == MEMORY and kind == "gpu" and (mibs := _ints(values)) is not None:
        cel = " || ".join(_memory_range(m) for m in mibs)
        cel = f"({cel})" if len(mibs) > 1 else cel
    else:
        return None
    return f"!({cel})" if op == "NotIn" else cel


_cached_cel = lru_cache(maxsize=1024)(_cel)


class NodeSelection(NamedTuple):
    """What the pod's GFD node terms ask of devices, and the node terms left afterwards."""

    selectors: dict[NodeLabels, tuple[str, ...]]
    spec_changes: dict[str, Any]  # spec field -> new value, or REMOVE
    warnings: tuple[str, ...]
    # GFD node terms the apiserver rejects: moving them into device selectors would turn a
    # pod it rejects into one it admits, so the pod is better left as it is
    invalid: tuple[str, ...] = ()


REMOVE: Any = object()  # a spec_changes value: delete the field
NO_SELECTION = NodeSelection({}, {}, ())


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


def select_devices(spec: Obj, kinds: Sequence[NodeLabels], keep_node_terms: bool) -> NodeSelection:
    """Translate GFD terms of `spec` for requests of `kinds`; a term is dropped from the node
    side only when every kind could express it (a MIG device has no whole-GPU memory)."""
    selectors: dict[NodeLabels, list[str]] = {k: [] for k in _ALL_KINDS}
    warnings: list[str] = []
    invalid: list[str] = []
    changes: dict[str, Any] = {}

    def take(req: Requirement) -> bool:
        key, op, values = req
        if bad := [v for v in values if not is_label_value(v)]:
            invalid.append(f"node label {key}: {bad[0]!r} is not a valid label value")
            return False
        if op in ("Exists", "DoesNotExist") and values:
            invalid.append(f"node label {key}: operator {op} takes no values")
            return False
        cels = {k: requirement_cel(req, k) for k in kinds}
        if any(c is None for c in cels.values()):
            if is_gfd_label(req[0]):
                warnings.append(
                    f"node label {req[0]} ({req[1]} {','.join(req[2])}) has no exact device "
                    "attribute and stays a node term: DRA nodes need not carry GFD labels"
                )
            return False
        for k, cel in cels.items():
            if cel:
                selectors[k].append(cel)
        return True

    node_selector = spec.get("nodeSelector")
    if isinstance(node_selector, dict) and any(is_gfd_label(k) for k in node_selector):
        kept = {
            k: v
            for k, v in node_selector.items()
            if not (is_gfd_label(k) and isinstance(v, str) and take((k, "In", [v])))
        }
        if len(kept) != len(node_selector) and not keep_node_terms:
            changes["nodeSelector"] = kept or REMOVE

    affinity = _translate_affinity(spec.get("affinity"), take, warnings)
    if affinity is not None and not keep_node_terms:
        changes["affinity"] = affinity
    return NodeSelection(
        selectors={k: tuple(v) for k, v in selectors.items()},
        spec_changes=changes,
        warnings=tuple(warnings),
        invalid=tuple(invalid),
    )


def _translate_affinity(
    affinity: Any, take: Callable[[Requirement], bool], warnings: list[str]
) -> Any:
    """The new affinity (or REMOVE) after taking GFD terms, None when nothing was taken."""
    if not isinstance(affinity, dict):
        return None
    node_affinity = affinity.get("nodeAffinity")
    if not isinstance(node_affinity, dict):
        return None
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if not isinstance(required, dict):
        return None
    terms = required.get("nodeSelectorTerms")
    if not isinstance(terms, list) or not terms:
        return None
    parsed = [_requirements_of_term(t) if isinstance(t, dict) else None for t in terms]
    if not any(r and any(is_gfd_label(q[0]) for q in r) for r in parsed):
        return None
    if len(terms) != 1 or parsed[0] is None:
        # Terms are ORed: one device selector cannot say "this product on those nodes, or
        # that product on these".
        warnings.append(
            "required node affinity with several terms on GFD labels is not translated; "
            "it stays a node term"
        )
        return None
    term, reqs = terms[0], parsed[0]
    keep = [
        e
        for e, r in zip(term.get("matchExpressions") or [], reqs, strict=True)
        if not (is_gfd_label(r[0]) and take(r))
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

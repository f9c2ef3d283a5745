"""The report, a pure function of what was read: a row per workload that asks for legacy GPU
resources (what its pods ask for, the templates translation would create, every warning it
would give, what serves it), grouped by namespace, and the rollout order."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field, replace

from app.core.catalog import Catalog
from app.core.kube import Obj
from app.core.outcomes import Code, codes
from app.core.policy import Policy
from app.core.priority import preempting_class
from app.core.resources import legacy_devices
from app.core.scope import NEVER_CHANGED, namespace_mode, never_changed
from app.core.templates import describe_template
from app.manifests.documents import translate_documents
from app.manifests.podspecs import TooDeep, pod_specs
from app.manifests.workloads import group_kind

# What translating a workload's manifest notes that is no warning for a live workload: the
# in-tree path serving it, and a kind no rule knows (admission translates its pods anyway).
NOT_WARNINGS = frozenset((Code.IN_TREE, Code.NO_RULE))
# What keeps a workload's translated pods from a node (app/core/capacity.py), as the NODE
# column says it.
_NO_NODE = {
    Code.NO_DRA_DEVICES: "no DRA device",
    Code.NO_DRA_DEVICES_TRANSLATED: "no DRA device",
    Code.CLOUD_POOL: "cloud pool",
    Code.CLOUD_POOL_TRANSLATED: "cloud pool",
}


@dataclass(frozen=True, slots=True)
class Workload:
    namespace: str
    kind: str
    name: str
    replicas: int | None
    gpus: dict[str, int]  # legacy resource -> devices one pod (or each pod template) needs
    templates: list[str]  # "name: N x class where ..."
    warnings: list[str]
    codes: list[str]  # the outcome code of each warning (docs/reference/outcomes.md), once
    seen_through: str = ""  # a pod, when the owner itself could not be read
    # What serves its pods: "gpu2dra", "in-tree" (a DeviceClass names every resource it asks
    # for in extendedResourceName, and gpu2dra leaves it), or "device plugin": only the last
    # is left to migrate.
    path: str = "device plugin"
    translates: bool = False  # gpu2dra translates its pods where enabled
    # The priority class of its pods when it can preempt: under DRA it could not, so gpu2dra
    # leaves such pods on the device plugin unless the policy says preemptingPods: translate.
    preempts: str = ""
    # Left only because no driver publishes the shared devices it would take: it moves once
    # the cluster shares (consumable capacity; `doctor`'s sharing check says what to set).
    once_shared: bool = False
    # Why its translated pods may find no node: "no DRA device" (no ResourceSlice publishes
    # one its claims could take, and no node autoscaler can add one) or "cloud pool" (pinned
    # to a cloud GPU pool); "" when nothing says so.
    node: str = ""


@dataclass(frozen=True, slots=True)
class Namespace:
    name: str
    mode: str
    workloads: list[Workload] = field(default_factory=list)

    @property
    def warnings(self) -> int:
        return sum(len(w.warnings) for w in self.workloads)


@dataclass(frozen=True, slots=True)
class Report:
    namespaces: list[Namespace]
    rollout: list[str]  # namespaces not enabled yet, the ones that translate cleanly first
    unreadable: list[str]  # what could not be read, and why
    converting: list[str] = field(default_factory=list)  # nodes `nodes convert` left mid-way


def _replicas(obj: Obj) -> int | None:
    spec = obj.get("spec") or {}
    for key in ("replicas", "parallelism"):
        if isinstance(spec.get(key), int):
            return int(spec[key])
    return None


def report_row(
    obj: Obj, *, namespace: str, policy: Policy, catalog: Catalog, kind: str, name: str
) -> Workload | None:
    """The report row of one object, None when it asks for no legacy GPU resource."""
    gpus: Counter[str] = Counter()
    try:
        specs = pod_specs(obj.get("spec"))
    except TooDeep:
        return None  # no API server stores such an object; nothing to report
    preempts = ""
    for spec in specs:
        gpus.update(legacy_devices(spec, policy))
        preempts = preempts or preempting_class(spec) or ""
    if not +gpus:
        return None
    # What its pods get at admission: a kind no rule knows, left whole offline, is read as
    # the policy's translateKinds would have it translated.
    as_pods = replace(policy, translate_kinds=policy.translate_kinds | {group_kind(obj)})
    result = translate_documents([obj], as_pods, catalog, namespace=namespace, mode="enabled")
    found = [n.text for n in result.notes if n.text.code not in NOT_WARNINGS]
    native = all(catalog.serving_extended_resource(r) for r in gpus)
    once_shared = False
    if Code.NOT_SHARING in codes(found):
        everywhere = replace(catalog, sharing=None)  # as if every driver shared every capacity
        once_shared = bool(
            translate_documents(
                [obj], as_pods, everywhere, namespace=namespace, mode="enabled"
            ).templates
        )
    return Workload(
        namespace=namespace,
        kind=kind,
        name=name,
        replicas=_replicas(obj),
        gpus=dict(sorted(gpus.items())),
        templates=[f"{name}: {describe_template(t)}" for (_, name), t in result.templates.items()],
        warnings=list(dict.fromkeys(found)),
        codes=list(codes(found)),
        path="in-tree" if native else "device plugin",
        translates=bool(result.templates),
        preempts=preempts,
        once_shared=once_shared,
        node=", ".join(dict.fromkeys(_NO_NODE[c] for c in codes(found) if c in _NO_NODE)),
    )


def _controller(obj: Obj) -> Obj | None:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return dict(ref)
    return None


def build(
    namespaces: list[Obj] | None,
    objects: list[tuple[str, Obj]],
    policy: Policy,
    catalog: Catalog,
    *,
    unreadable: list[str] | None = None,
) -> Report:
    """`objects`: (kind, object) of every kind listed, owners before what they own.
    `namespaces` None: they could not be read, so their modes are unknown."""
    uids = {str(o["metadata"].get("uid")) for _, o in objects}
    rows: dict[str, list[Workload]] = {}
    seen_owners: set[str] = set()
    for kind, obj in objects:
        # Listed items carry no kind: the manifest rules, which know kinds, need it.
        obj = obj if "kind" in obj else {"kind": kind, **obj}
        meta = obj["metadata"]
        owner = _controller(obj)
        shown_kind, shown_name, through = kind, str(meta.get("name")), ""
        if owner is not None:
            if str(owner.get("uid")) in uids or str(owner.get("uid")) in seen_owners:
                continue  # reported through its owner
            seen_owners.add(str(owner.get("uid")))
            shown_kind, shown_name = str(owner.get("kind")), str(owner.get("name"))
            through = f"{kind} {meta.get('name')}"
        ns = str(meta.get("namespace", ""))
        row = report_row(
            obj, namespace=ns, policy=policy, catalog=catalog, kind=shown_kind, name=shown_name
        )
        if row is not None:
            if through:
                row = Workload(**{**asdict(row), "seen_through": through})
            rows.setdefault(ns, []).append(row)
    out = []
    listed = namespaces if namespaces is not None else [{"metadata": {"name": n}} for n in rows]
    for ns_obj in sorted(listed, key=lambda n: n["metadata"]["name"]):
        name = ns_obj["metadata"]["name"]
        if name not in rows:
            continue
        if never_changed(name, policy):
            mode = NEVER_CHANGED
        elif namespaces is None:
            mode = "unknown"
        else:
            mode = namespace_mode(ns_obj, policy)
        workloads = sorted((_path(w, mode) for w in rows[name]), key=lambda w: (w.kind, w.name))
        out.append(Namespace(name, mode, workloads))
    return Report(out, rollout_order(out), list(unreadable or []))


def _path(w: Workload, mode: str) -> Workload:
    """Where its pods run: enabled namespaces translate what gpu2dra can (not what it leaves
    to the in-tree path, skips or cannot translate)."""
    if mode == "enabled" and w.translates:
        return replace(w, path="gpu2dra")
    return w


def rollout_order(namespaces: list[Namespace]) -> list[str]:
    """Namespaces not enabled yet: clean ones first, then by warnings, then fewer GPUs."""

    def key(n: Namespace) -> tuple[bool, int, int, str]:
        gpus = sum(sum(w.gpus.values()) for w in n.workloads)
        return n.warnings > 0, n.warnings, gpus, n.name

    return [
        n.name
        for n in sorted(namespaces, key=key)
        if n.mode in ("disabled", "audit") and any(w.path == "device plugin" for w in n.workloads)
    ]

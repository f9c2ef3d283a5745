"""`gpu2dra report`: every workload that still asks for legacy GPU resources, by namespace.

A workload is the controller at the top (Deployment, StatefulSet, DaemonSet, Job, CronJob, a
custom resource with pod templates) or a bare Pod. For each: the GPUs its pods ask for, the
templates translation would create and every warning it would give; then a rollout order.
`gather` reads the cluster (GETs only); `build` is pure.
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from functools import partial

import orjson

from app.core.catalog import Catalog, sharing_of, slice_sharing
from app.core.kube import Obj
from app.core.outcomes import Code, codes
from app.core.policy import MODE_LABEL, Policy
from app.core.priority import preempting_class
from app.core.resources import legacy_devices
from app.core.scope import NEVER_CHANGED, namespace_mode, never_changed
from app.core.templates import describe_template
from app.kubeconfig import context_namespace
from app.manifests.documents import translate_documents
from app.manifests.podspecs import TooDeep, pod_specs
from app.readers.client import (
    RESOURCE,
    Reader,
    ReadError,
    attempt,
    connect,
    namespaced,
)
from app.readers.registrations import (
    cluster_policy,
)

# Built-in kinds whose objects hold pod templates, listed directly; pods last.
BUILTIN = (
    ("/apis/apps/v1", "deployments"),
    ("/apis/apps/v1", "statefulsets"),
    ("/apis/apps/v1", "daemonsets"),
    ("/apis/apps/v1", "replicasets"),
    ("/apis/batch/v1", "cronjobs"),
    ("/apis/batch/v1", "jobs"),
    ("/api/v1", "pods"),
)
# What translating a workload's manifest notes that is no warning for a live workload: the
# in-tree path serving it, and a kind no rule knows (admission translates its pods anyway).
NOT_WARNINGS = frozenset((Code.IN_TREE, Code.NO_RULE))


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


# ---- the pure part -----------------------------------------------------------------------


def _replicas(obj: Obj) -> int | None:
    spec = obj.get("spec") or {}
    for key in ("replicas", "parallelism"):
        if isinstance(spec.get(key), int):
            return int(spec[key])
    return None


def workload_of(
    obj: Obj, namespace: str, policy: Policy, catalog: Catalog, kind: str, name: str
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
    result = translate_documents([obj], policy, catalog, namespace, "enabled")
    found = [n.text for n in result.notes if n.text.code not in NOT_WARNINGS]
    native = all(catalog.serving_extended_resource(r) for r in gpus)
    once_shared = False
    if Code.NOT_SHARING in codes(found):
        everywhere = replace(catalog, sharing=None)  # as if every driver shared every capacity
        once_shared = bool(
            translate_documents([obj], policy, everywhere, namespace, "enabled").templates
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
        row = workload_of(obj, ns, policy, catalog, shown_kind, shown_name)
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


# ---- output ------------------------------------------------------------------------------


def _gpus(w: Workload) -> str:
    text = ", ".join(f"{r}={n}" for r, n in w.gpus.items())
    return text + (f" x{w.replicas}" if w.replicas is not None else "")


def render_table(report: Report) -> str:
    header = ("NAMESPACE", "MODE", "WORKLOAD", "GPUS PER POD", "SERVED BY", "PREEMPTS", "WARNINGS")
    rows = [
        (
            (
                n.name,
                n.mode,
                f"{w.kind}/{w.name}",
                _gpus(w),
                w.path,
                w.preempts or "-",
                str(len(w.warnings)),
            ),
            w,
        )
        for n in report.namespaces
        for w in n.workloads
    ]
    widths = [max([len(h), *(len(r[0][i]) for r in rows)]) for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(widths[i]) for i, h in enumerate(header)).rstrip()]
    for cells, w in rows:
        lines.append("  ".join(c.ljust(widths[i]) for i, c in enumerate(cells)).rstrip())
        pad = " " * 4
        if w.seen_through:
            lines.append(f"{pad}(seen through {w.seen_through})")
        lines.extend(f"{pad}would create {t}" for t in w.templates)
        lines.extend(f"{pad}warning: {m}" for m in w.warnings)
    if not rows:
        partly = " in what could be read" if report.unreadable else ""
        lines = [f"no workload asks for legacy GPU resources{partly}"]
    shared = [w for n in report.namespaces for w in n.workloads if w.once_shared]
    if shared:
        lines.append("")
        lines.append(
            f"{len(shared)} workload(s) would move once the cluster shares devices (DRA "
            "consumable capacity: gpu2dra doctor, check sharing): "
            + ", ".join(f"{w.namespace}/{w.kind}/{w.name}" for w in shared)
        )
    lines += _rollout_lines(report)
    return "\n".join(lines) + "\n"


def _rollout_lines(report: Report) -> list[str]:
    lines = []
    by_name = {n.name: n for n in report.namespaces}
    if report.rollout:
        lines.append("")
        lines.append("suggested rollout order (namespaces that translate cleanly first):")
        for number, name in enumerate(report.rollout, 1):
            n = by_name[name]
            issues = f"{n.warnings} warning(s)" if n.warnings else "no warnings"
            step = "audit" if n.mode == "disabled" else "enabled"  # audit first, then enable
            lines.append(
                f"  {number}. {name} ({n.mode}, {len(n.workloads)} workload(s), {issues}): "
                f"kubectl label namespace {name} {MODE_LABEL}={step} --overwrite"
            )
    lines.extend(f"cannot read {what}" for what in report.unreadable)
    return lines


def render_json(report: Report) -> bytes:
    return orjson.dumps(asdict(report), option=orjson.OPT_INDENT_2)


def render_csv(report: Report) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(
        [
            "namespace",
            "mode",
            "kind",
            "name",
            "replicas",
            "gpus",
            "path",
            "preempts",
            "templates",
            "warnings",
            "codes",
        ]
    )
    for n in report.namespaces:
        for w in n.workloads:
            writer.writerow(
                [
                    n.name,
                    n.mode,
                    w.kind,
                    w.name,
                    "" if w.replicas is None else w.replicas,
                    ";".join(f"{r}={c}" for r, c in w.gpus.items()),
                    w.path,
                    w.preempts,
                    ";".join(w.templates),
                    " | ".join(w.warnings),
                    ";".join(w.codes),
                ]
            )
    return out.getvalue()


# ---- reading the cluster -----------------------------------------------------------------


def _custom_kinds(reader: Reader) -> list[tuple[str, str, str]]:
    """(api prefix, plural, Kind) of custom resources whose schema embeds containers."""
    found = []
    for crd in reader.items("/apis/apiextensions.k8s.io/v1/customresourcedefinitions"):
        spec = crd.get("spec") or {}
        versions = [v for v in spec.get("versions") or [] if v.get("served")]
        version = next((v for v in versions if v.get("storage")), versions[0] if versions else None)
        if version is None or b'"containers"' not in orjson.dumps(version.get("schema") or {}):
            continue
        names = spec.get("names") or {}
        if spec.get("scope") == "Namespaced":
            prefix = f"/apis/{spec.get('group')}/{version.get('name')}"
            found.append((prefix, str(names.get("plural")), str(names.get("kind"))))
    return found


def gather(
    reader: Reader, namespace: str | None, policy: Policy
) -> tuple[list[Obj] | None, list[tuple[str, Obj]], Catalog, list[str]]:
    """Namespaces (None: unreadable), (kind, object) of every workload kind, the catalog, and
    what could not be read: each is named, none is fatal."""
    unreadable: list[str] = []
    namespaces = _namespaces(reader, namespace, unreadable)
    classes = attempt(partial(reader.items, f"{RESOURCE}/deviceclasses"))
    if isinstance(classes, ReadError):
        unreadable.append(f"deviceclasses ({classes}): the policy's deviceClasses stand in")
        catalog = Catalog.of(policy.device_classes)
    else:
        catalog = Catalog.from_objects(classes)
    slices = attempt(partial(reader.items, f"{RESOURCE}/resourceslices"))
    if isinstance(slices, ReadError):
        unreadable.append(f"resourceslices ({slices}): every driver is taken to share devices")
    else:
        catalog = replace(catalog, sharing=sharing_of(slice_sharing(s) for s in slices))
    custom = attempt(partial(_custom_kinds, reader))
    if isinstance(custom, ReadError):
        unreadable.append(f"custom resources ({custom})")
        custom = []
    kinds = [(p, plural, "") for p, plural in BUILTIN[:-1]] + custom + [(*BUILTIN[-1], "")]
    objects: list[tuple[str, Obj]] = []
    for prefix, plural, kind in kinds:
        items = attempt(partial(reader.items, namespaced(prefix, plural, namespace)))
        if isinstance(items, ReadError):
            unreadable.append(f"{plural} ({items})")
            continue
        objects.extend((kind or _kind_of(plural), o) for o in items)
    return namespaces, objects, catalog, unreadable


def _namespaces(reader: Reader, namespace: str | None, unreadable: list[str]) -> list[Obj] | None:
    if not namespace:
        found = attempt(partial(reader.items, "/api/v1/namespaces"))
    else:
        one = attempt(partial(reader.find, f"/api/v1/namespaces/{namespace}"))
        if one is None:
            raise ReadError(f"namespace {namespace} not found")
        found = one if isinstance(one, ReadError) else [one]
    if isinstance(found, ReadError):
        unreadable.append(f"namespaces ({found}): their modes are unknown")
        return None
    return found


_KINDS: Mapping[str, str] = {
    "deployments": "Deployment",
    "statefulsets": "StatefulSet",
    "daemonsets": "DaemonSet",
    "replicasets": "ReplicaSet",
    "cronjobs": "CronJob",
    "jobs": "Job",
    "pods": "Pod",
}


def _kind_of(plural: str) -> str:
    return _KINDS[plural]


def main(args: argparse.Namespace) -> int:
    reader = connect(args.kubeconfig)
    policy, _ = cluster_policy(reader, args.policy)
    namespace = (
        None if args.all_namespaces else (args.namespace or context_namespace(args.kubeconfig))
    )
    namespaces, objects, catalog, unreadable = gather(reader, namespace, policy)
    report = build(namespaces, objects, policy, catalog, unreadable)
    if args.output == "json":
        sys.stdout.buffer.write(render_json(report) + b"\n")
    elif args.output == "csv":
        sys.stdout.write(render_csv(report))
    else:
        sys.stdout.write(render_table(report))
    return 0

"""`report`'s output: a table with what each workload would get (-o wide: what translation
does to its pods and the warnings' outcome codes too), JSON, or CSV; and the suggested rollout
order."""

from __future__ import annotations

import csv
import io
from dataclasses import asdict

import orjson

from app.core.policy import MODE_LABEL
from app.diagnose.report.report import Report, Workload
from app.readers.output import table


def _gpus(w: Workload) -> str:
    text = ", ".join(f"{r}={n}" for r, n in w.gpus.items())
    return text + (f" x{w.replicas}" if w.replicas is not None else "")


# -o wide adds these: what translation does to its pods, and the warnings' outcome codes.
WIDE = ("TRANSLATES", "CODES")


def render_table(report: Report, *, wide: bool = False, headers: bool = True) -> str:
    header = (
        *("NAMESPACE", "MODE", "WORKLOAD", "GPUS PER POD", "SERVED BY", "PREEMPTS", "NODE"),
        "WARNINGS",
        *(WIDE if wide else ()),
    )
    rows = [
        (
            (
                n.name,
                n.mode,
                f"{w.kind}/{w.name}",
                _gpus(w),
                w.path,
                w.preempts or "-",
                w.node or "-",
                str(len(w.warnings)),
                *((("yes" if w.translates else "no"), ",".join(w.codes) or "-") if wide else ()),
            ),
            w,
        )
        for n in report.namespaces
        for w in n.workloads
    ]
    shown = table(header, [cells for cells, _ in rows], headers=headers)
    lines = shown[:1] if headers else []
    for line, (_, w) in zip(shown[1:] if headers else shown, rows, strict=True):
        lines.append(line)
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
    if report.converting:
        lines.append("")
        lines.append("nodes mid-conversion (gpu2dra nodes convert: resume it, or --revert):")
        lines.extend(f"  {said}" for said in report.converting)
    lines.extend(f"cannot read {what}" for what in report.unreadable)
    return lines


def render_json(report: Report) -> bytes:
    return orjson.dumps(asdict(report), option=orjson.OPT_INDENT_2)


def render_csv(report: Report, *, headers: bool = True) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    if headers:
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
                "node",
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
                    w.node,
                    ";".join(w.templates),
                    " | ".join(w.warnings),
                    ";".join(w.codes),
                ]
            )
    return out.getvalue()

"""`capacity`'s output: each namespace's need by shape against what is free, the devices
published, the device plugin's capacity left, the node autoscalers, then what it means in
sentences (-o wide: what each need lacks, and its DeviceClass); or JSON."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import orjson

from app.plan.capacity.analyse import PLANNED, Report
from app.readers.output import table


def _count(value: int | None) -> str:
    return "?" if value is None else str(value)


# -o wide adds these to the namespaces' table: what the need lacks of what is free, and the
# DeviceClass its claims ask.
WIDE = ("SHORT", "CLASS")


def _namespaces(report: Report, *, wide: bool, headers: bool) -> list[str]:
    header: tuple[str, ...] = ("NAMESPACE", "MODE", "RUNNING", "PENDING", "REPLICAS", "HELD")
    header += ("NEEDS", "FREE", *(WIDE if wide else ()))
    lines = [f"GPU demand of the namespaces gpu2dra translates or audits ({', '.join(PLANNED)}):"]
    if not report.namespaces:
        return [*lines, "  no namespace is enabled or in audit"]
    rows, notes = [], []
    for plan in report.namespaces:
        for n in plan.needs:
            counts = (n.running, n.pending, n.replicas, n.held, n.needs)
            more = (_count(None if n.free is None else n.short), n.device_class) if wide else ()
            rows.append((plan.name, plan.mode, *map(str, counts), _count(n.free), *more, n.shape))
        if not plan.needs:
            more = ("-", "-") if wide else ()
            rows.append((plan.name, plan.mode, *"-----", "-", *more, "no GPU demand"))
        if plan.staying:
            said = ", ".join(f"{code} {n}" for code, n in plan.staying.items())
            notes.append(f"  {plan.name}: pods gpu2dra leaves on the device plugin: {said}")
        if plan.frees:
            said = ", ".join(f"{n} {r}" for r, n in plan.frees.items())
            notes.append(
                f"  {plan.name}: its bound pods free {said} on the device plugin as they move"
            )
    return [*lines, *table((*header, "SHAPE"), rows, headers=headers), *notes]


def _pools(report: Report, *, headers: bool) -> list[str]:
    lines = ["", "DRA devices published (ResourceSlices) of the classes gpu2dra maps:"]
    if not report.pools:
        return [*lines, "  none"]
    header = ("CLASS", "PRODUCT", "PROFILE", "SHARED", "PUBLISHED", "FREE", "SHARES FREE")
    rows = [
        (
            p.device_class,
            p.product or "-",
            p.profile or "-",
            "yes" if p.shared else "no",
            str(p.published),
            str(p.free),
            f"{p.shares_free} of {p.shares}" if p.shares else "-",
        )
        for p in report.pools
    ]
    return [*lines, *table(header, rows, headers=headers)]


def _plugin(report: Report, *, headers: bool) -> list[str]:
    lines = ["", "device plugin (nodes' allocatable, less what bound pods request):"]
    if not report.plugin:
        return [*lines, "  no node offers a mapped resource"]
    header = ("RESOURCE", "NODES", "ALLOCATABLE", "REQUESTED", "LEFT")
    rows = [
        (p.resource, str(p.nodes), str(p.allocatable), str(p.requested), str(p.left))
        for p in report.plugin
    ]
    return [*lines, *table(header, rows, headers=headers)]


def _autoscalers(report: Report) -> list[str]:
    lines = ["", "node autoscalers:"]
    if not report.autoscalers:
        return [*lines, "  none found"]
    for a in report.autoscalers:
        can = "can add DRA nodes" if a.adds_dra_nodes else "cannot add DRA nodes"
        lines.append(f"  {a.shown}: {can}: {a.said.removeprefix(a.shown + ': ')}")
    return lines


def render_text(report: Report, *, wide: bool = False, headers: bool = True) -> str:
    """The tables (their header lines only with `headers`), the autoscalers, the sentences."""
    lines = _namespaces(report, wide=wide, headers=headers)
    lines += _pools(report, headers=headers) + _plugin(report, headers=headers)
    lines += _autoscalers(report)
    lines += ["", "what it means:", *(f"  {s}" for s in report.sentences)]
    lines += report.unreadable
    return "\n".join(lines) + "\n"


def _plain(report: Report) -> dict[str, Any]:
    body = asdict(report)
    for plan, shown in zip(body["namespaces"], report.namespaces, strict=True):
        for row, need in zip(plan["needs"], shown.needs, strict=True):
            row["short"] = need.short
    for row, plugin in zip(body["plugin"], report.plugin, strict=True):
        row["left"] = plugin.left
    return body


def render_json(report: Report) -> bytes:
    return orjson.dumps(_plain(report), option=orjson.OPT_INDENT_2)

"""`impact`'s output: each finding with what changes and what to do, then what could not be
read; or JSON."""

from __future__ import annotations

from dataclasses import asdict

import orjson

from app.plan.impact.analyse import Finding


def render_text(findings: list[Finding], unreadable: list[str], scope: str) -> str:
    lines = [f"what keys on GPU requests and would stop seeing translated pods ({scope}):"]
    if not findings:
        lines.append("  nothing found")
    for f in findings:
        lines.append(f"{f.level}  {f.kind:<15}  {f.subject}")
        lines.extend(f"      {'':<15}  - {d}" for d in f.details)
        lines.append(f"      {'':<15}  changes: {f.change}")
        lines.append(f"      {'':<15}  do: {f.action}")
    lines.extend(unreadable)
    return "\n".join(lines) + "\n"


def render_json(findings: list[Finding], unreadable: list[str], scope: str) -> bytes:
    return orjson.dumps(
        {"scope": scope, "findings": [asdict(f) for f in findings], "unreadable": unreadable},
        option=orjson.OPT_INDENT_2,
    )

"""`doctor`'s output: a line per check with its details and fix, or JSON; and its exit code."""

from __future__ import annotations

from dataclasses import asdict

import orjson

from app.diagnose.doctor.checks.verdict import Check


def render_text(checks: list[Check], source: str) -> str:
    width = max(len(c.name) for c in checks)
    lines = [f"policy: {source}"]
    for c in checks:
        lines.append(f"{c.status}  {c.name:<{width}}  {c.summary}")
        lines.extend(f"      {' ' * width}  - {d}" for d in c.details)
        if c.fix:
            lines.append(f"      {' ' * width}  fix: {c.fix}")
    return "\n".join(lines) + "\n"


def render_json(checks: list[Check], source: str) -> bytes:
    return orjson.dumps(
        {
            "policy": source,
            "ok": all(c.status != "FAIL" for c in checks),
            "checks": [asdict(c) for c in checks],
        },
        option=orjson.OPT_INDENT_2,
    )


def exit_code(checks: list[Check]) -> int:
    return 1 if any(c.status == "FAIL" for c in checks) else 0

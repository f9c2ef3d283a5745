"""`explain`'s output: the headline, a line per step with its details, the pod's latest events;
or JSON."""

from __future__ import annotations

from dataclasses import asdict

import orjson

from app.diagnose.explain.explain import Explanation


def render(explanation: Explanation) -> str:
    lines = [explanation.headline]
    for step in explanation.steps:
        lines.append(f"  {step.state:<4}  {step.text}")
        lines.extend(f"          {d}" for d in step.details)
    if explanation.events:
        lines.append("  events (oldest first):")
        lines.extend(f"          {e}" for e in explanation.events)
    return "\n".join(lines) + "\n"


def render_json(explanation: Explanation) -> bytes:
    """The headline, each step (its state, text, details and code) and the events."""
    return orjson.dumps(asdict(explanation), option=orjson.OPT_INDENT_2)

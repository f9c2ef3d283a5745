"""Enough of PromQL, evaluated at one instant over a list of samples, to prove a join as
Prometheus would run it: selectors, `group`/`max`/`min`/`sum`/`count` by, and arithmetic
between vectors with `on(...)` and `group_left(...)`, parsed by promql-parser. A join whose
"one" side holds two series for one match fails, as Prometheus' does."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import promql_parser

Labels = dict[str, str]
Sample = tuple[Labels, float]
NAME = "__name__"

_AGGREGATES: dict[str, Callable[[list[float]], float]] = {
    "group": lambda values: 1.0,
    "max": max,
    "min": min,
    "sum": sum,
    "count": lambda values: float(len(values)),
}
_OPS: dict[str, Callable[[float, float], float]] = {
    "*": lambda a, b: a * b,
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "/": lambda a, b: a / b,
}


class DuplicateSeries(ValueError):
    """Prometheus: "found duplicate series for the match group ... on the right hand-side"."""


def _matches(labels: Labels, matcher: Any) -> bool:
    value, op = labels.get(matcher.name, ""), str(matcher.op).rsplit(".", 1)[-1]
    wanted = str(matcher.value)
    if op == "Equal":
        return value == wanted
    if op == "NotEqual":
        return value != wanted
    found = re.fullmatch(wanted, value) is not None
    return found if op == "Re" else not found


def _key(labels: Labels, names: list[str]) -> tuple[str, ...]:
    return tuple(labels.get(n, "") for n in names)


def evaluate(expr: str | Any, series: Mapping[str, list[Sample]]) -> list[Sample]:
    """The instant vector `expr` gives over `series` (metric name -> samples)."""
    node: Any = promql_parser.parse(expr) if isinstance(expr, str) else expr
    kind = type(node).__name__
    if kind == "ParenExpr":
        return evaluate(node.expr, series)
    if kind == "VectorSelector":
        return [
            ({**labels, NAME: node.name}, value)
            for labels, value in series.get(node.name, [])
            if all(_matches(labels, m) for m in node.matchers.matchers)
        ]
    if kind == "AggregateExpr":
        op, by = str(node.op), list(node.modifier.labels) if node.modifier else []
        groups: dict[tuple[str, ...], list[float]] = {}
        for labels, value in evaluate(node.expr, series):
            groups.setdefault(_key(labels, by), []).append(value)
        return [(dict(zip(by, key, strict=True)), _AGGREGATES[op](v)) for key, v in groups.items()]
    if kind == "BinaryExpr":
        left, right = evaluate(node.lhs, series), evaluate(node.rhs, series)
        modifier = node.modifier
        on = list(modifier.matching.labels) if modifier and modifier.matching else []
        include = list(modifier.group_labels or []) if modifier else []
        one: dict[tuple[str, ...], Labels | None] = {}
        values: dict[tuple[str, ...], float] = {}
        for labels, value in right:
            key = _key(labels, on)
            if key in one:
                raise DuplicateSeries(f"found duplicate series for the match group {key}")
            one[key], values[key] = labels, value
        found = []
        for labels, value in left:
            key = _key(labels, on)
            if key not in one:
                continue
            other = one[key] or {}
            out = {k: v for k, v in labels.items() if k != NAME}
            out.update({k: other.get(k, "") for k in include})
            found.append((out, _OPS[str(node.op)](value, values[key])))
        return found
    raise NotImplementedError(f"not evaluated here: {kind}")

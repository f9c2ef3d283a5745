"""`gpu2dra nodes plan` run: the capacity view read and analysed, the device-plugin nodes
picked for its shortfalls, printed as a table and sentences, or as JSON or YAML."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Literal

import orjson

from app.kubeconfig import Kubeconfig
from app.plan.capacity.analyse import analyse
from app.plan.capacity.gather import gather
from app.plan.nodes.analyse import Plan, PluginNode, plan, plugin_nodes
from app.readers.client import ReadError, connect
from app.readers.cluster_policy import cluster_policy
from app.readers.output import structured


def _node(node: PluginNode) -> dict[str, Any]:
    return {
        "name": node.name,
        "product": node.product,
        "mig": node.mig,
        "offers": node.offers,
        "moving": node.moving,
        "staying": dict(node.staying),
        "converting": node.converting,
    }


def render_json(result: Plan) -> bytes:
    body = {
        "convert": [{**_node(p.node), "for": p.covers} for p in result.picks],
        "converting": [_node(n) for n in result.converting],
        "uncovered": result.uncovered,
        "pluginAfter": {
            r: {"left": left, "stayingNeed": need}
            for r, (left, need) in result.plugin_after.items()
        },
        "sentences": result.sentences,
    }
    return orjson.dumps(body, option=orjson.OPT_INDENT_2)


def render_text(result: Plan, *, headers: bool = True) -> str:
    rows = [
        (
            p.node.name,
            p.node.product or "-",
            p.node.mig or "-",
            ",".join(f"{r}={n}" for r, n in p.node.offers.items()),
            str(p.node.moving),
            str(sum(p.node.staying.values())),
            p.covers,
        )
        for p in result.picks
    ]
    lines = []
    if rows:
        table = [("NODE", "PRODUCT", "MIG", "OFFERS", "MOVE", "STAY", "FOR"), *rows]
        table = table if headers else table[1:]
        widths = [max(len(r[i]) for r in table) for i in range(6)]
        for r in table:
            lines.append(
                "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[6]
            )
        lines.append("")
    lines += result.sentences
    return "\n".join(lines) + "\n"


def run(
    *,
    kubeconfig: Kubeconfig,
    policy_file: Path | None,
    output: Literal["text", "json", "yaml"],
    headers: bool = True,
) -> int:
    reader = connect(kubeconfig)
    policy, _ = cluster_policy(reader, policy_file)
    inputs = gather(reader)
    report = analyse(inputs, policy)
    parts = (inputs.nodes, inputs.pods, inputs.namespaces)
    for part in parts:
        if isinstance(part, ReadError):
            raise part
    nodes, pods, namespaces = (p for p in parts if not isinstance(p, ReadError))
    result = plan(report, plugin_nodes(nodes, pods, namespaces, policy), pods, policy)
    if output in ("json", "yaml"):
        sys.stdout.buffer.write(structured(render_json(result), output))
    else:
        sys.stdout.write(render_text(result, headers=headers))
    return 0

"""`gpu2dra report` run: read the workloads and the policy in force, build the report, print
it as a table (wide or not), JSON, YAML or CSV."""

from __future__ import annotations

import sys
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Literal

from app.core.conversion import describe, state_of
from app.diagnose.report.gather import gather
from app.diagnose.report.render import render_csv, render_json, render_table
from app.diagnose.report.report import build
from app.kubeconfig import Kubeconfig
from app.readers.client import Reader, ReadError, attempt, connect
from app.readers.cluster_policy import cluster_policy
from app.readers.output import structured


def converting(reader: Reader, unreadable: list[str]) -> list[str]:
    """Nodes `gpu2dra nodes convert` left mid-way, each with where it stands."""
    nodes = attempt(partial(reader.items, "/api/v1/nodes"))
    if isinstance(nodes, ReadError):
        unreadable.append(f"nodes ({nodes}): nodes mid-conversion are not shown")
        return []
    return [
        f"node {n['metadata']['name']}: {describe(state)}"
        for n in nodes
        if (state := state_of(n)) is not None
    ]


def run(
    *,
    kubeconfig: Kubeconfig,
    policy_file: Path | None,
    namespace: str | None,
    output: Literal["table", "wide", "json", "yaml", "csv"],
    headers: bool = True,
) -> int:
    """`namespace` None: every namespace. `policy_file` None: the policy in gpu2dra's
    ConfigMap, else the embedded one. `headers` false: the table or CSV without its header."""
    reader = connect(kubeconfig)
    policy, _ = cluster_policy(reader, policy_file)
    namespaces, objects, catalog, unreadable = gather(reader, namespace, policy)
    report = build(namespaces, objects, policy, catalog, unreadable=unreadable)
    report = replace(report, converting=converting(reader, report.unreadable))
    if output == "json" or output == "yaml":
        sys.stdout.buffer.write(structured(render_json(report), output))
    elif output == "csv":
        sys.stdout.write(render_csv(report, headers=headers))
    else:
        sys.stdout.write(render_table(report, wide=output == "wide", headers=headers))
    return 0

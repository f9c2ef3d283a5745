"""`gpu2dra capacity` run: read the cluster and the policy in force, analyse, print."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Literal

from app.kubeconfig import Kubeconfig
from app.plan.capacity.analyse import analyse
from app.plan.capacity.gather import gather
from app.plan.capacity.render import render_json, render_text
from app.readers.client import connect
from app.readers.cluster_policy import cluster_policy


def run(
    *, kubeconfig: Kubeconfig, policy_file: Path | None, output: Literal["text", "json"]
) -> int:
    """`policy_file` None: the policy in gpu2dra's ConfigMap, else the embedded one."""
    reader = connect(kubeconfig)
    policy, _ = cluster_policy(reader, policy_file)
    report = analyse(gather(reader), policy)
    if output == "json":
        sys.stdout.buffer.write(render_json(report) + b"\n")
    else:
        sys.stdout.write(render_text(report))
    return 0

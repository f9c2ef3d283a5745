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
from app.readers.output import structured


def run(
    *,
    kubeconfig: Kubeconfig,
    policy_file: Path | None,
    output: Literal["text", "wide", "json", "yaml"],
    headers: bool = True,
) -> int:
    """`policy_file` None: the policy in gpu2dra's ConfigMap, else the embedded one. `headers`
    false: the tables without their header lines."""
    reader = connect(kubeconfig)
    policy, _ = cluster_policy(reader, policy_file)
    report = analyse(gather(reader), policy)
    if output == "json" or output == "yaml":
        sys.stdout.buffer.write(structured(render_json(report), output))
    else:
        sys.stdout.write(render_text(report, wide=output == "wide", headers=headers))
    return 0

"""`gpu2dra impact` run: read what keys on GPU requests and the policy in force, analyse, print."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Literal

from app.kubeconfig import Kubeconfig
from app.plan.impact.analyse import analyse
from app.plan.impact.gather import gather
from app.plan.impact.render import render_json, render_text
from app.readers.client import connect
from app.readers.cluster_policy import cluster_policy
from app.readers.output import structured


def run(
    *,
    kubeconfig: Kubeconfig,
    policy_file: Path | None,
    namespace: str | None,
    output: Literal["text", "json", "yaml"],
) -> int:
    """`namespace`: the one about to be enabled (its quotas and labels); None: every one.
    `policy_file` None: the policy in gpu2dra's ConfigMap, else the embedded one."""
    reader = connect(kubeconfig)
    policy, _ = cluster_policy(reader, policy_file)
    scope = f"quotas of namespace {namespace}" if namespace else "every namespace"
    findings, unreadable = analyse(gather(reader, namespace), policy)
    if output == "json" or output == "yaml":
        sys.stdout.buffer.write(structured(render_json(findings, unreadable, scope), output))
    else:
        sys.stdout.write(render_text(findings, unreadable, scope))
    return 0

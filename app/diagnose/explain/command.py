"""`gpu2dra explain` run: read the pod and the policy in force, explain, print."""

from __future__ import annotations

import sys
from pathlib import Path

from app.diagnose.explain.explain import explain
from app.diagnose.explain.gather import gather
from app.diagnose.explain.render import render
from app.readers.client import connect
from app.readers.cluster_policy import cluster_policy


def run(*, kubeconfig: Path | None, policy_file: Path | None, namespace: str, name: str) -> int:
    """`policy_file` None: the policy in gpu2dra's ConfigMap, else the embedded one."""
    reader = connect(kubeconfig)
    policy, _ = cluster_policy(reader, policy_file)
    sys.stdout.write(render(explain(gather(reader, namespace, name), policy)))
    return 0

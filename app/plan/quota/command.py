"""`gpu2dra quota` run: read the legacy quotas from the cluster or a file, print their DRA side."""

from __future__ import annotations

import sys
from pathlib import Path

from app.core.policy import load_policy
from app.kubeconfig import Kubeconfig
from app.plan.quota.read import read_cluster, read_file
from app.plan.quota.render import render
from app.readers.client import connect
from app.readers.cluster_policy import cluster_policy


def run(
    *,
    kubeconfig: Kubeconfig,
    policy_file: Path | None,
    filename: str | None,
    namespace: str | None,
    all_namespaces: bool,
) -> int:
    """`filename` (- for stdin): read quotas from YAML, not the cluster, and judge by
    `policy_file` or the embedded policy. `namespace` None: `default` in the cluster, every
    namespace the file names."""
    if filename:
        policy = load_policy(policy_file)
        quotas = read_file(filename, None if all_namespaces else namespace)
    else:
        reader = connect(kubeconfig)
        policy, _ = cluster_policy(reader, policy_file)
        quotas = read_cluster(reader, None if all_namespaces else (namespace or "default"))
    sys.stdout.write(render(quotas, policy))
    return 0

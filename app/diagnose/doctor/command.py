"""`gpu2dra doctor` run: read the cluster and the policy in force, judge, print, exit 1 on a
FAIL."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Literal

from app.diagnose.doctor.checks import run_checks
from app.diagnose.doctor.gather import gather
from app.diagnose.doctor.render import exit_code, render_json, render_text
from app.kubeconfig import Kubeconfig
from app.readers.client import connect
from app.readers.cluster_policy import cluster_policy
from app.readers.output import structured


def run(
    *, kubeconfig: Kubeconfig, policy_file: Path | None, output: Literal["text", "json", "yaml"]
) -> int:
    """`policy_file` None: the policy in gpu2dra's ConfigMap, else the embedded one."""
    reader = connect(kubeconfig)
    policy, source = cluster_policy(reader, policy_file)
    checks = run_checks(gather(reader), policy)
    if output == "json" or output == "yaml":
        sys.stdout.buffer.write(structured(render_json(checks, source), output))
    else:
        sys.stdout.write(render_text(checks, source))
    return exit_code(checks)

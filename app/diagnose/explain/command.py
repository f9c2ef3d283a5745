"""`gpu2dra explain` run: read the pod and the policy in force, explain, print (as text, JSON
or YAML)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Literal

from app.diagnose.explain.explain import explain
from app.diagnose.explain.gather import gather
from app.diagnose.explain.render import render, render_json
from app.kubeconfig import Kubeconfig
from app.readers.client import connect
from app.readers.cluster_policy import cluster_policy
from app.readers.output import structured

STEP_FAILED = 3  # a step says FAIL: a script or CI job can tell it from a read error (1)


def run(
    *,
    kubeconfig: Kubeconfig,
    policy_file: Path | None,
    namespace: str,
    name: str,
    output: Literal["text", "json", "yaml"] = "text",
) -> int:
    """`policy_file` None: the policy in gpu2dra's ConfigMap, else the embedded one."""
    reader = connect(kubeconfig)
    policy, _ = cluster_policy(reader, policy_file)
    explanation = explain(gather(reader, namespace, name), policy)
    if output == "json" or output == "yaml":
        sys.stdout.buffer.write(structured(render_json(explanation), output))
    else:
        sys.stdout.write(render(explanation))
    return STEP_FAILED if any(step.state == "FAIL" for step in explanation.steps) else 0

"""`gpu2dra nodes convert NODE…`: each node in turn, a dry run unless told to apply; the
steps said as they happen, and at the end what was refused or would not finish."""

from __future__ import annotations

import sys
from pathlib import Path

from app.core.conversion import Stack
from app.kubeconfig import Kubeconfig
from app.maintain.nodes.cluster import ApiCluster
from app.maintain.nodes.convert import Converter, Options
from app.readers.client import connect
from app.readers.cluster_policy import cluster_policy

# Exit codes: 0 every node converted (or, dry, would be); 2 a node refused or stopped.
REFUSED = 2


def run(
    *,
    kubeconfig: Kubeconfig,
    policy_file: Path | None,
    nodes: list[str],
    to: str,
    stack: Stack,
    apply: bool,
    timeout: float,
    all_pods: bool,
) -> int:
    reader = connect(kubeconfig)
    policy, _ = cluster_policy(reader, policy_file)
    options = Options(to=to, stack=stack, apply=apply, timeout=timeout, all_pods=all_pods)

    def say(line: str) -> None:
        print(line, flush=True)

    converter = Converter(ApiCluster(reader), policy, options, say)
    if not apply:
        say("dry run: nothing is changed (--apply converts)")
    for name in nodes:
        outcome = converter.run(name)
        for reason in outcome.refused:
            print(f"{name}: refused: {reason}", file=sys.stderr)
        for what in outcome.stuck:
            print(f"{name}: would not finish: {what}", file=sys.stderr)
        if not outcome.done:
            if outcome.stuck:
                print(
                    f"{name}: stays cordoned; run the same command again to resume, or "
                    "with --revert to go back",
                    file=sys.stderr,
                )
            return REFUSED
    return 0

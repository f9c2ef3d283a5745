"""gpu2dra beside the empty webhook at one create at a time, side by side on one control plane.

    .venv/bin/python -m tests.bench.paired [--rounds 150] [--rate 5]

tests/bench/e2e.py measures its setups one after the other, and on the 2-core machine a
setup's create p50 at 5/s moves by a millisecond between runs minutes apart: more than the
differences it compares. Here the setups that a create at 5/s compares run at once, each in
its own namespace with its own webhook registrations (narrowed to that namespace), and the
creates take turns: round after round, one pod per setup, the order rotated each round. What
the machine does meanwhile falls on every setup alike, and each round gives a paired
difference to the empty webhook.

The setups (e2e's, run side by side): device plugin; empty webhook; gpu2dra (the chart's
webhooks, its ServiceAccount and RBAC); the empty webhook answering gpu2dra's patch, plainly
and through gpu2dra's registration; pods created already translated. Per setup: the client's
p50, the API server's own POST p50 (its audit log), and the median of the paired differences
of that POST to the empty webhook's in the same round. Not a test: figures depend on the
machine.
"""

from __future__ import annotations

import argparse
import math
import re
import statistics
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import orjson

from app.core.kube import Obj
from tests.bench.costs import Served, audit_args, creates
from tests.bench.e2e import (
    CLASS,
    GPUS_PER_NODE,
    HOOK_KINDS,
    Kube,
    Replay,
    as_service_account,
    copy_templates,
    create_namespace,
    create_nodes,
    empty_webhook,
    label_namespace,
    load_average,
    percentile,
    pod,
)
from tests.support.cluster import device_class
from tests.support.controlplane import ControlPlane, kubernetes_version, release_bin_dir, releases
from tests.support.webhook import Webhook, register, unregister

EMPTY = "empty webhook"
PLACE = "empty webhook in gpu2dra's place"
MUTATING_ONLY = f"{PLACE} (mutating only)"  # without the chart's validating webhooks
SETUPS = (
    "device plugin",
    EMPTY,
    "gpu2dra",
    "empty webhook + gpu2dra's patch",
    PLACE,
    "translated pods",
)
KNOWN = (*SETUPS, MUTATING_ONLY)
PLUGIN = ("device plugin", EMPTY)  # the device plugin's pods, on the plugin nodes
TRANSLATED = "translated pods"
NAME = "kubernetes.io/metadata.name"


def narrowed(config: Obj, namespace: str, prefix: str = "") -> Obj:
    """A webhook configuration whose webhooks see only `namespace`: its selectors kept, one
    requirement added. With `prefix`, its name and its webhooks' names renamed, so that a copy
    registers beside the original."""
    hooks = []
    for hook in config["webhooks"]:
        selector = dict(hook.get("namespaceSelector") or {})
        only = {"key": NAME, "operator": "In", "values": [namespace]}
        selector["matchExpressions"] = [*selector.get("matchExpressions", []), only]
        name = f"{prefix}.{hook['name']}" if prefix else hook["name"]
        hooks.append({**hook, "namespaceSelector": selector, "name": name})
    metadata = dict(config["metadata"])
    if prefix:
        metadata = {"name": f"{prefix}-{metadata['name']}"}
    return {**config, "metadata": metadata, "webhooks": hooks}


def when(served: Served) -> float:
    return served.received


def namespace_of(setup: str) -> str:
    return "paired-" + re.sub(r"[^a-z0-9]+", "-", setup.replace("'", "")).strip("-")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=150, help="pods created per setup")
    parser.add_argument("--rate", type=float, default=5.0, help="creates a second, all setups")
    parser.add_argument(
        "--setups",
        default=",".join(SETUPS),
        help=f"comma-separated; {EMPTY!r} and 'gpu2dra' always run; also known: {MUTATING_ONLY!r}",
    )
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()
    asked = [s.strip() for s in args.setups.split(",") if s.strip()]
    if unknown := set(asked) - set(KNOWN):
        parser.error(f"unknown setups {sorted(unknown)}; known: {', '.join(KNOWN)}")
    setups = tuple(s for s in KNOWN if s in {*asked, EMPTY, "gpu2dra"})

    release = releases()[0]
    version = kubernetes_version(release)
    warm = 5
    per_setup = args.rounds + warm
    plugin = sum(s in PLUGIN for s in setups)
    plugin_nodes = math.ceil(plugin * per_setup / GPUS_PER_NODE)
    # gpu2dra's first pod makes its templates
    dra_nodes = math.ceil(((len(setups) - plugin) * per_setup + 1) / GPUS_PER_NODE)
    loads = [load_average()]
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="gpu2dra-bench-paired-") as tmp, ExitStack() as stack:
        work = Path(tmp)
        audit, audit_log = audit_args(work / "audit")
        plane = stack.enter_context(
            ControlPlane(release_bin_dir(release), work / "plane", apiserver_args=audit)
        )
        kube = Kube(plane)
        api = plane.api_client()
        stack.callback(api.close)
        kube.call("POST", "/apis/resource.k8s.io/v1/deviceclasses", device_class(CLASS, "gpu"))
        create_nodes(plane, "plugin", plugin_nodes, dra=False)
        create_nodes(plane, "dra", dra_nodes, dra=True)
        for setup in setups:
            create_namespace(kube, namespace_of(setup))

        # gpu2dra, as e2e runs it: the chart's webhooks and RBAC, its own ServiceAccount
        home = work / "gpu2dra"
        home.mkdir()
        identity = home / "serviceaccount.kubeconfig"
        hook = Webhook(home, identity, plane.helm)
        docs = hook.rendered("webhook.mutating.failurePolicy=Fail")
        account = as_service_account(plane, docs, identity)
        hook.start("--log-level", "warning", "--service-account", account)
        stack.callback(hook.stop)
        mine = namespace_of("gpu2dra")
        configs = [d for d in docs if d["kind"] in HOOK_KINDS]
        register(api, [narrowed(c, mine) for c in configs])
        stack.callback(unregister, api)
        hook.set_mode(api, mine, "enabled")
        answer = hook.dry_run(mine, pod("size", "dra"))
        # gpu2dra's templates exist before the replays copy them: its first pod makes them
        kube.call("POST", f"/api/v1/namespaces/{mine}/pods", pod("first", "dra"))
        replay = Replay(mine, answer["patch"], tuple(configs))

        for setup in setups:
            if setup not in (EMPTY, "gpu2dra", "device plugin"):
                copy_templates(kube, replay, namespace_of(setup))
        stack.enter_context(empty_webhook(api, namespace_of(EMPTY), work / "empty"))
        if (setup := "empty webhook + gpu2dra's patch") in setups:
            plain, name = namespace_of(setup), "patch.bench.gpu2dra.io"
            stack.enter_context(empty_webhook(api, plain, work / "plain", replay.patch, name=name))
        for setup, prefix in ((PLACE, "place"), (MUTATING_ONLY, "mutating")):
            if setup in setups:
                place = namespace_of(setup)
                label_namespace(kube, place, "enabled")
                kinds = HOOK_KINDS if setup == PLACE else HOOK_KINDS[:1]
                copies = [narrowed(c, place, prefix) for c in configs if c["kind"] in kinds]
                home = work / prefix
                stack.enter_context(empty_webhook(api, place, home, replay.patch, copies))

        def make(setup: str, name: str) -> Obj:
            nodes = "plugin" if setup in PLUGIN else "dra"
            return replay.translated(name, nodes) if setup == TRANSLATED else pod(name, nodes)

        def create(setup: str, name: str) -> float:
            path = f"/api/v1/namespaces/{namespace_of(setup)}/pods"
            body = orjson.dumps(make(setup, name))
            began = time.perf_counter()
            status, data = kube.request("POST", path, body)
            took = time.perf_counter() - began
            if status != 201:
                raise SystemExit(f"{setup}: create refused: {status} {data[:300]!r}")
            return took

        for i in range(warm):
            for setup in setups:
                create(setup, f"warm-{i}")
        check = kube.call("GET", f"/api/v1/namespaces/{namespace_of('gpu2dra')}/pods/warm-0")
        assert check["spec"].get("resourceClaims"), "gpu2dra did not translate the bench pod"
        for setup in set(PLUGIN) & set(setups):
            got = kube.call("GET", f"/api/v1/namespaces/{namespace_of(setup)}/pods/warm-0")
            assert not got["spec"].get("resourceClaims"), f"{setup}: a claim where none belongs"

        print(
            f"{len(setups)} setups side by side, {args.rounds} rounds at {args.rate:g}/s",
            flush=True,
        )
        client: dict[str, list[float]] = {s: [] for s in setups}
        since = time.time()
        next_due = time.perf_counter()
        for r in range(args.rounds):
            shift = r % len(setups)
            for setup in setups[shift:] + setups[:shift]:
                next_due += 1 / args.rate
                pause = next_due - time.perf_counter()
                if pause > 0:
                    time.sleep(pause)
                client[setup].append(create(setup, f"r-{r}"))
        until = time.time()
        loads.append(load_average())
        time.sleep(2)  # the audit log is written in batches, each second
        served: dict[str, list[float]] = {}
        for setup in setups:
            found = sorted(creates(audit_log, namespace_of(setup), since, until), key=when)
            seconds = [s.seconds for s in found if s.status == 201]
            assert len(seconds) == args.rounds, f"{setup}: {len(seconds)} creates in the audit log"
            served[setup] = seconds

    report(args, version, started, loads, client, served)


def report(
    args: Any,
    version: str,
    started: float,
    loads: list[str],
    client: dict[str, list[float]],
    served: dict[str, list[float]],
) -> None:
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started))
    print(
        f"\nKubernetes {version}, {when}, {args.rounds} rounds at {args.rate:g} creates a second "
        f"in all; load average (1/5/15 min) at the start and end: {'; '.join(loads)}\n"
    )
    header = [
        "setup",
        "create p50 / p99 ms (client)",
        "API server's own POST p50 / p99 ms",
        "paired difference to the empty webhook's POST, median ms",
    ]
    print("| " + " | ".join(header) + " |")
    print("|" + " --- |" * len(header))
    figures: dict[str, Any] = {}
    for setup in served:
        ms = [s * 1e3 for s in served[setup]]
        own = [c * 1e3 for c in client[setup]]
        pairs = [a - b for a, b in zip(ms, (s * 1e3 for s in served[EMPTY]), strict=True)]
        diff = statistics.median(pairs)
        figures[setup] = {
            "client_p50_ms": percentile(own, 0.5),
            "client_p99_ms": percentile(own, 0.99),
            "apiserver_p50_ms": percentile(ms, 0.5),
            "apiserver_p99_ms": percentile(ms, 0.99),
            "paired_difference_ms": diff,
        }
        cells = [
            setup,
            f"{percentile(own, 0.5):.2f} / {percentile(own, 0.99):.2f}",
            f"{percentile(ms, 0.5):.2f} / {percentile(ms, 0.99):.2f}",
            "-" if setup == EMPTY else f"{diff:+.2f}",
        ]
        print("| " + " | ".join(cells) + " |")
    if args.json:
        args.json.write_text(
            orjson.dumps(
                {"kubernetes": version, "started": when, "loads": loads, "setups": figures},
                option=orjson.OPT_INDENT_2,
            ).decode()
        )


if __name__ == "__main__":
    main()

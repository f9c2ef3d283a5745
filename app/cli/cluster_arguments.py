"""The options of the commands that read or change a running cluster (doctor, explain,
report, impact, capacity, deviceclasses, quota, nodes, prune-templates, version): the
kubeconfig's context, the namespace, the output formats, as kubectl takes them."""

from __future__ import annotations

import argparse
import re
from datetime import timedelta
from pathlib import Path

from app.cli.helptext import Parser
from app.core.nvidia.mig import mig_profile


def _profiles(text: str) -> list[str]:
    """`--profiles`: MIG profiles as the DRA driver spells them, comma-separated."""
    profiles = [p.strip() for p in text.split(",") if p.strip()]
    if bad := [p for p in profiles if mig_profile(p.replace("+", ".")) != p]:
        raise argparse.ArgumentTypeError(
            f"not a MIG profile as the DRA driver spells it: {', '.join(bad)}"
        )
    return profiles


def _duration(text: str) -> timedelta:
    """`--min-age`: 90s, 30m, 1h, 2d, or 0."""
    found = re.fullmatch(r"([0-9]+)([smhd]?)", text.strip())
    if not found:
        raise argparse.ArgumentTypeError(f"not a duration (90s, 30m, 1h, 2d): {text!r}")
    unit = {"s": 1, "m": 60, "h": 3600, "d": 86400}[found[2] or "s"]
    return timedelta(seconds=int(found[1]) * unit)


CONTEXT_NAMESPACE = "default: the kubeconfig context's namespace, else default"


def kubeconfig_options() -> Parser:
    """--kubeconfig and --context, as kubectl takes them, for every command that reads a
    cluster; as a parent parser."""
    kube = Parser(add_help=False)
    kube.add_argument(
        "--kubeconfig",
        type=Path,
        help="the kubeconfig file to read (default: $KUBECONFIG, else ~/.kube/config)",
    )
    kube.add_argument(
        "--context",
        metavar="NAME",
        help="the kubeconfig context to use (default: its current context)",
    )
    return kube


def cluster_options() -> Parser:
    """The options every read-only cluster command shares, as a parent parser."""
    cluster = Parser(add_help=False, parents=[kubeconfig_options()])
    cluster.add_argument(
        "--policy", type=Path, help="policy file (default: gpu2dra's ConfigMap, else embedded)"
    )
    return cluster


def _scope(command: argparse.ArgumentParser, namespace: str) -> None:
    """-A or -n, as kubectl takes them; `namespace` says what -n names."""
    scope = command.add_mutually_exclusive_group()
    scope.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace")
    scope.add_argument("-n", "--namespace", help=namespace)


def _output(
    command: argparse.ArgumentParser, choices: tuple[str, ...], *, wide: str | None = None
) -> None:
    """-o, its first choice the default; with a table (`wide` says what -o wide adds), also
    --no-headers, as kubectl takes them."""
    said = "output format"
    if wide is not None:
        said += f": {wide}"
    command.add_argument("-o", "--output", choices=choices, default=choices[0], help=said)
    if wide is not None:
        command.add_argument(
            "--no-headers",
            dest="headers",
            action="store_false",
            help="print tables (and CSV) without their header lines"
            if "csv" in choices
            else "print tables without their header lines",
        )


def add_doctor(doctor: argparse.ArgumentParser) -> None:
    _output(doctor, ("text", "json", "yaml"))


def add_explain(explain: argparse.ArgumentParser) -> None:
    explain.epilog = (
        "Exit status: 0 when no step says FAIL; 3 when one does; 1 when the cluster or the "
        "pod cannot be read; 2 for a usage error."
    )
    explain.add_argument("kind", choices=("pod",), help="what to explain")
    explain.add_argument("name", help="the pod's name")
    _output(explain, ("text", "json", "yaml"))
    explain.add_argument("-n", "--namespace", help=f"the pod's namespace ({CONTEXT_NAMESPACE})")


def add_report(report: argparse.ArgumentParser) -> None:
    _scope(report, f"one namespace ({CONTEXT_NAMESPACE})")
    _output(
        report,
        ("table", "wide", "json", "yaml", "csv"),
        wide="wide adds TRANSLATES (whether gpu2dra translates its pods where enabled) and "
        "CODES (the outcome codes of its warnings)",
    )


def add_impact(impact: argparse.ArgumentParser) -> None:
    _scope(
        impact,
        f"the namespace about to be enabled: its ResourceQuotas and labels "
        f"({CONTEXT_NAMESPACE}; -A: every namespace's quotas)",
    )
    _output(impact, ("text", "json", "yaml"))


def add_capacity(capacity: argparse.ArgumentParser) -> None:
    _output(
        capacity,
        ("text", "wide", "json", "yaml"),
        wide="wide adds SHORT (what each need lacks of what is free) and CLASS (the "
        "DeviceClass its claims ask) to the namespaces' table",
    )


def add_deviceclasses(classes: argparse.ArgumentParser) -> None:
    classes.add_argument(
        "--profiles",
        type=_profiles,
        help="comma-separated MIG profiles (1g.10gb,1g.10gb+me) instead of the "
        "cluster's ResourceSlices",
    )


def add_quota(quota: argparse.ArgumentParser) -> None:
    _scope(quota, f"one namespace ({CONTEXT_NAMESPACE}; with -f, every namespace the file names)")
    quota.add_argument(
        "-f", "--filename", help="read ResourceQuotas from this YAML (- for stdin), not a cluster"
    )


def add_nodes(nodes: argparse.ArgumentParser) -> None:
    from app.core.conversion import PRESETS

    nodes.epilog = (
        "A node's GPUs are offered through one stack at a time; plan says which device-plugin "
        "nodes to move for what enabled and audit namespaces lack, convert moves them one at a "
        "time, resumable: docs/operations/node-pools.md."
    )
    sub = nodes.add_subparsers(dest="nodes_command", required=True, metavar="{plan,convert}")
    plan = sub.add_parser(
        "plan",
        parents=[cluster_options()],
        help="which device-plugin nodes to convert for what enabled and audit namespaces lack",
    )
    _output(plan, ("text", "json", "yaml"))
    plan.add_argument(
        "--no-headers",
        dest="headers",
        action="store_false",
        help="print the table without its header line",
    )
    convert = sub.add_parser(
        "convert",
        parents=[cluster_options()],
        help="cordon, drain, switch the GPU stack's labels, wait, uncordon (a dry run without "
        "--apply)",
    )
    convert.add_argument("node", nargs="+", metavar="NODE", help="the nodes, one at a time")
    convert.add_argument(
        "--apply", action="store_true", help="convert; without it, only say each step"
    )
    convert.add_argument(
        "--revert", action="store_true", help="back to the device plugin from the DRA driver"
    )
    convert.add_argument(
        "--preset",
        choices=sorted(PRESETS),
        default="gpu-operator",
        help="the labels that choose each stack: the GPU Operator's "
        "nvidia.com/gpu.deploy.device-plugin, or the standalone device plugin chart's "
        "nvidia.com/device-plugin.deploy; both with nvidia.com/dra-driver.deploy for the DRA "
        "driver chart's kubeletPlugin.nodeSelector",
    )
    convert.add_argument(
        "--dra-labels",
        action="append",
        default=[],
        metavar="KEY=VALUE|KEY-",
        help="the labels that run the DRA driver and stop the device plugin, instead of the "
        "preset's; repeatable",
    )
    convert.add_argument(
        "--plugin-labels",
        action="append",
        default=[],
        metavar="KEY=VALUE|KEY-",
        help="the labels that run the device plugin and stop the DRA driver, instead of the "
        "preset's; repeatable",
    )
    convert.add_argument(
        "--timeout",
        type=float,
        default=600.0,
        help="seconds for the drain, and again for the node to offer its GPUs one way",
    )
    convert.add_argument(
        "--all-pods",
        action="store_true",
        help="drain the node's pods without GPUs too (DaemonSets' pods always stay)",
    )


def add_prune_templates(prune: argparse.ArgumentParser) -> None:
    _scope(prune, f"one namespace ({CONTEXT_NAMESPACE})")
    prune.add_argument(
        "--apply", action="store_true", help="delete them; without it, only say what would go"
    )
    _output(prune, ("text", "json", "yaml"))
    prune.add_argument(
        "--min-age",
        type=_duration,
        default="1h",
        help="keep templates younger than this (90s, 30m, 1h, 2d): gpu2dra makes a template "
        "just before the pod that uses it is stored",
    )


def add_version(version: argparse.ArgumentParser) -> None:
    version.epilog = (
        "The webhook's version is its Deployments' (labelled app.kubernetes.io/name=gpu2dra): "
        "their app.kubernetes.io/version label and image. A cluster that cannot be reached is "
        "said, and the exit status is still 0."
    )
    version.add_argument(
        "--client", action="store_true", help="the client's version alone: read no cluster"
    )
    _output(version, ("text", "json", "yaml"))

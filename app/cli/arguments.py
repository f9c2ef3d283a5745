"""The command line's grammar: `gpu2dra`'s commands, their options and how each is read."""

from __future__ import annotations

import argparse
import os
import re
from dataclasses import fields
from datetime import timedelta
from importlib import metadata
from pathlib import Path

from app.cli.completion import SHELLS
from app.cli.helptext import Parser
from app.core.nvidia.mig import mig_profile
from app.core.policy import MODES
from app.webhook.settings import Listen, Settings


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


def running_version() -> str:
    """The installed package's version, and the commit the image was built from when the
    image says (GPU2DRA_REVISION, set by the Dockerfile)."""
    try:
        version = metadata.version("gpu2dra")
    except metadata.PackageNotFoundError:
        version = "unknown (not installed)"
    revision = os.environ.get("GPU2DRA_REVISION", "")
    return f"{version} ({revision})" if revision and revision != "unknown" else version


def parser() -> argparse.ArgumentParser:
    top = Parser(prog="gpu2dra", description="Move nvidia.com/gpu workloads onto Kubernetes DRA.")
    top.add_argument(
        "--version",
        action="version",
        version=f"%(prog)s {running_version()}",
        help="the version running (and, in the image, the commit it was built from)",
    )
    sub = top.add_subparsers(dest="command", required=True)
    _add_serve(sub.add_parser("serve", help="run the admission webhook"))
    _add_exporter(
        sub.add_parser(
            "exporter",
            help="export gpu2dra_pod_gpu_info: which pod holds which GPU through DRA claims",
        )
    )
    _add_translate(sub.add_parser("translate", help="print manifests translated; creates nothing"))
    _add_certs(sub.add_parser("certs", help="make a CA and a serving certificate"))
    # Read-only cluster commands: the kubeconfig's context (--kubeconfig, --context), GETs only.
    cluster = [_cluster_options()]
    _add_doctor(sub.add_parser("doctor", parents=cluster, help="check the cluster's DRA readiness"))
    _add_explain(sub.add_parser("explain", parents=cluster, help="why a GPU pod is in its state"))
    _add_report(
        sub.add_parser(
            "report", parents=cluster, help="workloads that still ask for legacy GPU resources"
        )
    )
    _add_impact(
        sub.add_parser(
            "impact",
            parents=cluster,
            help="what keys on GPU requests and would stop seeing translated pods",
        )
    )
    _add_capacity(
        sub.add_parser(
            "capacity",
            parents=cluster,
            help="GPU demand of enabled and audit namespaces against free DRA devices",
        )
    )
    _add_deviceclasses(
        sub.add_parser(
            "deviceclasses",
            parents=cluster,
            help="print a DeviceClass per MIG profile, for the in-tree path (YAML)",
        )
    )
    _add_quota(
        sub.add_parser(
            "quota",
            parents=cluster,
            help="print DRA-side ResourceQuotas that mirror the legacy GPU quotas",
        )
    )
    _add_version(
        sub.add_parser(
            "version",
            parents=[_kubeconfig_options()],
            help="the client's version, and the gpu2dra webhook's where a cluster answers",
        )
    )
    _add_completion(
        sub.add_parser("completion", help="print a shell completion script (bash, zsh or fish)")
    )
    _add_nodes(
        sub.add_parser(
            "nodes",
            help="plan and carry out moving GPU nodes from the device plugin to the DRA driver",
        )
    )
    _add_prune_templates(
        sub.add_parser(
            "prune-templates",
            parents=[_kubeconfig_options()],
            help="delete gpu2dra's ResourceClaimTemplates that no pod uses (a dry run without "
            "--apply)",
        )
    )
    return top


def _add_serve(serve: argparse.ArgumentParser) -> None:
    listen, settings = Listen(), {f.name: f.default for f in fields(Settings)}
    serve.add_argument("--host", default=listen.host, help="address to listen on")
    serve.add_argument("--port", type=int, default=listen.port, help="HTTPS port to listen on")
    serve.add_argument("--cert", type=Path, help="serving certificate (PEM)")
    serve.add_argument("--key", type=Path, help="its private key (PEM)")
    serve.add_argument("--policy", type=Path, help="policy file (default: embedded)")
    serve.add_argument("--offline", action="store_true", help="never contact a cluster")
    serve.add_argument(
        "--namespace",
        help="the webhook's own namespace: its pods are never changed "
        "(default: $POD_NAMESPACE, else the service account's namespace)",
    )
    serve.add_argument(
        "--service-account",
        help="the webhook's own ServiceAccount: only it (and --template-writer) may create or "
        "update ResourceClaimTemplates named gpu2dra-* or labelled as gpu2dra's, but for "
        "exactly what gpu2dra writes under that name, which anyone may apply",
    )
    serve.add_argument(
        "--template-writer",
        action="append",
        default=[],
        metavar="USERNAME",
        help="another identity that may write gpu2dra's templates, as the API server names it "
        "(system:serviceaccount:NS:NAME, a user); repeatable",
    )
    serve.add_argument(
        "--api-timeout",
        type=float,
        default=settings["api_timeout"],
        help="seconds allowed for each API call on the admission path",
    )
    serve.add_argument(
        "--max-body",
        type=int,
        default=settings["max_body"],
        help="largest request body accepted, in bytes",
    )
    serve.add_argument(
        "--cert-reload-interval",
        type=float,
        default=listen.cert_reload_interval,
        help="seconds between checks for renewed certificate files",
    )
    serve.add_argument(
        "--no-translate-endpoint", action="store_true", help="turn off POST /translate"
    )
    serve.add_argument(
        "--translate-workers",
        type=int,
        default=settings["translate_workers"],
        help="threads of /translate's own for manifests over 64 KiB (one more for smaller ones); "
        "past 4 requests in hand per thread it answers 503",
    )
    serve.add_argument(
        "--translate-deadline",
        type=float,
        default=settings["translate_deadline"],
        help="seconds within which /translate answers, else 503",
    )
    serve.add_argument(
        "--internal-port",
        type=int,
        help="serve /translate and /metrics on this HTTPS port alone, not on --port "
        "(default: everything on --port)",
    )
    serve.add_argument(
        "--read-timeout",
        type=float,
        default=listen.read_timeout,
        help="seconds a connection has to send a whole request, from its opening or its "
        "request's first byte; then it is closed",
    )
    serve.add_argument(
        "--max-concurrency",
        type=int,
        default=listen.max_concurrency,
        help="requests in progress, or open connections, past which a request is answered 503",
    )
    serve.add_argument(
        "--client-ca",
        type=Path,
        help="CA file (PEM): on --port, serve only clients presenting a certificate it signed "
        "(the API server's, configured in its AdmissionConfiguration)",
    )
    serve.add_argument(
        "--client-name",
        action="append",
        default=[],
        metavar="NAME",
        help="with --client-ca, a name (CN or DNS) the client's certificate must hold; repeatable",
    )
    serve.add_argument(
        "--deadline",
        type=float,
        default=settings["deadline"],
        help="seconds within which an admission answer that waits on the API is given",
    )
    serve.add_argument(
        "--drain-seconds",
        type=float,
        default=listen.drain_seconds,
        help="on SIGTERM, report not-ready this long before stopping (rolling restarts)",
    )
    _log_options(serve, level=listen.log_level)


def _add_exporter(exporter: argparse.ArgumentParser) -> None:
    exporter.add_argument("--host", default="0.0.0.0", help="address to listen on")
    exporter.add_argument("--port", type=int, default=9464, help="HTTP port of /metrics")
    exporter.add_argument("--kubeconfig", type=Path, help="default: the service account")
    exporter.add_argument(
        "--driver",
        action="append",
        default=[],
        metavar="NAME",
        help="a DRA driver whose devices are exported; repeatable (default: gpu.nvidia.com)",
    )
    exporter.add_argument(
        "--api-timeout",
        type=float,
        default=10.0,
        help="seconds allowed for each list of the watch caches",
    )
    exporter.add_argument(
        "--secure-metrics",
        action="store_true",
        help="serve HTTPS, and /metrics only to bearer tokens allowed to get the non-resource "
        "URL /metrics (a TokenReview and a SubjectAccessReview, remembered for two minutes)",
    )
    exporter.add_argument(
        "--tls-cert-file",
        type=Path,
        help="the serving certificate under --secure-metrics (default: a self-signed one)",
    )
    exporter.add_argument("--tls-key-file", type=Path, help="its private key")
    _log_options(exporter, level="info")


def _log_options(command: argparse.ArgumentParser, *, level: str) -> None:
    """--log-level and --log-format, as `serve` and `exporter` take them."""
    command.add_argument(
        "--log-level",
        default=level,
        help="the least severe level logged: debug, info, warning or error",
    )
    command.add_argument(
        "--log-format",
        choices=("json", "text"),
        default="json",
        help="one JSON object per line, or text",
    )


def _add_translate(tr: argparse.ArgumentParser) -> None:
    tr.epilog = (
        "Exit status: 0 when the manifests were written; 1 when they cannot be read (one line "
        "naming the file or document); 2 for a usage error; with --strict, 3 when a document "
        "whose pods ask for GPUs is left as is (the manifests are written all the same). "
        "A KRM function's ResourceList (config.kubernetes.io/v1) in gives one out: its items "
        "translated, the templates among them, the warnings in its results; functionConfig's "
        "data may set namespace, mode, strict and policy (kustomize's exec functions: "
        "docs/getting-started/gitops.md)."
    )
    tr.add_argument(
        "-f",
        "--filename",
        action="append",
        default=[],
        help="a manifest file, a directory (its .yaml, .yml and .json files, by name), or - for "
        "stdin; repeatable, read in order into one stream (default: stdin, as a Helm "
        "post-renderer)",
    )
    tr.add_argument(
        "--strict",
        action="store_true",
        help="exit 3 when any document whose pods ask for GPUs is left as is, and say on "
        "stderr how many documents were translated, left (and why) and unchanged",
    )
    tr.add_argument(
        "-R",
        "--recursive",
        action="store_true",
        help="read the directories given with -f and those below them",
    )
    tr.add_argument("-n", "--namespace", help="namespace for documents that name none")
    tr.add_argument("--policy", type=Path, help="policy file (default: embedded)")
    tr.add_argument(
        "--mode", choices=MODES, default="enabled", help="translate as in a namespace of this mode"
    )
    tr.add_argument(
        "-o",
        "--output",
        choices=("yaml", "json"),
        default="yaml",
        help="a YAML stream, or a JSON List: the templates first, then the documents that use "
        "them (kubectl apply -f - takes either, and creates them in that order); warnings go "
        "to stderr",
    )


def _add_certs(certs: argparse.ArgumentParser) -> None:
    certs.add_argument("--service", required=True, help="the webhook's Service name")
    certs.add_argument("--namespace", required=True, help="the Service's namespace")
    certs.add_argument(
        "--out",
        type=Path,
        required=True,
        help="directory for ca.crt, tls.crt and tls.key (made if missing)",
    )
    certs.add_argument("--ip", action="append", default=[], help="extra IP SAN (repeatable)")
    certs.add_argument("--dns", action="append", default=[], help="extra DNS SAN (repeatable)")
    certs.add_argument("--days", type=int, default=365, help="days the certificates are valid")


# -n's default for every command that reads a cluster, as kubectl's.
CONTEXT_NAMESPACE = "default: the kubeconfig context's namespace, else default"


def _kubeconfig_options() -> Parser:
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


def _cluster_options() -> Parser:
    """The options every read-only cluster command shares, as a parent parser."""
    cluster = Parser(add_help=False, parents=[_kubeconfig_options()])
    cluster.add_argument(
        "--policy", type=Path, help="policy file (default: gpu2dra's ConfigMap, else embedded)"
    )
    return cluster


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


def _add_doctor(doctor: argparse.ArgumentParser) -> None:
    _output(doctor, ("text", "json", "yaml"))


def _add_explain(explain: argparse.ArgumentParser) -> None:
    explain.epilog = (
        "Exit status: 0 when no step says FAIL; 3 when one does; 1 when the cluster or the "
        "pod cannot be read; 2 for a usage error."
    )
    explain.add_argument("kind", choices=("pod",), help="what to explain")
    explain.add_argument("name", help="the pod's name")
    _output(explain, ("text", "json", "yaml"))
    explain.add_argument("-n", "--namespace", help=f"the pod's namespace ({CONTEXT_NAMESPACE})")


def _add_report(report: argparse.ArgumentParser) -> None:
    scope = report.add_mutually_exclusive_group()
    scope.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace")
    scope.add_argument(
        "-n",
        "--namespace",
        help=f"one namespace ({CONTEXT_NAMESPACE})",
    )
    _output(
        report,
        ("table", "wide", "json", "yaml", "csv"),
        wide="wide adds TRANSLATES (whether gpu2dra translates its pods where enabled) and "
        "CODES (the outcome codes of its warnings)",
    )


def _add_impact(impact: argparse.ArgumentParser) -> None:
    scope = impact.add_mutually_exclusive_group()
    scope.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace")
    scope.add_argument(
        "-n",
        "--namespace",
        help=f"the namespace about to be enabled: its ResourceQuotas and labels "
        f"({CONTEXT_NAMESPACE}; -A: every namespace's quotas)",
    )
    _output(impact, ("text", "json", "yaml"))


def _add_capacity(capacity: argparse.ArgumentParser) -> None:
    _output(
        capacity,
        ("text", "wide", "json", "yaml"),
        wide="wide adds SHORT (what each need lacks of what is free) and CLASS (the "
        "DeviceClass its claims ask) to the namespaces' table",
    )


def _add_deviceclasses(classes: argparse.ArgumentParser) -> None:
    classes.add_argument(
        "--profiles",
        type=_profiles,
        help="comma-separated MIG profiles (1g.10gb,1g.10gb+me) instead of the "
        "cluster's ResourceSlices",
    )


def _add_quota(quota: argparse.ArgumentParser) -> None:
    where = quota.add_mutually_exclusive_group()
    where.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace")
    where.add_argument(
        "-n",
        "--namespace",
        help=f"one namespace ({CONTEXT_NAMESPACE}; with -f, every namespace the file names)",
    )
    quota.add_argument(
        "-f", "--filename", help="read ResourceQuotas from this YAML (- for stdin), not a cluster"
    )


def _add_nodes(nodes: argparse.ArgumentParser) -> None:
    from app.core.conversion import PRESETS

    nodes.epilog = (
        "A node's GPUs are offered through one stack at a time; plan says which device-plugin "
        "nodes to move for what enabled and audit namespaces lack, convert moves them one at a "
        "time, resumable: docs/operations/node-pools.md."
    )
    sub = nodes.add_subparsers(dest="nodes_command", required=True, metavar="{plan,convert}")
    plan = sub.add_parser(
        "plan",
        parents=[_cluster_options()],
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
        parents=[_cluster_options()],
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


def _add_prune_templates(prune: argparse.ArgumentParser) -> None:
    where = prune.add_mutually_exclusive_group()
    where.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace")
    where.add_argument("-n", "--namespace", help=f"one namespace ({CONTEXT_NAMESPACE})")
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


def _add_version(version: argparse.ArgumentParser) -> None:
    version.epilog = (
        "The webhook's version is its Deployments' (labelled app.kubernetes.io/name=gpu2dra): "
        "their app.kubernetes.io/version label and image. A cluster that cannot be reached is "
        "said, and the exit status is still 0."
    )
    version.add_argument(
        "--client", action="store_true", help="the client's version alone: read no cluster"
    )
    _output(version, ("text", "json", "yaml"))


def _add_completion(completion: argparse.ArgumentParser) -> None:
    completion.epilog = (
        "bash: source <(gpu2dra completion bash) in ~/.bashrc. zsh: source <(gpu2dra "
        "completion zsh) in ~/.zshrc, after compinit. fish: gpu2dra completion fish > "
        "~/.config/fish/completions/gpu2dra.fish."
    )
    completion.add_argument("shell", choices=SHELLS, help="the shell the script is for")

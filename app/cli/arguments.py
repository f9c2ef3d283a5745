"""The command line's grammar: `gpu2dra`'s commands, their options and how each is read."""

from __future__ import annotations

import argparse
import os
from dataclasses import fields
from importlib import metadata
from pathlib import Path

from app.cli.cluster_arguments import (
    add_capacity,
    add_deviceclasses,
    add_doctor,
    add_explain,
    add_impact,
    add_nodes,
    add_prune_templates,
    add_quota,
    add_report,
    add_version,
    cluster_options,
    kubeconfig_options,
)
from app.cli.completion import SHELLS
from app.cli.helptext import Parser
from app.core.policy import MODES
from app.webhook.settings import Listen, Settings


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
    cluster = [cluster_options()]
    add_doctor(sub.add_parser("doctor", parents=cluster, help="check the cluster's DRA readiness"))
    add_explain(sub.add_parser("explain", parents=cluster, help="why a GPU pod is in its state"))
    add_report(
        sub.add_parser(
            "report", parents=cluster, help="workloads that still ask for legacy GPU resources"
        )
    )
    add_impact(
        sub.add_parser(
            "impact",
            parents=cluster,
            help="what keys on GPU requests and would stop seeing translated pods",
        )
    )
    add_capacity(
        sub.add_parser(
            "capacity",
            parents=cluster,
            help="GPU demand of enabled and audit namespaces against free DRA devices",
        )
    )
    add_deviceclasses(
        sub.add_parser(
            "deviceclasses",
            parents=cluster,
            help="print a DeviceClass per MIG profile, for the in-tree path (YAML)",
        )
    )
    add_quota(
        sub.add_parser(
            "quota",
            parents=cluster,
            help="print DRA-side ResourceQuotas that mirror the legacy GPU quotas",
        )
    )
    add_version(
        sub.add_parser(
            "version",
            parents=[kubeconfig_options()],
            help="the client's version, and the gpu2dra webhook's where a cluster answers",
        )
    )
    _add_completion(
        sub.add_parser("completion", help="print a shell completion script (bash, zsh or fish)")
    )
    add_nodes(
        sub.add_parser(
            "nodes",
            help="plan and carry out moving GPU nodes from the device plugin to the DRA driver",
        )
    )
    add_prune_templates(
        sub.add_parser(
            "prune-templates",
            parents=[kubeconfig_options()],
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
def _add_completion(completion: argparse.ArgumentParser) -> None:
    completion.epilog = (
        "bash: source <(gpu2dra completion bash) in ~/.bashrc. zsh: source <(gpu2dra "
        "completion zsh) in ~/.zshrc, after compinit. fish: gpu2dra completion fish > "
        "~/.config/fish/completions/gpu2dra.fish."
    )
    completion.add_argument("shell", choices=SHELLS, help="the shell the script is for")

"""`gpu2dra`: serve the webhook, translate manifests offline, make certificates."""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable
from dataclasses import fields
from datetime import timedelta
from importlib import metadata
from pathlib import Path

from app.core.catalog import Catalog
from app.core.mig import mig_profile
from app.core.policy import MODES, PolicyError, load_policy
from app.kubeconfig import NoCluster, api_client
from app.manifests.documents import ManifestError
from app.manifests.render import translate_text
from app.webhook import logs
from app.webhook.certs import make_certs, service_names
from app.webhook.settings import Listen, Settings

_SA_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def _own_namespace() -> str | None:
    if ns := os.environ.get("POD_NAMESPACE"):
        return ns
    try:
        return _SA_NAMESPACE.read_text().strip() or None
    except OSError:
        return None


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
    found = re.fullmatch(r"(\d+)([smhd]?)", text.strip())
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
    top = argparse.ArgumentParser(
        prog="gpu2dra", description="Move nvidia.com/gpu workloads onto Kubernetes DRA."
    )
    top.add_argument(
        "--version",
        action="version",
        version=f"%(prog)s {running_version()}",
        help="the version running (and, in the image, the commit it was built from)",
    )
    sub = top.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the admission webhook")
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
        "update ResourceClaimTemplates named gpu2dra-* or labelled as gpu2dra's",
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
    serve.add_argument(
        "--log-level",
        default=listen.log_level,
        help="the least severe level logged: debug, info, warning or error",
    )
    serve.add_argument(
        "--log-format",
        choices=("json", "text"),
        default="json",
        help="one JSON object per line, or text",
    )

    exporter = sub.add_parser(
        "exporter",
        help="export gpu2dra_pod_gpu_info: which pod holds which GPU through DRA claims",
    )
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
        "--log-level",
        default="info",
        help="the least severe level logged: debug, info, warning or error",
    )
    exporter.add_argument(
        "--log-format",
        choices=("json", "text"),
        default="json",
        help="one JSON object per line, or text",
    )

    tr = sub.add_parser("translate", help="print manifests translated; creates nothing")
    tr.add_argument("-f", "--filename", required=True, help="manifest file, or - for stdin")
    tr.add_argument("-n", "--namespace", help="namespace for documents that name none")
    tr.add_argument("--policy", type=Path, help="policy file (default: embedded)")
    tr.add_argument(
        "--mode", choices=MODES, default="enabled", help="translate as in a namespace of this mode"
    )
    tr.add_argument(
        "-o", "--output", choices=("yaml", "json"), default="yaml", help="output format"
    )

    certs = sub.add_parser("certs", help="make a CA and a serving certificate")
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

    # Read-only cluster commands: the current kubeconfig, GETs only.
    cluster = argparse.ArgumentParser(add_help=False)
    cluster.add_argument("--kubeconfig", type=Path, help="default: $KUBECONFIG, ~/.kube/config")
    cluster.add_argument(
        "--policy", type=Path, help="policy file (default: gpu2dra's ConfigMap, else embedded)"
    )
    doctor = sub.add_parser("doctor", parents=[cluster], help="check the cluster's DRA readiness")
    doctor.add_argument(
        "-o", "--output", choices=("text", "json"), default="text", help="output format"
    )
    explain = sub.add_parser("explain", parents=[cluster], help="why a GPU pod is in its state")
    explain.add_argument("kind", choices=("pod",), help="what to explain")
    explain.add_argument("name", help="the pod's name")
    explain.add_argument("-n", "--namespace", default="default", help="the pod's namespace")
    report = sub.add_parser(
        "report", parents=[cluster], help="workloads that still ask for legacy GPU resources"
    )
    scope = report.add_mutually_exclusive_group()
    scope.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace")
    scope.add_argument(
        "-n",
        "--namespace",
        help="one namespace (default: the kubeconfig context's namespace, else default)",
    )
    report.add_argument(
        "-o", "--output", choices=("table", "json", "csv"), default="table", help="output format"
    )
    impact = sub.add_parser(
        "impact",
        parents=[cluster],
        help="what keys on GPU requests and would stop seeing translated pods",
    )
    scope = impact.add_mutually_exclusive_group()
    scope.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace")
    scope.add_argument(
        "-n", "--namespace", help="the namespace about to be enabled (its ResourceQuotas)"
    )
    impact.add_argument(
        "-o", "--output", choices=("text", "json"), default="text", help="output format"
    )
    classes = sub.add_parser(
        "deviceclasses",
        parents=[cluster],
        help="print a DeviceClass per MIG profile, for the in-tree path (YAML)",
    )
    classes.add_argument(
        "--profiles",
        type=_profiles,
        help="comma-separated MIG profiles (1g.10gb,1g.10gb+me) instead of the "
        "cluster's ResourceSlices",
    )
    quota = sub.add_parser(
        "quota",
        parents=[cluster],
        help="print DRA-side ResourceQuotas that mirror the legacy GPU quotas",
    )
    where = quota.add_mutually_exclusive_group()
    where.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace")
    where.add_argument("-n", "--namespace", help="one namespace (default: default)")
    quota.add_argument(
        "-f", "--filename", help="read ResourceQuotas from this YAML (- for stdin), not a cluster"
    )
    prune = sub.add_parser(
        "prune-templates",
        help="delete gpu2dra's ResourceClaimTemplates that no pod uses (a dry run without --apply)",
    )
    prune.add_argument("--kubeconfig", type=Path, help="default: $KUBECONFIG, ~/.kube/config")
    where = prune.add_mutually_exclusive_group()
    where.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace")
    where.add_argument(
        "-n",
        "--namespace",
        help="one namespace (default: the kubeconfig context's namespace, else default)",
    )
    prune.add_argument(
        "--apply", action="store_true", help="delete them; without it, only say what would go"
    )
    prune.add_argument(
        "--min-age",
        type=_duration,
        default="1h",
        help="keep templates younger than this (90s, 30m, 1h, 2d): gpu2dra makes a template "
        "just before the pod that uses it is stored",
    )
    return top


MAX_MANIFEST_BYTES = 64 * 1024 * 1024  # `translate` refuses more (or /dev/zero) with one line


def _translate(args: argparse.Namespace) -> int:
    policy = load_policy(args.policy)
    try:
        if args.filename == "-":
            raw = sys.stdin.buffer.read(MAX_MANIFEST_BYTES + 1)
        else:
            with open(args.filename, "rb") as file:
                raw = file.read(MAX_MANIFEST_BYTES + 1)
    except OSError as err:
        raise ManifestError(f"{args.filename}: {err.strerror}") from None
    if len(raw) > MAX_MANIFEST_BYTES:
        raise ManifestError(f"{args.filename}: larger than {MAX_MANIFEST_BYTES} bytes")
    try:
        text = raw.decode()
    except UnicodeDecodeError:
        raise ManifestError(f"{args.filename}: not UTF-8 text") from None
    catalog = Catalog.of(policy.device_classes)
    # Linux says which CPUs this process may use (a container's share); elsewhere, one.
    jobs = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    rendered = translate_text(
        text, policy, catalog, args.namespace, args.mode, args.output, jobs=jobs
    )
    for warning in rendered.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    sys.stdout.buffer.write(rendered.body + (b"\n" if args.output == "json" else b""))
    return 0


def _certs(args: argparse.Namespace) -> int:
    names = service_names(args.service, args.namespace) + args.dns
    paths = make_certs(names, args.ip, days=args.days).write(args.out)
    for name, path in paths.items():
        print(f"{name}: {path}")
    return 0


def _serve(args: argparse.Namespace) -> int:
    from app.webhook.runner import serve

    logs.configure(args.log_level, args.log_format)
    policy = load_policy(args.policy)
    namespace = args.namespace or _own_namespace()
    if namespace:
        policy = policy.with_skipped(namespace)
    writers = set(args.template_writer)
    if args.service_account:
        if not namespace:
            print("gpu2dra: serve: --service-account needs --namespace", file=sys.stderr)
            return 2
        writers.add(f"system:serviceaccount:{namespace}:{args.service_account}")
    settings = Settings(
        policy=policy,
        offline=args.offline,
        max_body=args.max_body,
        translate_enabled=not args.no_translate_endpoint,
        api_timeout=args.api_timeout,
        deadline=args.deadline,
        template_writers=frozenset(writers),
        in_pod=bool(os.environ.get("KUBERNETES_SERVICE_HOST")),
    )
    if settings.in_pod and not settings.offline:
        try:
            api_client(in_cluster_first=True)  # only reads the configuration: no request
        except NoCluster as err:
            why = str(err).rstrip(".")
            print(
                f"gpu2dra: serve: running in a pod, but {why}: pods would be admitted "
                "untranslated (--offline serves the policy alone)",
                file=sys.stderr,
            )
            return 1
    listen = Listen(
        host=args.host,
        port=args.port,
        cert=args.cert,
        key=args.key,
        cert_reload_interval=args.cert_reload_interval,
        drain_seconds=args.drain_seconds,
        log_level=args.log_level,
    )
    serve(settings, listen)
    return 0


def _exporter(args: argparse.Namespace) -> int:
    from app.webhook.exporter import DRIVERS, Exporter, serve

    logs.configure(args.log_level, args.log_format)
    try:
        api = api_client(args.kubeconfig, in_cluster_first=args.kubeconfig is None)
    except NoCluster as err:
        print(f"gpu2dra: exporter: {err}", file=sys.stderr)
        return 1
    serve(Exporter(api, args.driver or DRIVERS, args.api_timeout), args.host, args.port)
    return 0


def _doctor(args: argparse.Namespace) -> int:
    from app.troubleshoot import doctor

    return doctor.main(args)


def _explain(args: argparse.Namespace) -> int:
    from app.troubleshoot import explain

    return explain.main(args)


def _report(args: argparse.Namespace) -> int:
    from app.troubleshoot import report

    return report.main(args)


def _impact(args: argparse.Namespace) -> int:
    from app.troubleshoot import impact

    return impact.main(args)


def _deviceclasses(args: argparse.Namespace) -> int:
    from app.troubleshoot import deviceclasses

    return deviceclasses.main(args)


def _prune_templates(args: argparse.Namespace) -> int:
    from app.troubleshoot import prune

    return prune.main(args)


def _quota(args: argparse.Namespace) -> int:
    from app.troubleshoot import quota

    return quota.main(args)


# Imported when run: `translate` does not pay for the kubernetes client, nor `doctor` for uvicorn.
COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "serve": _serve,
    "exporter": _exporter,
    "translate": _translate,
    "certs": _certs,
    "doctor": _doctor,
    "explain": _explain,
    "report": _report,
    "impact": _impact,
    "deviceclasses": _deviceclasses,
    "quota": _quota,
    "prune-templates": _prune_templates,
}


def main(argv: list[str] | None = None) -> int:
    from app.troubleshoot.client import ReadError

    command_line = parser()
    args = command_line.parse_args(argv)
    if args.command == "serve" and (args.cert is None) != (args.key is None):
        command_line.error("serve: --cert and --key go together")
    try:
        return COMMANDS[args.command](args)
    except (ManifestError, PolicyError, ReadError) as err:
        print(f"gpu2dra: {err}", file=sys.stderr)
        return 1

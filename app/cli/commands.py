"""What each of `gpu2dra`'s commands does, and `main`, which reads the command line and runs one."""

from __future__ import annotations

import argparse
import os
import socket
import ssl
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from app.cli.arguments import parser, running_version
from app.core.catalog import Catalog
from app.core.mapping import PolicyError
from app.core.policy import Policy, load_policy
from app.kubeconfig import Kubeconfig, NoCluster, context_namespace
from app.manifests import krm
from app.manifests.documents import ManifestError
from app.manifests.files import read_manifests
from app.manifests.render import as_kube_list, translate_text
from app.watch.client import serving_client
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


STRICT_LEFT = 3  # `translate --strict`: a document whose pods ask for GPUs is left as is


def _translate(args: argparse.Namespace) -> int:
    if not args.filename and sys.stdin.isatty():
        raise ManifestError(
            "no -f given and stdin is a terminal: give -f FILE, or pipe manifests in"
        )
    policy = load_policy(args.policy)
    text = read_manifests(args.filename, recursive=args.recursive, stdin=sys.stdin.buffer)
    catalog = Catalog.of(policy.device_classes)
    if (resource_list := krm.read_resource_list(text)) is not None:
        return _krm_function(resource_list, policy, catalog, args)
    # Linux says which CPUs this process may use (a container's share); elsewhere, one.
    jobs = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    rendered = translate_text(
        text,
        policy,
        catalog,
        namespace=args.namespace,
        mode=args.mode,
        output=args.output,
        jobs=jobs,
        count=args.strict,
    )
    for warning in rendered.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if args.output == "json":
        sys.stdout.buffer.write(as_kube_list(rendered) + b"\n")
    else:
        sys.stdout.buffer.write(rendered.body)
    if args.strict and rendered.tally is not None:
        print(f"gpu2dra: {rendered.tally}", file=sys.stderr)
        return STRICT_LEFT if rendered.tally.left else 0
    return 0


def _krm_function(
    resource_list: dict[str, object], policy: Policy, catalog: Catalog, args: argparse.Namespace
) -> int:
    """A ResourceList in: gpu2dra as a KRM function, a ResourceList out (app/manifests/krm.py)."""
    given = krm.Settings(
        policy=policy, namespace=args.namespace, mode=args.mode, strict=args.strict
    )
    answer = krm.run(resource_list, given, catalog, as_json=args.output == "json")
    for line in answer.said:
        print(line, file=sys.stderr)
    sys.stdout.buffer.write(answer.body)
    return answer.status


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
        translate_workers=args.translate_workers,
        translate_deadline=args.translate_deadline,
        api_timeout=args.api_timeout,
        deadline=args.deadline,
        template_writers=frozenset(writers),
        in_pod=bool(os.environ.get("KUBERNETES_SERVICE_HOST")),
    )
    if settings.in_pod and not settings.offline:
        try:
            serving_client()  # only reads the configuration: no request
        except NoCluster as err:
            why = str(err).rstrip(".")
            print(
                f"gpu2dra: serve: running in a pod, but {why}: pods would be admitted "
                "untranslated (--offline serves the policy alone)",
                file=sys.stderr,
            )
            return 1
    if args.client_name and not args.client_ca:
        print("gpu2dra: serve: --client-name needs --client-ca", file=sys.stderr)
        return 2
    if args.internal_port == args.port:
        print("gpu2dra: serve: --internal-port must differ from --port", file=sys.stderr)
        return 2
    listen = Listen(
        host=args.host,
        port=args.port,
        cert=args.cert,
        key=args.key,
        cert_reload_interval=args.cert_reload_interval,
        drain_seconds=args.drain_seconds,
        log_level=args.log_level,
        read_timeout=args.read_timeout,
        max_concurrency=args.max_concurrency,
        internal_port=args.internal_port,
        client_ca=args.client_ca,
        client_names=frozenset(args.client_name),
    )
    serve(settings, listen)
    return 0


def _exporter(args: argparse.Namespace) -> int:
    from app.exporter.access import Access
    from app.exporter.server import DRIVERS, Exporter, serve

    logs.configure(args.log_level, args.log_format)
    try:
        api = serving_client(args.kubeconfig)
    except NoCluster as err:
        print(f"gpu2dra: exporter: {err}", file=sys.stderr)
        return 1
    access = Access(api) if args.secure_metrics else None
    exporter = Exporter(api, args.driver or DRIVERS, args.api_timeout, access=access)
    if not args.secure_metrics:
        serve(exporter, args.host, args.port)
        return 0
    with tempfile.TemporaryDirectory(prefix="gpu2dra-exporter-") as out:
        tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        if args.tls_cert_file:
            tls.load_cert_chain(args.tls_cert_file, args.tls_key_file)
        else:  # as controller-runtime's secure metrics: self-signed, scraped without verifying
            paths = make_certs(["localhost", socket.gethostname()], ["127.0.0.1"]).write(Path(out))
            tls.load_cert_chain(paths["tls.crt"], paths["tls.key"])
        serve(exporter, args.host, args.port, tls)
    return 0


def _kubeconfig(args: argparse.Namespace) -> Kubeconfig:
    """--kubeconfig and --context."""
    return Kubeconfig(args.kubeconfig, args.context)


def _namespace(args: argparse.Namespace) -> str:
    """-n, else the kubeconfig context's namespace, as kubectl picks it."""
    return str(args.namespace or context_namespace(_kubeconfig(args)))


def _doctor(args: argparse.Namespace) -> int:
    from app.diagnose.doctor.command import run

    return run(kubeconfig=_kubeconfig(args), policy_file=args.policy, output=args.output)


def _explain(args: argparse.Namespace) -> int:
    from app.diagnose.explain.command import run

    return run(
        kubeconfig=_kubeconfig(args),
        policy_file=args.policy,
        namespace=_namespace(args),
        name=args.name,
        output=args.output,
    )


def _report(args: argparse.Namespace) -> int:
    from app.diagnose.report.command import run

    return run(
        kubeconfig=_kubeconfig(args),
        policy_file=args.policy,
        namespace=None if args.all_namespaces else _namespace(args),
        output=args.output,
        headers=args.headers,
    )


def _impact(args: argparse.Namespace) -> int:
    from app.plan.impact.command import run

    return run(
        kubeconfig=_kubeconfig(args),
        policy_file=args.policy,
        namespace=None if args.all_namespaces else _namespace(args),
        output=args.output,
    )


def _capacity(args: argparse.Namespace) -> int:
    from app.plan.capacity.command import run

    return run(
        kubeconfig=_kubeconfig(args),
        policy_file=args.policy,
        output=args.output,
        headers=args.headers,
    )


def _deviceclasses(args: argparse.Namespace) -> int:
    from app.plan.deviceclasses.command import run

    return run(kubeconfig=_kubeconfig(args), profiles=args.profiles)


def _nodes(args: argparse.Namespace) -> int:
    if args.nodes_command == "plan":
        from app.plan.nodes.command import run as plan

        return plan(
            kubeconfig=_kubeconfig(args),
            policy_file=args.policy,
            output=args.output,
            headers=args.headers,
        )
    from app.core.conversion import PRESETS, Stack, parse_labels
    from app.maintain.nodes.command import run as convert

    preset = PRESETS[args.preset]
    try:
        stack = Stack(
            preset.name if not (args.dra_labels or args.plugin_labels) else "custom",
            plugin_on=parse_labels(args.plugin_labels) or preset.plugin_on,
            dra_on=parse_labels(args.dra_labels) or preset.dra_on,
        )
    except ValueError as err:
        print(f"gpu2dra: nodes convert: {err}", file=sys.stderr)
        return 1
    return convert(
        kubeconfig=_kubeconfig(args),
        policy_file=args.policy,
        nodes=args.node,
        to="device-plugin" if args.revert else "dra",
        stack=stack,
        apply=args.apply,
        timeout=args.timeout,
        all_pods=args.all_pods,
    )


def _prune_templates(args: argparse.Namespace) -> int:
    from app.maintain.prune.command import run

    return run(
        kubeconfig=_kubeconfig(args),
        namespace=None if args.all_namespaces else _namespace(args),
        apply=args.apply,
        min_age=args.min_age,
        output=args.output,
    )


def _quota(args: argparse.Namespace) -> int:
    from app.plan.quota.command import run

    return run(
        kubeconfig=_kubeconfig(args),
        policy_file=args.policy,
        filename=args.filename,
        # a file's quotas: those of every namespace it names, unless -n says one
        namespace=args.namespace if args.filename else _namespace(args),
        all_namespaces=args.all_namespaces,
    )


def _version(args: argparse.Namespace) -> int:
    from app.diagnose.version.command import run

    return run(
        kubeconfig=_kubeconfig(args),
        client=running_version(),
        client_only=args.client,
        output=args.output,
    )


def _completion(args: argparse.Namespace) -> int:
    from app.cli.completion import SCRIPTS

    sys.stdout.write(SCRIPTS[args.shell](parser()))
    return 0


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
    "capacity": _capacity,
    "deviceclasses": _deviceclasses,
    "quota": _quota,
    "nodes": _nodes,
    "prune-templates": _prune_templates,
    "version": _version,
    "completion": _completion,
}


def main(argv: list[str] | None = None) -> int:
    from app.readers.client import ReadError

    command_line = parser()
    if argv is None:
        argv = sys.argv[1:]
    if not argv and sys.stdin is not None and not sys.stdin.isatty():
        # Helm 3 runs `--post-renderer gpu2dra` with no arguments, the rendered manifests on
        # stdin, and reads them back from stdout: translate them, with the default policy.
        argv = ["translate"]
    args = command_line.parse_args(argv)
    if args.command == "serve" and (args.cert is None) != (args.key is None):
        command_line.error("serve: --cert and --key go together")
    if args.command == "exporter" and (args.tls_cert_file is None) != (args.tls_key_file is None):
        command_line.error("exporter: --tls-cert-file and --tls-key-file go together")
    if args.command == "exporter" and args.tls_cert_file and not args.secure_metrics:
        command_line.error("exporter: --tls-cert-file needs --secure-metrics")
    try:
        return COMMANDS[args.command](args)
    except (ManifestError, PolicyError, ReadError) as err:
        print(f"gpu2dra: {err}", file=sys.stderr)
        return 1

"""The doctor checks on gpu2dra's webhooks: registered, reachable over TLS with the
caBundle the API server uses, and served by ready endpoints."""

from __future__ import annotations

from app.diagnose.doctor.checks.check import Check, Reached, unreadable
from app.readers.client import ReadError
from app.readers.registrations import Registration


def check_registration(regs: list[Registration] | ReadError) -> Check:
    name = "webhooks"
    if isinstance(regs, ReadError):
        return unreadable(name, regs)
    kinds = {r.kind for r in regs}
    listed = ", ".join(f"{r.kind} {r.name}" for r in regs)
    missing = [
        k
        for k in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
        if k not in kinds
    ]
    if missing:
        return Check(
            name,
            "FAIL",
            f"no gpu2dra {' or '.join(missing)}" + (f" (found: {listed})" if listed else ""),
            "install the chart: helm install gpu2dra charts/gpu2dra -n gpu2dra-system "
            "--create-namespace",
        )
    return Check(name, "PASS", listed)


def check_tls(regs: list[Registration] | ReadError, reached: list[Reached]) -> Check:
    name = "webhook-tls"
    if isinstance(regs, ReadError):
        return unreadable(name, regs)
    if not regs:
        return Check(name, "FAIL", "no webhook configuration to check", "install the chart")
    bad = [r for r in reached if r.problem]
    if bad:
        return Check(
            name,
            "FAIL",
            "; ".join(f"{', '.join(r.configurations)} -> {r.endpoint}: {r.problem}" for r in bad)
            + ": the API server cannot call gpu2dra, so pods are admitted untranslated",
            "set the webhooks' caBundle to the CA that signed gpu2dra's serving certificate "
            "(chart value tls.caBundle, or let tls.mode=helm or cert-manager manage both)",
        )
    away = [r for r in reached if r.unreachable]
    if away:
        return Check(
            name,
            "WARN",
            "; ".join(f"{r.endpoint}: {r.unreachable}" for r in away),
            "run gpu2dra doctor inside the cluster to verify the caBundle against the server",
        )
    endpoints = ", ".join(str(r.endpoint) for r in reached)
    return Check(name, "PASS", f"the caBundle verifies the serving certificate of {endpoints}")


def check_endpoints(
    regs: list[Registration] | ReadError,
    ready: dict[tuple[str, str], int | ReadError],
    reached: list[Reached],
) -> Check:
    name = "webhook-service"
    if isinstance(regs, ReadError):
        return unreadable(name, regs)
    if not regs:
        return Check(name, "FAIL", "no webhook configuration to check", "install the chart")
    problems: list[str] = []
    fine: list[str] = []
    for (namespace, service), count in sorted(ready.items()):
        if isinstance(count, ReadError):
            return unreadable(name, count)
        (fine if count else problems).append(
            f"Service {namespace}/{service}: {count} ready endpoint(s)"
        )
    urls = [r for r in reached if not r.endpoint.server_name.endswith(".svc")]
    for r in urls:
        text = f"URL {r.endpoint}: " + ("answers TLS" if not r.unreachable else r.unreachable)
        (problems if r.unreachable else fine).append(text)
    if problems:
        return Check(
            name,
            "FAIL",
            "; ".join(problems) + ": the webhook is down (failurePolicy Ignore admits pods "
            "untranslated)",
            "kubectl -n <namespace> get pods,endpointslices: start gpu2dra's pods",
        )
    return Check(name, "PASS", "; ".join(fine) or "no Service (reached by URL)")

"""The doctor checks on gpu2dra's webhooks: registered, reachable over TLS with the
caBundle the API server uses, and served by ready endpoints."""

from __future__ import annotations

from app.core.policy import Policy
from app.diagnose.doctor.checks.verdict import Verdict, unreadable
from app.diagnose.doctor.facts import Facts
from app.readers.client import ReadError


def check_webhooks(facts: Facts, policy: Policy) -> Verdict:
    regs = facts.registrations
    if isinstance(regs, ReadError):
        return unreadable(regs)
    kinds = {r.kind for r in regs}
    listed = ", ".join(f"{r.kind} {r.name}" for r in regs)
    missing = [
        k
        for k in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
        if k not in kinds
    ]
    if missing:
        return Verdict(
            "FAIL",
            f"no gpu2dra {' or '.join(missing)}" + (f" (found: {listed})" if listed else ""),
            "install the chart: helm install gpu2dra charts/gpu2dra -n gpu2dra-system "
            "--create-namespace",
        )
    return Verdict("PASS", listed)


def check_webhook_tls(facts: Facts, policy: Policy) -> Verdict:
    regs, reached = facts.registrations, facts.tls
    if isinstance(regs, ReadError):
        return unreadable(regs)
    if not regs:
        return Verdict("FAIL", "no webhook configuration to check", "install the chart")
    bad = [r for r in reached if r.problem]
    if bad:
        return Verdict(
            "FAIL",
            "; ".join(f"{', '.join(r.configurations)} -> {r.endpoint}: {r.problem}" for r in bad)
            + ": the API server cannot call gpu2dra, so pods are admitted untranslated",
            "set the webhooks' caBundle to the CA that signed gpu2dra's serving certificate "
            "(chart value tls.caBundle, or let tls.mode=helm or cert-manager manage both)",
        )
    away = [r for r in reached if r.unreachable]
    if away:
        return Verdict(
            "WARN",
            "; ".join(f"{r.endpoint}: {r.unreachable}" for r in away),
            "run gpu2dra doctor inside the cluster to verify the caBundle against the server",
        )
    endpoints = ", ".join(str(r.endpoint) for r in reached)
    return Verdict("PASS", f"the caBundle verifies the serving certificate of {endpoints}")


def check_webhook_service(facts: Facts, policy: Policy) -> Verdict:
    regs, ready, reached = facts.registrations, facts.ready_endpoints, facts.tls
    if isinstance(regs, ReadError):
        return unreadable(regs)
    if not regs:
        return Verdict("FAIL", "no webhook configuration to check", "install the chart")
    problems: list[str] = []
    fine: list[str] = []
    for (namespace, service), count in sorted(ready.items()):
        if isinstance(count, ReadError):
            return unreadable(count)
        (fine if count else problems).append(
            f"Service {namespace}/{service}: {count} ready endpoint(s)"
        )
    urls = [r for r in reached if not r.endpoint.server_name.endswith(".svc")]
    for r in urls:
        text = f"URL {r.endpoint}: " + ("answers TLS" if not r.unreachable else r.unreachable)
        (problems if r.unreachable else fine).append(text)
    if problems:
        return Verdict(
            "FAIL",
            "; ".join(problems) + ": the webhook is down (failurePolicy Ignore admits pods "
            "untranslated)",
            "kubectl -n <namespace> get pods,endpointslices: start gpu2dra's pods",
        )
    return Verdict("PASS", "; ".join(fine) or "no Service (reached by URL)")

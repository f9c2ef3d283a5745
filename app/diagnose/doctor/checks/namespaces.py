"""The doctor check on namespaces: how many gpu2dra translates in, audits, leaves alone."""

from __future__ import annotations

from collections import Counter

from app.core.policy import MODE_LABEL, MODES, Policy
from app.core.scope import NEVER_CHANGED, namespace_mode
from app.diagnose.doctor.checks.verdict import Verdict, unreadable
from app.diagnose.doctor.facts import Facts
from app.readers.client import ReadError


def check_namespaces(facts: Facts, policy: Policy) -> Verdict:
    namespaces = facts.namespaces
    if isinstance(namespaces, ReadError):
        return unreadable(namespaces)
    counts: Counter[str] = Counter(namespace_mode(ns, policy) for ns in namespaces)
    text = ", ".join(f"{counts[m]} {m}" for m in (*MODES, NEVER_CHANGED))
    return Verdict(
        "PASS",
        f"{text} (label {MODE_LABEL}; default {policy.default_mode})",
    )

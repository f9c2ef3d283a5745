"""The doctor check on namespaces: how many gpu2dra translates in, audits, leaves alone."""

from __future__ import annotations

from collections import Counter

from app.core.policy import MODE_LABEL, MODES, Policy
from app.core.scope import NEVER_CHANGED, namespace_mode
from app.diagnose.doctor.checks.check import Check, unreadable
from app.readers.client import Listed, ReadError


def check_namespaces(namespaces: Listed, policy: Policy) -> Check:
    name = "namespaces"
    if isinstance(namespaces, ReadError):
        return unreadable(name, namespaces)
    counts: Counter[str] = Counter(namespace_mode(ns, policy) for ns in namespaces)
    text = ", ".join(f"{counts[m]} {m}" for m in (*MODES, NEVER_CHANGED))
    return Check(
        name,
        "PASS",
        f"{text} (label {MODE_LABEL}; default {policy.default_mode})",
    )

"""A doctor check's verdict, the verdict under the check's name as doctor prints it, and the
one way a check says it could not read what it judges."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from typing import Literal

from app.diagnose.doctor.facts import NotServed
from app.readers.client import ReadError, cannot_read

Status = Literal["PASS", "WARN", "FAIL"]
READ_FIX = "grant read access (the chart's readOnlyRole.create=true ClusterRole)"


@dataclass(frozen=True, slots=True)
class Verdict:
    """What a check finds; the registry (checks/__init__.py) names it."""

    status: Status
    summary: str
    fix: str = ""
    details: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Check:
    """A verdict under the name of the check that gave it: a line of doctor's output."""

    name: str
    status: Status
    summary: str
    _: KW_ONLY
    fix: str = ""
    details: tuple[str, ...] = ()

    @classmethod
    def named(cls, name: str, verdict: Verdict) -> Check:
        return cls(
            name=name,
            status=verdict.status,
            summary=verdict.summary,
            fix=verdict.fix,
            details=verdict.details,
        )


def unreadable(err: ReadError) -> Verdict:
    """The check's WARN when what it judges could not be read."""
    if isinstance(err, NotServed):
        return Verdict("WARN", f"not checked: {err}", "see the kubernetes check")
    return Verdict("WARN", cannot_read(err), READ_FIX)

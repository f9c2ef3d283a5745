"""One line of `explain`'s answer: its state and what it says, with details below it; and the
one way a step says what could not be read."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from app.readers.client import ReadError, cannot_read

# The words doctor uses for its checks, and info for what is neither right nor wrong.
State = Literal["PASS", "FAIL", "WARN", "info"]


class StepCode(StrEnum):
    """What a step found that a later step reads: explain branches on it, not on words."""

    CLAIM_OVER_QUOTA = "claim-over-quota"  # the namespace's ResourceQuota refuses a claim
    TEMPLATE_MISSING = "template-missing"  # no claim can be made: its template is gone


@dataclass(frozen=True, slots=True)
class Step:
    state: State
    text: str
    details: tuple[str, ...] = ()
    code: StepCode | None = None


def unreadable_step(what: str, err: ReadError) -> Step:
    """The step's WARN when what it explains could not be read."""
    return Step("WARN", cannot_read(err, what))

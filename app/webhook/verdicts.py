"""What admission decides: a result for metrics and logs, and the answer that says it.
Verdicts carry no uid: the endpoint stamps it once, where the answer is encoded."""

from __future__ import annotations

from collections.abc import Coroutine, Iterable
from typing import Any, Literal, NamedTuple

from app.core.outcomes import Code
from app.webhook.reviews import Answer, allowed, denied

# "quota": left on the device plugin, because translating would lift a GPU quota;
# "reapplied": an update that re-added what gpu2dra replaced, patched back to a no-op.
Result = Literal["patched", "audit", "allowed", "denied", "quota", "reapplied"]


class Verdict(NamedTuple):
    """What admission decided, and the answer that says it: metrics and logs read `result`
    and `codes` (why a pod was left or what its translation changed), never the keys or the
    words of the encoded answer."""

    result: Result
    response: Answer
    codes: tuple[Code, ...] = ()


def allow(warnings: Iterable[str] = (), codes: tuple[Code, ...] = ()) -> Verdict:
    return Verdict("allowed", allowed(warnings), codes)


def deny(
    message: str, code: int = 403, warnings: Iterable[str] = (), codes: tuple[Code, ...] = ()
) -> Verdict:
    return Verdict("denied", denied(message, code=code, warnings=warnings), codes)


# The verdict, or, only when the API server must be asked first, a coroutine that gives it:
# most answers need no await, and so no timer for the deadline either.
Decision = Verdict | Coroutine[Any, Any, Verdict]

"""The outcome codes: one message each, and a Finding that keeps its code."""

from __future__ import annotations

import copy
import pickle
import string

from app.core.outcomes import Code, Finding, codes


def test_every_code_is_its_own() -> None:
    # Two members of one value would be aliases: the second code would vanish from the docs,
    # the metrics and every test that names it.
    assert len(Code.__members__) == len(list(Code))
    assert all(c.kind in ("left", "translated", "note") for c in Code)


def test_every_message_formats_with_its_own_fields() -> None:
    for code in Code:
        fields = {f: s for _, f, s, _ in string.Formatter().parse(code.message) if f}
        finding = Finding(code, **{f: 1 if spec else "x" for f, spec in fields.items()})
        assert finding.code is code
        assert "{" not in finding, code


def test_codes_are_kept_once_in_order_and_plain_text_has_none() -> None:
    quota = Finding(Code.QUOTA, found="q", fix="f")
    late = Finding(Code.LATE, seconds=2.5)
    assert late == "gpu2dra did not answer within 2.5s"
    assert codes([late, "plain text", quota, late]) == (Code.LATE, Code.QUOTA)


def test_a_finding_copied_or_pickled_keeps_its_code() -> None:
    finding = Finding(Code.NO_LIMIT, who="container 'c'", resource="nvidia.com/gpu")
    for again in (copy.deepcopy(finding), copy.copy(finding), pickle.loads(pickle.dumps(finding))):
        assert again == finding and again.code is Code.NO_LIMIT

"""What `gpu2dra translate --strict` counts: each document (a List's items each) translated,
left as it is though its pods ask for GPUs, or unchanged, and why those left were left."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from app.core.outcomes import Code
from app.core.policy import Policy
from app.core.resources import containers, legacy_amounts
from app.manifests.documents import Note, is_list
from app.manifests.podspecs import pod_specs, singular_containers


@dataclass
class Tally:
    translated: int = 0
    left: int = 0
    unchanged: int = 0
    reasons: Counter[str] = field(default_factory=Counter)  # outcome code -> documents left

    @property
    def documents(self) -> int:
        return self.translated + self.left + self.unchanged

    def add(self, other: Tally) -> None:
        self.translated += other.translated
        self.left += other.left
        self.unchanged += other.unchanged
        self.reasons.update(other.reasons)

    def __str__(self) -> str:
        """`12 documents: 7 translated, 3 left (no-rule 2, shared-count 1), 2 unchanged`"""
        why = ", ".join(f"{code} {n}" for code, n in sorted(self.reasons.items()))
        left = f"{self.left} left ({why})" if why else f"{self.left} left"
        plural = "" if self.documents == 1 else "s"
        return (
            f"{self.documents} document{plural}: {self.translated} translated, {left}, "
            f"{self.unchanged} unchanged"
        )


def tally(before: list[Any], after: list[Any], notes: list[Note], policy: Policy) -> Tally:
    """`before` and `after` translate_documents, with its notes (numbered from 1)."""
    pairs: list[tuple[Any, Any]] = []
    for doc, out in zip(before, after, strict=True):
        if is_list(doc):
            items = out["items"] if is_list(out) else doc["items"]
            pairs.extend(zip(doc["items"], items, strict=True))
        else:
            pairs.append((doc, out))
    codes: dict[int, list[Code]] = {}
    for note in notes:
        codes.setdefault(note.document, []).append(note.text.code)
    out = Tally()
    for number, (doc, translated) in enumerate(pairs, 1):
        found = codes.get(number, [])
        if translated is not doc:
            out.translated += 1
        elif any(code.kind == "left" for code in found) or _asks(doc, policy):
            out.left += 1
            why = [str(code) for code in found if code.kind == "left"] or list(map(str, found))
            out.reasons.update(dict.fromkeys(why or ["not-translated"], 1))
        else:
            out.unchanged += 1
    return out


def _asks(doc: Any, policy: Policy) -> bool:
    def asks(container: Any) -> list[str]:
        return sorted(legacy_amounts(container, policy))

    in_specs = any(asks(c) for spec in pod_specs(doc) for _, _, c in containers(spec))
    return in_specs or bool(singular_containers(doc, asks))

"""Semantic versions as the API server's CEL library reads them (github.com/blang/semver/v4)."""

from __future__ import annotations

import re
from functools import total_ordering
from typing import Any

_NUMBER = re.compile(r"0|[1-9][0-9]*")
_IDENT = re.compile(r"[0-9A-Za-z-]+")


@total_ordering
class Semver:
    """A semantic version; build metadata is kept but not compared."""

    __slots__ = ("build", "major", "minor", "patch", "pre")

    def __init__(
        self,
        major: int,
        minor: int,
        patch: int,
        *,
        pre: tuple[int | str, ...] = (),
        build: tuple[str, ...] = (),
    ) -> None:
        self.major, self.minor, self.patch, self.pre, self.build = major, minor, patch, pre, build

    def _key(self) -> tuple[Any, ...]:
        # A release sorts after its pre-releases; numeric identifiers before alphanumeric ones.
        pre = tuple((0, p, "") if isinstance(p, int) else (1, 0, p) for p in self.pre)
        return (self.major, self.minor, self.patch, not self.pre, pre)

    def compare(self, other: Semver) -> int:
        a, b = self._key(), other._key()
        return (a > b) - (a < b)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Semver):
            raise TypeError(f"no such overload: semver == {type(other).__name__}")
        return self.compare(other) == 0

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Semver):
            raise TypeError(f"no such overload: semver < {type(other).__name__}")
        return self.compare(other) < 0

    def __hash__(self) -> int:
        return hash(self._key())

    def __str__(self) -> str:
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.pre:
            text += "-" + ".".join(map(str, self.pre))
        if self.build:
            text += "+" + ".".join(self.build)
        return text

    def __repr__(self) -> str:
        return f"semver({str(self)!r})"


def parse_semver(text: str, normalize: bool = False) -> Semver:
    """`550.107.2`, `1.0.0-rc.1+build`; with `normalize`, `v1.2` and `01.2.3` too."""
    if normalize:
        text = _normalize(text)
    parts = text.split(".", 2)
    if len(parts) != 3:
        raise ValueError(f"semver {str(text)!r}: no Major.Minor.Patch elements found")
    rest, build = parts[2], ""
    if "+" in rest:
        rest, build = rest.split("+", 1)
    patch, pre = rest.split("-", 1) if "-" in rest else (rest, None)
    numbers = (parts[0], parts[1], patch)
    if not all(_NUMBER.fullmatch(n) for n in numbers):
        raise ValueError(
            f"semver {str(text)!r}: major, minor, patch: numbers without leading zeroes"
        )
    idents: list[int | str] = []
    for ident in pre.split(".") if pre is not None else []:
        if ident.isdigit() and ident.isascii() and _NUMBER.fullmatch(ident):
            idents.append(int(ident))
        elif _IDENT.fullmatch(ident) and not ident.isdigit():
            idents.append(ident)
        else:
            raise ValueError(f"semver {str(text)!r}: invalid pre-release identifier {ident!r}")
    builds = tuple(build.split(".")) if "+" in text else ()
    if any(not _IDENT.fullmatch(b) for b in builds):
        raise ValueError(f"semver {str(text)!r}: invalid build metadata")
    major, minor, patch_number = (int(n) for n in numbers)
    return Semver(major, minor, patch_number, pre=tuple(idents), build=builds)


def _normalize(text: str) -> str:
    parts = text.removeprefix("v").split(".", 2)
    parts = [p.lstrip("0") if len(p) > 1 else p for p in parts]
    parts = [p if p[:1].isdigit() else "0" + p for p in parts]
    if len(parts) < 3:
        if any(c in parts[-1] for c in "+-"):
            raise ValueError(
                f"semver {str(text)!r}: a short version cannot carry pre-release or build"
            )
        parts += ["0"] * (3 - len(parts))
    return ".".join(parts)

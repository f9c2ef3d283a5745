"""The functions Kubernetes adds to CEL: `quantity()`, `semver()` and their methods, and the
string extensions of cel-go (`replace`, `lowerAscii`, ...)."""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

from celpy import celtypes
from celpy.evaluation import CELEvalError

from app.core.quantity import INT64_MAX, Quantity, parse_quantity
from app.readers.cel.semver import Semver, parse_semver


class CelQuantity(Quantity):
    """A quantity as CEL sees it: compared with anything but a quantity, it is CEL's "no such
    overload" error (as in the scheduler), not Python's False."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            raise TypeError(f"no such overload: quantity == {type(other).__name__}")
        return self.value == other.value

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = Quantity.__hash__


def cel_quantity(text: str) -> CelQuantity:
    """`quantity(text)`: ValueError when Kubernetes would not accept it."""
    return CelQuantity(parse_quantity(text).value, text)


def _error(message: str) -> CELEvalError:
    return CELEvalError(message, ValueError, None)


def _parsed(parse: Callable[[str], Any], text: Any, *args: Any) -> Any:
    if not isinstance(text, str):
        raise TypeError("no such overload")
    try:
        return parse(text, *args)
    except ValueError as err:
        return _error(str(err))


def _is(parse: Callable[..., Any], text: Any, *args: Any) -> celtypes.BoolType:
    if not isinstance(text, str):
        raise TypeError("no such overload")
    try:
        parse(text, *args)
    except ValueError:
        return celtypes.BoolType(False)
    return celtypes.BoolType(True)


def _same(a: Any, b: Any) -> int:
    if isinstance(a, Quantity) and isinstance(b, Quantity):
        return a.compare(b)
    if isinstance(a, Semver) and isinstance(b, Semver):
        return a.compare(b)
    raise TypeError("no such overload")


def _quantity_arg(q: Any, other: Any) -> Fraction:
    if not isinstance(q, Quantity):
        raise TypeError("no such overload")
    if isinstance(other, Quantity):
        return other.value
    if isinstance(other, int) and not isinstance(other, bool):
        return Fraction(int(other))
    raise TypeError("no such overload")


def _as_integer(q: Any) -> Any:
    if not isinstance(q, Quantity):
        raise TypeError("no such overload")
    if q.value.denominator != 1 or abs(q.value) > INT64_MAX:
        return _error("cannot convert value to integer")
    return celtypes.IntType(q.value.numerator)


def _semver_part(part: str) -> Callable[[Any], celtypes.IntType]:
    def get(v: Any) -> celtypes.IntType:
        if not isinstance(v, Semver):
            raise TypeError("no such overload")
        return celtypes.IntType(getattr(v, part))

    return get


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError("no such overload")
    return value


def _replace(s: Any, old: Any, new: Any, n: Any = -1) -> celtypes.StringType:
    # Go's strings.Replace: a negative count replaces all.
    count = int(n)
    return celtypes.StringType(_text(s).replace(_text(old), _text(new), -1 if count < 0 else count))


def _ascii(convert: Callable[[str], str]) -> Callable[[Any], celtypes.StringType]:
    def run(s: Any) -> celtypes.StringType:
        return celtypes.StringType("".join(convert(c) if c.isascii() else c for c in _text(s)))

    return run


def _split(s: Any, sep: Any, n: Any = -1) -> Any:
    text, separator, limit = _text(s), _text(sep), int(n)
    if limit == 0:
        return celtypes.ListType([])
    if separator == "":
        parts = list(text)
        if limit > 0 and len(parts) > limit:
            parts = [*parts[: limit - 1], "".join(parts[limit - 1 :])]
    else:
        parts = text.split(separator, limit - 1 if limit > 0 else -1)
    return celtypes.ListType([celtypes.StringType(p) for p in parts])


def _substring(s: Any, start: Any, end: Any = None) -> Any:
    text = _text(s)
    stop = len(text) if end is None else int(end)
    if not 0 <= int(start) <= stop <= len(text):
        return _error(f"substring: index out of range: {int(start)}..{stop} of {len(text)}")
    return celtypes.StringType(text[int(start) : stop])


def _index_of(s: Any, sub: Any, offset: Any = 0) -> Any:
    text, at = _text(s), int(offset)
    if not 0 <= at <= len(text):
        return _error(f"indexOf: index out of range: {at}")
    return celtypes.IntType(text.find(_text(sub), at))


def _char_at(s: Any, i: Any) -> Any:
    # cel-go: the index just past the end gives "".
    return _substring(s, i, min(int(i) + 1, len(_text(s))))


def _join(items: Any, sep: Any = "") -> celtypes.StringType:
    if not isinstance(items, list):
        raise TypeError("no such overload")
    return celtypes.StringType(_text(sep).join(_text(i) for i in items))


FUNCTIONS: dict[str, Callable[..., Any]] = {
    # k8s.io/apiserver/pkg/cel/library: quantity and semver
    "quantity": lambda s: _parsed(cel_quantity, s),
    "isQuantity": lambda s: _is(parse_quantity, s),
    "semver": lambda s, normalize=False: _parsed(parse_semver, s, bool(normalize)),
    "isSemver": lambda s, normalize=False: _is(parse_semver, s, bool(normalize)),
    "compareTo": lambda a, b: celtypes.IntType(_same(a, b)),
    "isGreaterThan": lambda a, b: celtypes.BoolType(_same(a, b) > 0),
    "isLessThan": lambda a, b: celtypes.BoolType(_same(a, b) < 0),
    "major": _semver_part("major"),
    "minor": _semver_part("minor"),
    "patch": _semver_part("patch"),
    "add": lambda q, o: CelQuantity(q.value + _quantity_arg(q, o)),
    "sub": lambda q, o: CelQuantity(q.value - _quantity_arg(q, o)),
    "asInteger": _as_integer,
    "isInteger": lambda q: celtypes.BoolType(not isinstance(_as_integer(q), CELEvalError)),
    "asApproximateFloat": lambda q: celtypes.DoubleType(float(_quantity_arg(q, q))),
    "sign": lambda q: celtypes.IntType((_quantity_arg(q, q) > 0) - (q.value < 0)),
    # cel-go ext.Strings
    "replace": _replace,
    "lowerAscii": _ascii(str.lower),
    "upperAscii": _ascii(str.upper),
    "trim": lambda s: celtypes.StringType(_text(s).strip()),
    "split": _split,
    "substring": _substring,
    "indexOf": _index_of,
    "lastIndexOf": lambda s, sub: celtypes.IntType(_text(s).rfind(_text(sub))),
    "charAt": _char_at,
    "join": _join,
}

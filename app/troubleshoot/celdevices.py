"""DRA device selectors evaluated the way the scheduler evaluates them.

A selector is CEL over one variable, `device`, built from a ResourceSlice device as
k8s.io/dynamic-resource-allocation/cel does it:

- `device.driver`: the slice's driver;
- `device.attributes['<domain>'].<id>`: an attribute named `<domain>/<id>` in the slice, or
  just `<id>`, whose domain is then the driver's; its value typed by its kind (string, int,
  bool, version -> a semver value);
- `device.capacity['<domain>'].<id>`: a Kubernetes quantity;
- an unknown domain gives an empty map, so `device.attributes['other.com'].x` is a
  "no such key" error: the scheduler aborts the allocation with a CEL runtime error.

The CEL language is cel-python's; what Kubernetes adds is here: `quantity()`, `semver()`
and their methods, and the string extensions (`replace`, `lowerAscii`, ...). Not supported:
the `cel.bind()` macro, static type checking and cost limits (the API server already checked
every stored expression).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache, total_ordering
from math import ceil
from typing import Any

import celpy
from celpy import celtypes
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError

from app.core.kube import Obj

# cel-python logs failed function calls at ERROR; a selector that errors is a result here.
logging.getLogger("celpy").setLevel(logging.CRITICAL)


class SelectorError(ValueError):
    """A selector that cannot be compiled, fails at run time, or is not a bool."""


# ---- Kubernetes quantities (k8s.io/apimachinery resource.ParseQuantity) -------------------

_QUANTITY = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?([eEinumkKMGTP]*[+-]?[0-9]*)")
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_INT64_MAX = 2**63 - 1
_NANO = Fraction(1, 10**9)


class Quantity:
    """An exact quantity; compared and added like resource.Quantity."""

    __slots__ = ("text", "value")

    def __init__(self, value: Fraction, text: str | None = None) -> None:
        self.value = value
        self.text = text if text is not None else _format(value)

    def compare(self, other: Quantity) -> int:
        return (self.value > other.value) - (self.value < other.value)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            raise TypeError(f"no such overload: quantity == {type(other).__name__}")
        return self.value == other.value

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(self.value)

    def __repr__(self) -> str:
        return f"quantity({self.text!r})"


def _format(value: Fraction) -> str:
    if value.denominator == 1:
        return str(value.numerator)
    return f"{ceil(value / _NANO)}n"


def parse_quantity(text: str) -> Quantity:
    """`40Gi`, `1.5`, `500m`, `1e3`: ValueError when Kubernetes would not accept it."""
    match = _QUANTITY.fullmatch(text)
    if not text or match is None or (not match[2] and match[3] is None):
        raise ValueError(f"quantity {str(text)!r}: not a number with an optional suffix")
    sign, whole, fraction, suffix = match[1], match[2] or "0", match[3] or "", match[4]
    number = Fraction(int(whole + fraction), 10 ** len(fraction))
    binary = False
    if suffix in _DECIMAL:
        number *= Fraction(10) ** _DECIMAL[suffix]
    elif suffix in _BINARY:
        number *= 2 ** _BINARY[suffix]
        binary = True
    elif len(suffix) > 1 and suffix[0] in "eE" and re.fullmatch(r"[+-]?[0-9]+", suffix[1:]):
        number *= Fraction(10) ** int(suffix[1:])
    else:
        raise ValueError(f"quantity {str(text)!r}: unable to parse quantity's suffix")
    # Kubernetes rounds up to a whole nano, and caps binary quantities at the int64 maximum.
    if number.denominator != 1 and number % _NANO:
        number = ceil(number / _NANO) * _NANO
    if binary and number > _INT64_MAX:
        number = Fraction(_INT64_MAX)
    return Quantity(-number if sign == "-" else number, text)


# ---- semantic versions (github.com/blang/semver/v4, as the apiserver's CEL library) -------

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
    return Semver(major, minor, patch_number, tuple(idents), builds)


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


# ---- the functions Kubernetes adds to CEL ------------------------------------------------


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
    if q.value.denominator != 1 or abs(q.value) > _INT64_MAX:
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
    "quantity": lambda s: _parsed(parse_quantity, s),
    "isQuantity": lambda s: _is(parse_quantity, s),
    "semver": lambda s, normalize=False: _parsed(parse_semver, s, bool(normalize)),
    "isSemver": lambda s, normalize=False: _is(parse_semver, s, bool(normalize)),
    "compareTo": lambda a, b: celtypes.IntType(_same(a, b)),
    "isGreaterThan": lambda a, b: celtypes.BoolType(_same(a, b) > 0),
    "isLessThan": lambda a, b: celtypes.BoolType(_same(a, b) < 0),
    "major": _semver_part("major"),
    "minor": _semver_part("minor"),
    "patch": _semver_part("patch"),
    "add": lambda q, o: Quantity(q.value + _quantity_arg(q, o)),
    "sub": lambda q, o: Quantity(q.value - _quantity_arg(q, o)),
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


# ---- devices -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, eq=False)
class Device:
    """One device of a ResourceSlice, with what a selector can see of it; the same device
    as another when driver, pool and name are."""

    driver: str
    pool: str
    name: str
    node: str  # the slice's nodeName; "" for devices not bound to one node
    attributes: Mapping[str, Any] = field(default_factory=dict)
    capacity: Mapping[str, Any] = field(default_factory=dict)
    allow_multiple: bool = False

    @property
    def key(self) -> tuple[str, str, str]:
        """How allocation results name it: driver, pool, device."""
        return self.driver, self.pool, self.name

    @property
    def ref(self) -> str:
        return f"{self.driver}/{self.pool}/{self.name}"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Device) and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)


def devices_of(slices: Iterable[Obj]) -> list[Device]:
    """The devices of the newest generation of every pool, as the scheduler sees them."""
    newest: dict[tuple[str, str], int] = {}
    items = [s for s in slices if isinstance(s.get("spec"), dict)]
    for s in items:
        spec = s["spec"]
        pool = spec.get("pool") or {}
        key = (str(spec.get("driver", "")), str(pool.get("name", "")))
        newest[key] = max(newest.get(key, 0), int(pool.get("generation") or 0))
    found = []
    for s in items:
        spec = s["spec"]
        pool = spec.get("pool") or {}
        driver, pool_name = str(spec.get("driver", "")), str(pool.get("name", ""))
        if int(pool.get("generation") or 0) != newest[driver, pool_name]:
            continue  # a stale slice of a pool being republished
        for dev in spec.get("devices") or []:
            # v1 devices carry their fields directly; v1beta1 nests them under `basic`.
            body = dev.get("basic") if isinstance(dev.get("basic"), dict) else dev
            found.append(
                Device(
                    driver=driver,
                    pool=pool_name,
                    name=str(dev.get("name", "")),
                    node=str(spec.get("nodeName") or ""),
                    attributes=body.get("attributes") or {},
                    capacity=body.get("capacity") or {},
                    allow_multiple=bool(body.get("allowMultipleAllocations")),
                )
            )
    return found


class _Domains(celtypes.MapType):
    """`device.attributes` / `device.capacity`: an unknown domain is an empty map."""

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str) and not dict.__contains__(self, key):
            return celtypes.MapType()
        return super().__getitem__(key)


def _attribute(name: str, value: Any) -> Any:
    if not isinstance(value, dict):
        raise SelectorError(f"attribute {name}: not a typed value")
    if "bool" in value:
        return celtypes.BoolType(bool(value["bool"]))
    if "int" in value:
        return celtypes.IntType(int(value["int"]))
    if "string" in value:
        return celtypes.StringType(str(value["string"]))
    if "version" in value:
        try:
            return parse_semver(str(value["version"]))
        except ValueError as err:
            raise SelectorError(f"attribute {name}: parse semantic version: {err}") from None
    raise SelectorError(f"attribute {name}: unsupported attribute value")


def _qualified(name: str, driver: str) -> tuple[str, str]:
    domain, sep, ident = name.partition("/")
    return (domain, ident) if sep else (driver, name)


def _cel_device(device: Device) -> celtypes.MapType:
    attributes: dict[str, dict[str, Any]] = {}
    for name, value in device.attributes.items():
        domain, ident = _qualified(name, device.driver)
        attributes.setdefault(domain, {})[ident] = _attribute(name, value)
    capacity: dict[str, dict[str, Any]] = {}
    for name, value in device.capacity.items():
        domain, ident = _qualified(name, device.driver)
        raw = value.get("value") if isinstance(value, dict) else value
        try:
            capacity.setdefault(domain, {})[ident] = parse_quantity(str(raw))
        except ValueError as err:
            raise SelectorError(f"capacity {name}: {err}") from None

    def domains(found: dict[str, dict[str, Any]]) -> _Domains:
        return _Domains(
            {
                celtypes.StringType(d): celtypes.MapType(
                    {celtypes.StringType(k): v for k, v in ids.items()}
                )
                for d, ids in found.items()
            }
        )

    return celtypes.MapType(
        {
            celtypes.StringType("driver"): celtypes.StringType(device.driver),
            celtypes.StringType("allowMultipleAllocations"): celtypes.BoolType(
                device.allow_multiple
            ),
            celtypes.StringType("attributes"): domains(attributes),
            celtypes.StringType("capacity"): domains(capacity),
        }
    )


_ENV = celpy.Environment()


@lru_cache(maxsize=1024)
def _program(expression: str) -> celpy.Runner:
    if "cel.bind(" in expression.replace(" ", ""):
        raise SelectorError("cel.bind() is not supported by gpu2dra's CEL evaluator (cel-python)")
    try:
        return _ENV.program(_ENV.compile(expression), functions=FUNCTIONS)
    except CELParseError as err:
        where = f" at column {err.column}" if err.column else ""
        raise SelectorError(f"syntax error{where}") from None


def matches(expression: str, device: Device) -> bool:
    """Whether the selector selects `device`; SelectorError when the scheduler would fail."""
    program = _program(expression)
    try:
        result = program.evaluate({"device": _cel_device(device)})
    except CELEvalError as err:
        raise SelectorError(_message(err)) from None
    except (TypeError, ValueError, KeyError, AttributeError, ArithmeticError) as err:
        raise SelectorError(str(err) or type(err).__name__) from None
    if isinstance(result, CELEvalError):
        raise SelectorError(_message(result))
    if not isinstance(result, celtypes.BoolType):
        raise SelectorError(f"the result is {type(result).__name__.removesuffix('Type')}, not bool")
    return bool(result)


def _message(err: CELEvalError) -> str:
    message = str(err.args[0]) if err.args else "CEL error"
    if missing := re.fullmatch(r"no such member in mapping: '(.*)'", message):
        return f"no such key: {missing[1]}"  # cel-go's words, as the scheduler reports them
    if message.startswith("found no matching overload"):
        return "no such overload"
    cause = err.args[2] if len(err.args) > 2 else None
    if message == "no such overload" and cause:
        return f"no such overload: {cause[0] if isinstance(cause, tuple) else cause}"
    return message


def selects(device: Device, expressions: Iterable[str]) -> bool:
    """All the selectors select `device` (the first false one stops, as in the scheduler)."""
    return all(matches(e, device) for e in expressions)


def class_selectors(device_class: Obj) -> list[str]:
    """The CEL expressions of a DeviceClass."""
    spec = device_class.get("spec") or {}
    return [
        s["cel"]["expression"]
        for s in spec.get("selectors") or []
        if isinstance(s, dict) and isinstance(s.get("cel"), dict) and "expression" in s["cel"]
    ]


@dataclass(frozen=True, slots=True)
class Selection:
    """The devices all the selectors select, and those on which a selector failed."""

    selected: tuple[Device, ...]
    errors: tuple[tuple[Device, str], ...]


def select(devices: Iterable[Device], expressions: Iterable[str]) -> Selection:
    exprs = list(expressions)
    selected, errors = [], []
    for device in devices:
        try:
            if selects(device, exprs):
                selected.append(device)
        except SelectorError as err:
            errors.append((device, str(err)))
    return Selection(tuple(selected), tuple(errors))

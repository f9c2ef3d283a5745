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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import celpy
from celpy import celtypes
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError

from app.core.kube import Obj, cel_expressions
from app.readers.cel.functions import FUNCTIONS, cel_quantity
from app.readers.cel.semver import parse_semver

# cel-python logs failed function calls at ERROR; a selector that errors is a result here.
logging.getLogger("celpy").setLevel(logging.CRITICAL)


class SelectorError(ValueError):
    """A selector that cannot be compiled, fails at run time, or is not a bool."""


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
    consumes: tuple[Mapping[str, Any], ...] = ()  # consumesCounters: {counterSet, counters}
    counter_sets: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # the pool's

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


def _newest(items: list[Obj]) -> dict[tuple[str, str], int]:
    newest: dict[tuple[str, str], int] = {}
    for s in items:
        spec = s["spec"]
        pool = spec.get("pool") or {}
        key = (str(spec.get("driver", "")), str(pool.get("name", "")))
        newest[key] = max(newest.get(key, 0), int(pool.get("generation") or 0))
    return newest


def _pool_slices(slices: Iterable[Obj]) -> list[tuple[str, str, Obj]]:
    """driver, pool name and spec of each slice of the newest generation of its pool."""
    items = [s for s in slices if isinstance(s.get("spec"), dict)]
    newest = _newest(items)
    found = []
    for s in items:
        spec = s["spec"]
        pool = spec.get("pool") or {}
        driver, pool_name = str(spec.get("driver", "")), str(pool.get("name", ""))
        if int(pool.get("generation") or 0) == newest[driver, pool_name]:
            found.append((driver, pool_name, spec))  # else a stale slice being republished
    return found


def _counter_sets(specs: list[tuple[str, str, Obj]]) -> dict[tuple[str, str], dict[str, Any]]:
    """Each pool's counter sets (`sharedCounters`, in any slice of the pool) by name."""
    sets: dict[tuple[str, str], dict[str, Any]] = {}
    for driver, pool_name, spec in specs:
        for entry in spec.get("sharedCounters") or []:
            if isinstance(entry, dict):
                counters = entry.get("counters") or {}
                sets.setdefault((driver, pool_name), {})[str(entry.get("name", ""))] = counters
    return sets


def devices_of(slices: Iterable[Obj]) -> list[Device]:
    """The devices of the newest generation of every pool, as the scheduler sees them."""
    specs = _pool_slices(slices)
    sets = _counter_sets(specs)
    found = []
    for driver, pool_name, spec in specs:
        for dev in spec.get("devices") or []:
            # v1 devices carry their fields directly; v1beta1 nests them under `basic`.
            body = dev.get("basic") if isinstance(dev.get("basic"), dict) else dev
            consumes = [c for c in body.get("consumesCounters") or [] if isinstance(c, dict)]
            found.append(
                Device(
                    driver=driver,
                    pool=pool_name,
                    name=str(dev.get("name", "")),
                    node=str(spec.get("nodeName") or ""),
                    attributes=body.get("attributes") or {},
                    capacity=body.get("capacity") or {},
                    allow_multiple=bool(body.get("allowMultipleAllocations")),
                    consumes=tuple(consumes),
                    counter_sets=sets.get((driver, pool_name), {}),
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
            capacity.setdefault(domain, {})[ident] = cel_quantity(str(raw))
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
    return list(cel_expressions((device_class.get("spec") or {}).get("selectors")))


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

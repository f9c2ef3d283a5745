"""Kubernetes quantities (k8s.io/apimachinery resource.ParseQuantity): exact, as the API
server reads `40Gi`, `1.5`, `500m` or `1e3`."""

from __future__ import annotations

import re
from fractions import Fraction
from math import ceil

_QUANTITY = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?([eEinumkKMGTP]*[+-]?[0-9]*)")
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
INT64_MAX = 2**63 - 1
_NANO = Fraction(1, 10**9)
_HUGE = 400


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
            return NotImplemented
        return self.value == other.value

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
        exponent = int(suffix[1:])
        if not -(2**31) <= exponent < 2**31:  # Kubernetes reads the exponent as an int32
            raise ValueError(f"quantity {str(text)!r}: unable to parse quantity's suffix")
        # 10**exponent in full would take minutes for an exponent in the billions; past
        # _HUGE a value is beyond every count and capacity, and below -_HUGE it rounds up to
        # the same whole nano as Kubernetes rounds it to
        number *= Fraction(10) ** max(-_HUGE, min(exponent, _HUGE))
    else:
        raise ValueError(f"quantity {str(text)!r}: unable to parse quantity's suffix")
    # Kubernetes rounds up to a whole nano, and caps binary quantities at the int64 maximum.
    if number.denominator != 1 and number % _NANO:
        number = ceil(number / _NANO) * _NANO
    if binary and number > INT64_MAX:
        number = Fraction(INT64_MAX)
    return Quantity(-number if sign == "-" else number, text)

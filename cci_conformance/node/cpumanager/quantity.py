"""Kubernetes resource quantities ("2", "500m", "1.5", "1Gi", "1e3") as exact numbers, milli-units and bytes."""

from __future__ import annotations

import math
import re
from fractions import Fraction

# The suffixes of k8s.io/apimachinery/pkg/api/resource (quantity.go, suffix.go): binary SI,
# decimal SI, and a decimal exponent ("e3", "E-2").
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_SYNTAX = re.compile(r"^([+-]?)(\d+\.?\d*|\.\d+)(.*)$")
_EXPONENT = re.compile(r"^[eE]([+-]?\d+)$")


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity, or not one usable for the resource."""


def parse_quantity(text: str, *, what: str = "quantity") -> Fraction:
    """Parse a Kubernetes quantity exactly (``"1.5"`` -> 3/2, ``"1Gi"`` -> 1073741824)."""
    if not isinstance(text, str):
        raise QuantityError(f"{what}: expected a string such as '2', '500m' or '1Gi', got {text!r}")
    match = _SYNTAX.match(text.strip()) if text.strip() == text else None
    if match is None:
        raise QuantityError(f"{what}: {text!r} is not a Kubernetes quantity (examples: '2', '500m', '1.5', '1Gi')")
    sign, digits, suffix = match.groups()
    number = Fraction(digits)
    if suffix in _BINARY:
        value = number * _BINARY[suffix]
    elif suffix in _DECIMAL:
        value = number * _DECIMAL[suffix]
    elif (exp := _EXPONENT.match(suffix)) is not None:
        value = number * Fraction(10) ** int(exp.group(1))
    else:
        raise QuantityError(
            f"{what}: {text!r} has an unknown suffix {suffix!r} "
            "(use one of n u m k M G T P E, Ki Mi Gi Ti Pi Ei, or an exponent such as e3)"
        )
    return -value if sign == "-" else value


def _non_negative(text: str, what: str) -> Fraction:
    value = parse_quantity(text, what=what)
    if value < 0:
        raise QuantityError(f"{what}: {text!r} is negative; resource quantities must be >= 0")
    return value


def cpu_milli(text: str) -> int:
    """CPU quantity in milli-CPUs, rounded up like ``Quantity.MilliValue()`` ("500m" -> 500, "1.5" -> 1500)."""
    return math.ceil(_non_negative(text, "cpu") * 1000)


def cpu_value(text: str) -> int:
    """CPU quantity in whole CPUs, rounded up like ``Quantity.Value()`` ("1500m" -> 2)."""
    return math.ceil(_non_negative(text, "cpu"))


def is_integral_cpu(text: str) -> bool:
    """The kubelet's ``isIntegralCPUAmount``: ``Value()*1000 == MilliValue()`` (policy_static.go)."""
    return cpu_value(text) * 1000 == cpu_milli(text)


def memory_bytes(text: str) -> int:
    """Memory quantity in bytes, rounded up like ``Quantity.Value()`` ("1Gi" -> 1073741824, "1G" -> 10**9)."""
    return math.ceil(_non_negative(text, "memory"))

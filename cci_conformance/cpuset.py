"""Linux cpulist ("0-3,8") and hex cpumask ("00000000,0000010f") parsing and formatting."""

from __future__ import annotations

from collections.abc import Iterable

CPUs = frozenset[int]


class CPUListError(ValueError):
    """A string that is not a valid Linux cpulist or cpumask."""


def parse_cpulist(text: str) -> CPUs:
    """Parse a kernel cpulist such as ``0-3,8,10-11`` (whitespace around it ignored; "" is empty)."""
    text = text.strip()
    if not text:
        return frozenset()
    out: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        lo_s, sep, hi_s = part.partition("-")
        try:
            lo = int(lo_s, 10)
            hi = int(hi_s, 10) if sep else lo
        except ValueError:
            raise CPUListError(f"not a cpulist: {text!r} (bad element {part!r}; expected e.g. '0-3,8')") from None
        if lo < 0 or hi < lo or (sep and not hi_s) or not lo_s.isdigit() or (sep and not hi_s.isdigit()):
            raise CPUListError(f"not a cpulist: {text!r} (bad range {part!r}; expected e.g. '0-3,8')")
        out.update(range(lo, hi + 1))
    return frozenset(out)


def format_cpulist(cpus: Iterable[int]) -> str:
    """Format CPU ids the way the kernel and the kubelet do: ascending, ranges of 2+ ids as ``a-b``."""
    ids = sorted(set(cpus))
    parts: list[str] = []
    i = 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        parts.append(str(ids[i]) if i == j else f"{ids[i]}-{ids[j]}")
        i = j + 1
    return ",".join(parts)


def mask_width_digits(nr_cpu_ids: int) -> int:
    """Hex digits the kernel prints for a cpumask: ceil(nr_cpu_ids / 4)."""
    return max(1, (nr_cpu_ids + 3) // 4)


def format_cpumask(cpus: Iterable[int], nr_cpu_ids: int) -> str:
    """Format a kernel cpumask: lower-case hex, comma every 32 bits, most significant group first,
    zero-padded so that the whole mask is ``ceil(nr_cpu_ids/4)`` digits wide."""
    value = 0
    for c in cpus:
        if c >= nr_cpu_ids:
            raise CPUListError(f"cpu {c} does not fit a mask of nr_cpu_ids={nr_cpu_ids}")
        value |= 1 << c
    digits = mask_width_digits(nr_cpu_ids)
    raw = format(value, "x").rjust(digits, "0")
    groups: list[str] = []
    while raw:
        groups.insert(0, raw[-8:])
        raw = raw[:-8]
    return ",".join(groups)


def parse_cpumask(text: str) -> CPUs:
    """Parse a kernel cpumask such as ``0000,00000100,00000001``."""
    raw = text.strip().replace(",", "")
    if not raw:
        return frozenset()
    try:
        value = int(raw, 16)
    except ValueError:
        raise CPUListError(f"not a cpumask: {text!r}") from None
    out = set()
    bit = 0
    while value:
        if value & 1:
            out.add(bit)
        value >>= 1
        bit += 1
    return frozenset(out)

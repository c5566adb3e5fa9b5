"""The checker's own reading of claim parameters (docs/spec.md S2.1, S2.4, S2.10), apart from the drivers' parser."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

# Written from the spec text, not imported from protocol/claims.py or the driver SDK: a checker that
# reads the parameters through the drivers' parser would inherit its defaults and its mistakes (issue 12).
CORES, CPU, MEM, DEVICE = "cores", "cpu attributes", "mem attributes", "device attributes"
SIBLING_NAMES = {"CORE-SIBLING-REQUIRED": "required", "CORE-SIBLING-PREFERRED": "preferred",
                 "CORE-SIBLING-DENIED": "denied"}
MEM_NAMES = {"NUMA-MEM-AFFINITY-BIND-REQUIRED": "bind-required", "NUMA-MEM-AFFINITY-BIND-PREFERRED": "bind-preferred",
             "NUMA-MEM-AFFINITY-INTERLEAVE-REQUIRED": "interleave-required",
             "NUMA-MEM-AFFINITY-INTERLEAVE-PREFERRED": "interleave-preferred", "NO-MEM-AFFINITY": "none"}
DEVICE_NAMES = {"NUMA-DEVICE-AFFINITY-REQUIRED": "required", "NUMA-DEVICE-AFFINITY-PREFERRED": "preferred",
                "NO-DEVICE-AFFINITY": "none"}
_COUNT = re.compile(r"([0-9]+)(?:-([0-9]+))?")  # S2.1: ASCII digits, no blanks


class ParamError(ValueError):
    """Parameters the spec says a driver must refuse; the message names the array and index."""


@dataclass(frozen=True)
class GroupRules:
    """What one core group asks for, in the spec's words (field names as the checker's rules use them)."""

    index: int
    min_count: int
    max_count: int
    exclusive: bool  # S2.1: SHARED is the default
    siblings: str  # S2.4: required | preferred | denied; no attribute reads as preferred
    mem: str  # S2.5/S2.6: bind-required | bind-preferred | interleave-required | interleave-preferred | none
    device: str | None
    device_affinity: str  # S2.7: required | preferred | none


@dataclass(frozen=True)
class ClaimRules:
    groups: tuple[GroupRules, ...]

    @property
    def exclusive(self) -> bool:
        """S2.2: rSet.exclusive is true exactly when some group is EXCLUSIVE."""
        return any(g.exclusive for g in self.groups)


def _bad(key: str, i: int | None, what: str) -> ParamError:
    return ParamError(f"`{key}`" + ("" if i is None else f"[{i}]") + f": {what}")


def _count(value: Any, i: int) -> tuple[int, int]:
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)  # S2.1: a JSON integer is accepted as a count
    m = _COUNT.fullmatch(value) if isinstance(value, str) else None
    if m is None:
        raise _bad(CORES, i, f"{value!r} is neither a count nor a range")
    lo = int(m.group(1))
    hi = int(m.group(2)) if m.group(2) is not None else lo
    if lo < 1 or hi < lo:
        raise _bad(CORES, i, f"{value!r} asks for no CPU or is an empty range")
    return lo, hi


def _cpu(value: Any, i: int) -> tuple[bool, str]:
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or len(set(map(str, names))) != len(names):
        raise _bad(CPU, i, f"{value!r} is not a list of distinct attribute names")
    unknown = [n for n in names if n not in ("EXCLUSIVE", "SHARED", *SIBLING_NAMES)]
    if unknown:
        raise _bad(CPU, i, f"unknown attribute {unknown[0]!r}")
    siblings = [SIBLING_NAMES[n] for n in names if n in SIBLING_NAMES]
    exclusive = "EXCLUSIVE" in names
    if (exclusive and "SHARED" in names) or len(siblings) > 1:  # S2.10
        raise _bad(CPU, i, f"{names} contradict each other")
    if siblings == ["denied"] and not exclusive:  # S2.10: withholding siblings is exclusive use
        raise _bad(CPU, i, "CORE-SIBLING-DENIED without EXCLUSIVE")
    return exclusive, (siblings or ["preferred"])[0]


def _mem(value: Any, i: int) -> str:
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if value not in MEM_NAMES:
        raise _bad(MEM, i, f"unknown attribute {value!r}")
    return MEM_NAMES[value]


def _device(value: Any, i: int) -> tuple[str, str | None]:
    if value == "NO-DEVICE-AFFINITY":
        return "none", None
    if not isinstance(value, dict) or set(value) - {"affinity", "device"} or value.get("affinity") not in DEVICE_NAMES:
        raise _bad(DEVICE, i, f"{value!r} is neither NO-DEVICE-AFFINITY nor an affinity object")
    mode, device = DEVICE_NAMES[value["affinity"]], value.get("device")
    if (mode == "none") != (device is None):  # S2.10: an affinity names its device, NO-DEVICE-AFFINITY none
        raise _bad(DEVICE, i, f"{value['affinity']} with device {device!r}")
    return mode, device


def read_parameters(source: str | bytes | dict) -> ClaimRules:
    """The claim as S2.1 defines it; ParamError for parameters a driver must refuse (machine checks aside)."""
    try:
        data = json.loads(source) if isinstance(source, (str, bytes)) else source
    except ValueError as exc:
        raise ParamError(f"not JSON: {exc}") from None
    if not isinstance(data, dict) or set(data) - {CORES, CPU, MEM, DEVICE}:
        raise ParamError("not an object holding only the four arrays of S2.1")
    cores = data.get(CORES)
    if not isinstance(cores, list) or not cores:
        raise _bad(CORES, None, "missing or empty")
    for key in (CPU, MEM, DEVICE):
        if key in data and (not isinstance(data[key], list) or len(data[key]) != len(cores)):
            raise _bad(key, None, f"does not have one entry per core group ({len(cores)})")
    groups = []
    for i, c in enumerate(cores):
        lo, hi = _count(c, i)
        exclusive, siblings = _cpu(data[CPU][i], i) if CPU in data else (False, "preferred")
        mem = _mem(data[MEM][i], i) if MEM in data else "none"
        affinity, device = _device(data[DEVICE][i], i) if DEVICE in data else ("none", None)
        if mem == "interleave-required" and affinity == "required":  # S2.10
            raise _bad(MEM, i, "INTERLEAVE-REQUIRED with DEVICE-AFFINITY-REQUIRED")
        groups.append(GroupRules(i, lo, hi, exclusive, siblings, mem, device, affinity))
    return ClaimRules(tuple(groups))


def as_rules(claim) -> ClaimRules:
    """Parameters (JSON text or dict) read by :func:`read_parameters`; a ClaimRules is taken as it is.

    Any other object with ``groups`` (an already parsed claim, as older callers pass) is copied field by
    field; pass the parameters themselves to have the checker read them independently."""
    if isinstance(claim, ClaimRules):
        return claim
    if isinstance(claim, (str, bytes, dict)):
        return read_parameters(claim)
    return ClaimRules(tuple(GroupRules(g.index, g.min_count, g.max_count, g.exclusive, g.siblings, g.mem, g.device,
                                       g.device_affinity) for g in claim.groups))

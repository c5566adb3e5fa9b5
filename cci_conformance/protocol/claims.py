"""Parse and validate claim parameters (the KEP's four attribute arrays, docs/spec.md §2) into a ClaimRequest."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..topology.model import Topology

SCHEMA_PATH = Path(__file__).parent / "schema" / "claim_parameters.schema.json"

KEY_CORES = "cores"
KEY_CPU = "cpu attributes"
KEY_MEM = "mem attributes"
KEY_DEVICE = "device attributes"
KEYS = (KEY_CORES, KEY_CPU, KEY_MEM, KEY_DEVICE)

EXCLUSIVE, SHARED = "EXCLUSIVE", "SHARED"
SIBLING_REQUIRED, SIBLING_PREFERRED, SIBLING_DENIED = (
    "CORE-SIBLING-REQUIRED", "CORE-SIBLING-PREFERRED", "CORE-SIBLING-DENIED")
SIBLING_ATTRS = {SIBLING_REQUIRED: "required", SIBLING_PREFERRED: "preferred", SIBLING_DENIED: "denied"}
CPU_ATTRS = (EXCLUSIVE, SHARED, *SIBLING_ATTRS)

MEM_ATTRS = {
    "NUMA-MEM-AFFINITY-BIND-REQUIRED": "bind-required",
    "NUMA-MEM-AFFINITY-BIND-PREFERRED": "bind-preferred",
    "NUMA-MEM-AFFINITY-INTERLEAVE-REQUIRED": "interleave-required",
    "NUMA-MEM-AFFINITY-INTERLEAVE-PREFERRED": "interleave-preferred",
    "NO-MEM-AFFINITY": "none",
}
DEVICE_ATTRS = {
    "NUMA-DEVICE-AFFINITY-REQUIRED": "required",
    "NUMA-DEVICE-AFFINITY-PREFERRED": "preferred",
    "NO-DEVICE-AFFINITY": "none",
}
_COUNT_RE = re.compile(r"([0-9]+)")  # S2.1: ASCII digits, no blanks
_RANGE_RE = re.compile(r"([0-9]+)-([0-9]+)")
_BDF_RE = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")


class ClaimError(ValueError):
    """Claim parameters that are malformed or contradictory; the message names the array, index and fix."""


@dataclass(frozen=True)
class CoreGroup:
    """One core group of a claim (one entry of each of the four arrays)."""

    index: int
    min_count: int  # logical CPUs; equal to max_count unless `cores` was a range
    max_count: int
    exclusive: bool = False
    siblings: str = "preferred"  # required | preferred | denied (an absent attribute means preferred, S2.4)
    mem: str = "none"  # bind-required | bind-preferred | interleave-required | interleave-preferred | none
    device: str | None = None  # PCI address (BDF) of the named device
    device_affinity: str = "none"  # required | preferred | none

    @property
    def is_range(self) -> bool:
        return self.min_count != self.max_count

    @property
    def count(self) -> int:
        """The exact count (for a range: its upper bound)."""
        return self.max_count


@dataclass(frozen=True)
class ClaimRequest:
    """A parsed claim: one CoreGroup per entry of the parallel arrays."""

    groups: tuple[CoreGroup, ...]

    @property
    def exclusive(self) -> bool:
        """The rSet.exclusive flag a driver must return: true when any group is exclusive (S2.2)."""
        return any(g.exclusive for g in self.groups)

    @property
    def total_max(self) -> int:
        return sum(g.max_count for g in self.groups)


def _fail(key: str, index: int | None, problem: str, fix: str) -> ClaimError:
    where = f"`{key}`" if index is None else f"`{key}`[{index}]"
    return ClaimError(f"claim parameters: {where}: {problem}; fix: {fix}")


def _parse_cores(value: Any, i: int, capabilities: Iterable[str]) -> tuple[int, int]:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise _fail(KEY_CORES, i, f"{value!r} is not a count", 'write a count of logical CPUs as a string, e.g. "4"')
    text = str(value)
    m = _COUNT_RE.fullmatch(text)
    if m:
        n = int(m.group(1))
        if n < 1:
            raise _fail(KEY_CORES, i, "a count of 0 asks for nothing", "ask for at least 1 CPU or drop the group")
        return n, n
    m = _RANGE_RE.fullmatch(text)
    if m:
        lo, hi = int(m.group(1)), int(m.group(2))
        if "core-ranges" not in capabilities:
            raise _fail(KEY_CORES, i, f"the range {text!r} needs the `core-ranges` capability, which the driver "
                        "does not declare", 'ask for an exact count such as "4"')
        if lo < 1 or hi < lo:
            raise _fail(KEY_CORES, i, f"{text!r} is not a valid range", 'write "LOW-HIGH" with 1 <= LOW <= HIGH')
        return lo, hi
    raise _fail(KEY_CORES, i, f"{text!r} is not a number", 'write a count such as "4" (or a range "1-4")')


def _parse_cpu(value: Any, i: int) -> tuple[bool, str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _fail(KEY_CPU, i, f"{value!r} is not a list of attribute names", 'write e.g. ["EXCLUSIVE"]')
    seen: set[str] = set()
    for v in value:
        if v not in CPU_ATTRS:
            raise _fail(KEY_CPU, i, f"unknown attribute {v!r}", "use " + ", ".join(CPU_ATTRS))
        if v in seen:
            raise _fail(KEY_CPU, i, f"{v!r} is listed twice", "list each attribute once")
        seen.add(v)
    if EXCLUSIVE in seen and SHARED in seen:
        raise _fail(KEY_CPU, i, "EXCLUSIVE and SHARED contradict each other", "keep one of them")
    sib = [v for v in value if v in SIBLING_ATTRS]
    if len(sib) > 1:
        raise _fail(KEY_CPU, i, f"{' and '.join(sib)} contradict each other", "keep one CORE-SIBLING-* attribute")
    siblings = SIBLING_ATTRS[sib[0]] if sib else "preferred"
    exclusive = EXCLUSIVE in seen
    if siblings == "denied" and not exclusive:
        raise _fail(KEY_CPU, i, "CORE-SIBLING-DENIED withholds the siblings from everyone, so the group must be "
                    "exclusive", "add EXCLUSIVE (and drop SHARED)")
    return exclusive, siblings


def _parse_mem(value: Any, i: int) -> str:
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if not isinstance(value, str) or value not in MEM_ATTRS:
        raise _fail(KEY_MEM, i, f"unknown attribute {value!r}", "use one of " + ", ".join(MEM_ATTRS))
    return MEM_ATTRS[value]


def _parse_device(value: Any, i: int, topology: Topology | None) -> tuple[str, str | None]:
    if isinstance(value, str):
        value = {"affinity": value}
    if not isinstance(value, dict):
        raise _fail(KEY_DEVICE, i, f"{value!r} is neither an attribute name nor an object",
                    'write "NO-DEVICE-AFFINITY" or {"affinity": "NUMA-DEVICE-AFFINITY-REQUIRED", '
                    '"device": "0000:3b:00.0"}')
    extra = sorted(set(value) - {"affinity", "device"})
    if extra:
        raise _fail(KEY_DEVICE, i, f"unknown key {extra[0]!r}", 'use only "affinity" and "device"')
    affinity = value.get("affinity")
    if not isinstance(affinity, str) or affinity not in DEVICE_ATTRS:
        raise _fail(KEY_DEVICE, i, f"unknown attribute {affinity!r}", "use one of " + ", ".join(DEVICE_ATTRS))
    mode = DEVICE_ATTRS[affinity]
    device = value.get("device")
    if mode == "none":
        if device is not None:
            raise _fail(KEY_DEVICE, i, "NO-DEVICE-AFFINITY names a device", "drop the device or ask for affinity")
        return mode, None
    if not isinstance(device, str) or not _BDF_RE.match(device):
        raise _fail(KEY_DEVICE, i, f"{affinity} needs the device named by its PCI address, got {device!r}",
                    'add "device": "0000:3b:00.0" (lower-case domain:bus:slot.function)')
    if topology is not None:
        dev = topology.device(device)
        if dev is None:
            known = ", ".join(d.bdf for d in topology.pci_devices) or "none"
            raise _fail(KEY_DEVICE, i, f"device {device} does not exist on this machine",
                        f"name one of the machine's PCI devices ({known})")
        if dev.numa_node < 0 or dev.numa_node not in topology.node_cpus:
            raise _fail(KEY_DEVICE, i, f"device {device} has no NUMA node with CPUs (numa_node={dev.numa_node})",
                        "use NO-DEVICE-AFFINITY for a device without locality")
    return mode, device


def _check_group(g: CoreGroup, topology: Topology | None) -> None:
    if g.mem == "interleave-required" and g.device_affinity == "required":
        raise _fail(KEY_MEM, g.index, "NUMA-MEM-AFFINITY-INTERLEAVE-REQUIRED (every node) contradicts "
                    "NUMA-DEVICE-AFFINITY-REQUIRED (the device's node only)", "relax one of them to -PREFERRED")
    if topology is not None and g.siblings == "required":
        tpc = topology.threads_per_core
        if not any(n % tpc == 0 for n in range(g.min_count, g.max_count + 1)):
            raise _fail(KEY_CORES, g.index, f"CORE-SIBLING-REQUIRED needs whole cores of {tpc} threads, and "
                        f"{g.min_count if not g.is_range else f'{g.min_count}-{g.max_count}'} is not a multiple "
                        f"of {tpc}", f"ask for a multiple of {tpc} CPUs")


def parse_claim(source: str | bytes | dict, topology: Topology | None = None,
                capabilities: Iterable[str] = ()) -> ClaimRequest:
    """Parse claim parameters (JSON text or an already-decoded dict); any problem raises ClaimError."""
    try:
        return _parse(source, topology, capabilities)
    except ClaimError:
        raise
    except Exception as exc:  # a safety net: bad input must never surface as another exception type
        raise ClaimError(f"claim parameters: cannot be read ({type(exc).__name__}: {exc}); fix: follow the "
                         "claim parameter schema (docs/spec.md S2.1)") from None


def _parse(source: str | bytes | dict, topology: Topology | None, capabilities: Iterable[str]) -> ClaimRequest:
    capabilities = tuple(capabilities)
    if isinstance(source, (str, bytes)):
        try:
            data = json.loads(source)
        except (ValueError, RecursionError) as exc:
            raise ClaimError(f"claim parameters: not valid JSON ({exc}); fix: send a JSON object such as "
                             '{"cores": ["4"], "cpu attributes": [["EXCLUSIVE"]]}') from None
    else:
        data = source
    if not isinstance(data, dict):
        raise ClaimError('claim parameters: not a JSON object; fix: send e.g. {"cores": ["4"]}')
    extra = sorted(k for k in data if k not in KEYS)
    if extra:
        raise ClaimError(f"claim parameters: unknown key {extra[0]!r}; fix: use only "
                         + ", ".join(f'"{k}"' for k in KEYS))
    cores = data.get(KEY_CORES)
    if not isinstance(cores, list) or not cores:
        raise _fail(KEY_CORES, None, "missing or empty: a claim needs at least one core group",
                    'add "cores": ["4"] (one entry per core group)')
    arrays = {}
    for key in KEYS[1:]:
        if key in data:
            arr = data[key]
            if not isinstance(arr, list):
                raise _fail(key, None, "is not an array", f"give one entry per core group ({len(cores)})")
            if len(arr) != len(cores):
                raise _fail(key, None, f"has {len(arr)} entries but `cores` has {len(cores)}",
                            "give the four arrays one entry per core group each")
            arrays[key] = arr
    groups = []
    for i, c in enumerate(cores):
        lo, hi = _parse_cores(c, i, capabilities)
        exclusive, siblings = _parse_cpu(arrays[KEY_CPU][i], i) if KEY_CPU in arrays else (False, "preferred")
        mem = _parse_mem(arrays[KEY_MEM][i], i) if KEY_MEM in arrays else "none"
        dev_mode, dev = _parse_device(arrays[KEY_DEVICE][i], i, topology) if KEY_DEVICE in arrays else ("none", None)
        g = CoreGroup(index=i, min_count=lo, max_count=hi, exclusive=exclusive, siblings=siblings, mem=mem,
                      device=dev, device_affinity=dev_mode)
        _check_group(g, topology)
        groups.append(g)
    return ClaimRequest(groups=tuple(groups))


def claim_json(groups: Iterable[dict]) -> str:
    """Build claim-parameter JSON from per-group dicts (keys: cores, cpu, mem, device) — a test helper."""
    groups = list(groups)
    out: dict[str, list] = {KEY_CORES: [str(g["cores"]) for g in groups]}
    out[KEY_CPU] = [list(g.get("cpu", [SHARED])) for g in groups]
    out[KEY_MEM] = [g.get("mem", "NO-MEM-AFFINITY") for g in groups]
    out[KEY_DEVICE] = [g.get("device", "NO-DEVICE-AFFINITY") for g in groups]
    return json.dumps(out)

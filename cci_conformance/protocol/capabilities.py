"""The one list of driver capability names a manifest may declare and a suite may require."""

from __future__ import annotations

# name -> what a driver that declares it promises (docs/spec.md S1.10 is the normative text).
KNOWN_CAPABILITIES: dict[str, str] = {
    "exclusive": "cpu attribute EXCLUSIVE: CPUs granted to one container only",
    "shared": "cpu attribute SHARED (the default): CPUs drawn from availableCpus and not withheld",
    "core-siblings": "cpu attributes CORE-SIBLING-REQUIRED, -PREFERRED and -DENIED",
    "numa-bind": "mem attributes NUMA-MEM-AFFINITY-BIND-REQUIRED and -PREFERRED",
    "numa-interleave": "mem attributes NUMA-MEM-AFFINITY-INTERLEAVE-REQUIRED and -PREFERRED",
    "device-affinity": "device attributes NUMA-DEVICE-AFFINITY-REQUIRED and -PREFERRED with a named PCI device",
    "core-ranges": "a range such as \"1-4\" in `cores` (the driver picks the count)",
    "groups": "several core groups in one claim, reported in AdmitResponse.groups",
    "restart-recovery": "the driver keeps its grants across its own restart (kill -9 included)",
}


def unknown_capabilities(names: list[str] | tuple[str, ...]) -> list[str]:
    """The names in ``names`` that are not known capabilities, in their given order."""
    return [n for n in names if n not in KNOWN_CAPABILITIES]

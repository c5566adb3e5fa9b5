"""Driver capability names a manifest may declare and a suite may require, and the base every driver serves."""

from __future__ import annotations

# What every driver must serve, whatever it declares (docs/spec.md S1.11 is the normative text): a claim
# of ONE core group with an exact count whose attributes are only EXCLUSIVE or SHARED (the KEP's two kinds
# of core, l.320-416; SHARED is the default), no CORE-SIBLING attribute (placed as PREFERRED, S2.4),
# NO-MEM-AFFINITY and NO-DEVICE-AFFINITY; plus registration, Add/Remove, deadlines, clean refusals and
# SIGTERM (S1.2-S1.8). Anything else needs the capability that names it below, and a driver that does not
# declare it refuses such a claim with an err naming the capability (S1.6).
BASE = ("one core group per claim, an exact count, cpu attribute EXCLUSIVE or SHARED (default) and nothing "
        "else: no CORE-SIBLING-*, NO-MEM-AFFINITY, NO-DEVICE-AFFINITY")

# Names a manifest may list although they are part of the base: declaring them changes nothing. They stay
# accepted so that manifests written before the base was defined keep loading; a requirement or a
# @pytest.mark.needs must never name them (tests/unit/test_capabilities_base.py enforces it).
BASE_CAPABILITIES: dict[str, str] = {
    "exclusive": "part of the base: cpu attribute EXCLUSIVE, CPUs granted to one container only",
    "shared": "part of the base: cpu attribute SHARED (the default), CPUs drawn from availableCpus, not withheld",
}

# name -> what a driver that declares it promises beyond the base (docs/spec.md S1.10 is the normative text).
OPTIONAL_CAPABILITIES: dict[str, str] = {
    "core-siblings": "cpu attributes CORE-SIBLING-REQUIRED, -PREFERRED and -DENIED",
    "numa-bind": "mem attributes NUMA-MEM-AFFINITY-BIND-REQUIRED and -PREFERRED",
    "numa-interleave": "mem attributes NUMA-MEM-AFFINITY-INTERLEAVE-REQUIRED and -PREFERRED",
    "device-affinity": "device attributes NUMA-DEVICE-AFFINITY-REQUIRED and -PREFERRED with a named PCI device",
    "core-ranges": "a range such as \"1-4\" in `cores` (the driver picks the count)",
    "groups": "several core groups in one claim, reported in AdmitResponse.groups",
    "restart-recovery": "the driver keeps its grants across its own restart (kill -9 included)",
}

# Every name a manifest may declare (base names included, for compatibility).
KNOWN_CAPABILITIES: dict[str, str] = {**BASE_CAPABILITIES, **OPTIONAL_CAPABILITIES}


def unknown_capabilities(names: list[str] | tuple[str, ...]) -> list[str]:
    """The names in ``names`` that are not known capabilities, in their given order."""
    return [n for n in names if n not in KNOWN_CAPABILITIES]


def needed_capabilities(claim) -> list[str]:
    """The optional capabilities a parsed claim (``protocol.claims.ClaimRequest``) needs beyond the base, in
    OPTIONAL_CAPABILITIES order; ``[]`` means every driver must serve it."""
    needed: set[str] = set()
    if len(claim.groups) > 1:
        needed.add("groups")
    for g in claim.groups:
        if g.is_range:
            needed.add("core-ranges")
        # an explicit CORE-SIBLING-PREFERRED parses like no attribute (S2.4): the base placement serves both
        if g.siblings in ("required", "denied"):
            needed.add("core-siblings")
        if g.mem.startswith("bind"):
            needed.add("numa-bind")
        if g.mem.startswith("interleave"):
            needed.add("numa-interleave")
        if g.device_affinity in ("required", "preferred"):
            needed.add("device-affinity")
    return [name for name in OPTIONAL_CAPABILITIES if name in needed]


def capabilities_used(parameters) -> list[str]:
    """The optional capabilities claim ``parameters`` (a dict, JSON text or anything else) use, in
    OPTIONAL_CAPABILITIES order, malformed parameters included: what a driver that does not declare them may
    refuse for that reason alone (S1.11), so a test that sends them must need them.

    Well-formed parameters are read by the claims reader (:func:`needed_capabilities` of the parsed claim);
    an explicit CORE-SIBLING-PREFERRED counts too, since the suites send it only with `core-siblings` (S1.11).
    Malformed ones are read entry by entry: several `cores` entries use `groups`, a range that parses as one
    uses `core-ranges`, and an attribute name uses the capability that names it, even in a contradiction."""
    import json

    from .claims import (
        DEVICE_ATTRS,
        KEY_CORES,
        KEY_CPU,
        KEY_DEVICE,
        KEY_MEM,
        MEM_ATTRS,
        SIBLING_ATTRS,
        ClaimError,
        parse_claim,
    )

    if isinstance(parameters, (str, bytes)):
        try:
            parameters = json.loads(parameters)
        except ValueError:
            return []
    if not isinstance(parameters, dict):
        return []
    used: set[str] = set()
    try:
        used.update(needed_capabilities(parse_claim(parameters, None, tuple(OPTIONAL_CAPABILITIES))))
    except ClaimError:
        pass

    def entries(key: str) -> list:
        value = parameters.get(key)
        return value if isinstance(value, list) else []

    cores = entries(KEY_CORES)
    if len(cores) > 1:
        used.add("groups")
    for count in cores:
        try:
            if parse_claim({KEY_CORES: [count]}, None, ("core-ranges",)).groups[0].is_range:
                used.add("core-ranges")
        except ClaimError:
            pass
    for attrs in entries(KEY_CPU):
        names = attrs if isinstance(attrs, list) else [attrs]
        if any(n in SIBLING_ATTRS for n in names if isinstance(n, str)):
            used.add("core-siblings")
    for attr in entries(KEY_MEM):
        name = attr[0] if isinstance(attr, list) and len(attr) == 1 else attr
        mode = MEM_ATTRS.get(name, "none") if isinstance(name, str) else "none"
        if mode.startswith("bind"):
            used.add("numa-bind")
        if mode.startswith("interleave"):
            used.add("numa-interleave")
    for attr in entries(KEY_DEVICE):
        affinity = attr.get("affinity") if isinstance(attr, dict) else attr
        if isinstance(affinity, str) and DEVICE_ATTRS.get(affinity) in ("required", "preferred"):
            used.add("device-affinity")
    return [name for name in OPTIONAL_CAPABILITIES if name in used]

"""Turn a spec's cache description (size and sharing per level) into Cache instances."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .model import Cache

if TYPE_CHECKING:
    from .build import Builder, CoreSlot

# Used when a spec has no ``caches`` key: a typical server core (per-core L1/L2, one L3 per package).
DEFAULT_CACHES = {
    "l1d": {"size": "32K"},
    "l1i": {"size": "32K"},
    "l2": {"size": "1M"},
    "l3": {"size": "32M", "per": "package"},
}
LEVELS = (("l1d", 1, "Data"), ("l1i", 1, "Instruction"), ("l2", 2, "Unified"), ("l3", 3, "Unified"))


def _sharing_key(builder: Builder, core: CoreSlot, spec: dict, path: str, group_local: bool):
    """Which cache instance of this level a core uses; cores with equal keys share it."""
    per = spec.get("per", "package" if path.endswith("l3") else "core")
    if per == "core":
        return ("core", core.package, core.core)
    if per == "cluster":
        return ("cluster", core.package, core.cluster) if core.cluster >= 0 else ("core", core.package, core.core)
    if per == "node":
        return ("node", core.node)
    if per == "die":
        return ("die", core.package, core.die)
    if per == "package":
        return ("package", core.package)
    # An integer: groups of `per` consecutive cores, within the core group (override) or the node.
    if group_local:
        total, index, owner = core.group_spec["count"], core.index_in_group, (core.node, core.group)
        where = f"the group's {total} cores"
    else:
        total, index, owner = None, core.index_in_node, (core.node,)
        where = None
    if total is not None and total % per:
        raise builder.error(f"{path}.per", f"{per} cores per cache do not divide {where}",
                            "use a sharing count that divides the core count")
    return ("cores", *owner, index // per)


def build_caches(builder: Builder, cores: list[CoreSlot], online: frozenset[int]) -> tuple[Cache, ...]:
    top = builder.data.get("caches", DEFAULT_CACHES)
    node_sizes: dict[int, int] = {}
    for core in cores:
        node_sizes[core.node] = node_sizes.get(core.node, 0) + 1
    out: list[Cache] = []
    for key, level, kind in LEVELS:
        members: dict[tuple, set[int]] = {}
        attrs: dict[tuple, tuple[int, int]] = {}
        for core in cores:
            spec, path, local = top.get(key), f"caches.{key}", False
            if key in core.group_spec:
                spec, path, local = core.group_spec[key], f"{core.node_path}.cores[{core.group}].{key}", True
            if spec is None:
                continue
            per = spec.get("per")
            if isinstance(per, int) and not local and node_sizes[core.node] % per:
                raise builder.error(f"{path}.per",
                                    f"{per} cores per cache do not divide the {node_sizes[core.node]} cores "
                                    f"of {core.node_path}", "use a sharing count that divides the core count")
            size = builder.size(spec["size"], f"{path}.size")
            k = (*_sharing_key(builder, core, spec, path, local), size)
            members.setdefault(k, set()).update(i for i in core.cpus if i in online)
            attrs[k] = (size, spec.get("line_size", 64))
        next_id = 0
        for k, cpus in members.items():  # insertion order = core enumeration order
            if cpus:  # the kernel shows caches only through online CPUs
                size, line = attrs[k]
                out.append(Cache(level, kind, next_id, size, frozenset(cpus), line))
                next_id += 1
    return tuple(out)

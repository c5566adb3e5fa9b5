"""A deliberately naive oracle for docs/spec.md §2: judges a one-group reply by enumerating every cpuset.

It reads the attribute names itself (no parser of the project), knows no placement formula and no
capacity: "could the group have met this preference" is answered by listing every cpuset of the machine
that meets the hard rules and looking for one that meets the preference (S2.11). Exponential on purpose;
use it on machines of at most 16 CPUs only.
"""

from __future__ import annotations

import itertools
import json

from cci_conformance.topology.model import Topology

MAX_CPUS = 16


class Oracle:
    """One single-group claim on one machine state: ``acceptable(cpus, exclusive)`` says whether a reply is right."""

    def __init__(self, topology: Topology, parameters: str | dict, available, held=frozenset()):
        assert len(topology.online_cpus) <= MAX_CPUS, "the oracle enumerates every cpuset: small machines only"
        p = json.loads(parameters) if isinstance(parameters, str) else parameters
        assert len(p["cores"]) == 1, "the oracle judges one core group"
        cpu = p.get("cpu attributes", [["SHARED"]])[0]
        cpu = [cpu] if isinstance(cpu, str) else cpu
        count = str(p["cores"][0])
        self.lo, self.hi = (int(x) for x in count.split("-")) if "-" in count else (int(count), int(count))
        self.exclusive = "EXCLUSIVE" in cpu  # S2.1: SHARED unless EXCLUSIVE is named
        self.required = "CORE-SIBLING-REQUIRED" in cpu
        self.denied = "CORE-SIBLING-DENIED" in cpu
        self.packing = not self.required and not self.denied  # S2.4: no attribute means PREFERRED
        mem = p.get("mem attributes", ["NO-MEM-AFFINITY"])[0]
        self.mem = mem[0] if isinstance(mem, list) else mem
        dev = p.get("device attributes", ["NO-DEVICE-AFFINITY"])[0]
        self.affinity = dev.get("affinity", "NO-DEVICE-AFFINITY") if isinstance(dev, dict) else dev
        device = topology.device(dev["device"]) if isinstance(dev, dict) and "device" in dev else None
        self.device_node = device.numa_node if device is not None else None
        self.t = topology
        self.available = frozenset(available)
        self.held = frozenset(held)
        self.free = self.available & topology.online_cpus
        self.cpu_nodes = {n for n, cpus in topology.node_cpus.items() if cpus}
        self._candidates: dict[int, list[frozenset]] = {}

    # ---- words of the spec, one function each ----
    def nodes(self, cpus) -> set[int]:
        return {self.t.node_of[c] for c in cpus}

    def cores_touched(self, cpus) -> set[frozenset]:
        return {self.t.core_of[c] for c in cpus}

    def split_cores(self, cpus) -> int:
        """S2.4: cores the set touches without holding every one of their threads."""
        return sum(1 for core in self.cores_touched(cpus) if not core <= cpus)

    def on_device_node(self, cpus) -> bool:
        return self.device_node is not None and self.nodes(cpus) == {self.device_node}

    def hard(self, cpus) -> bool:
        """Every rule of §2 that is not a preference."""
        if not self.lo <= len(cpus) <= self.hi or not cpus <= self.t.online_cpus or not cpus <= self.available:
            return False
        if cpus & self.held:
            return False
        if self.required and self.split_cores(cpus):
            return False
        if self.denied:
            for core in self.cores_touched(cpus):
                if len(core & cpus) > 1 or not core <= self.available:
                    return False
        if self.mem == "NUMA-MEM-AFFINITY-BIND-REQUIRED" and len(self.nodes(cpus)) > 1:
            return False
        if self.mem == "NUMA-MEM-AFFINITY-INTERLEAVE-REQUIRED" and self.nodes(cpus) != self.cpu_nodes:
            return False
        if self.affinity == "NUMA-DEVICE-AFFINITY-REQUIRED" and not self.on_device_node(cpus):
            return False
        return True

    def candidates(self, size: int) -> list[frozenset]:
        """Every cpuset of ``size`` CPUs the group could have got under the hard rules."""
        if size not in self._candidates:
            self._candidates[size] = [s for s in map(frozenset, itertools.combinations(sorted(self.free), size))
                                      if self.hard(s)]
        return self._candidates[size]

    def preferences(self, cpus):
        """The NUMA and device preferences in the order S2.7 ranks them, as predicates on a cpuset."""
        out = []
        if self.affinity == "NUMA-DEVICE-AFFINITY-PREFERRED":
            out.append(self.on_device_node)
        if self.mem == "NUMA-MEM-AFFINITY-BIND-PREFERRED":
            out.append(lambda s: len(self.nodes(s)) == 1)
        # device affinity beats an interleave preference: the latter counts where the device one is unmet
        if self.mem == "NUMA-MEM-AFFINITY-INTERLEAVE-PREFERRED" and self.affinity != "NUMA-DEVICE-AFFINITY-REQUIRED" \
                and not self.on_device_node(cpus):
            out.append(lambda s: self.nodes(s) == self.cpu_nodes)
        return out

    def acceptable(self, cpus, exclusive: bool) -> bool:
        cpus = frozenset(cpus)
        if exclusive != self.exclusive or not self.hard(cpus):
            return False
        rivals = self.candidates(len(cpus))
        for meets in self.preferences(cpus):  # S2.11: met whenever some rival meets it
            if any(meets(s) for s in rivals):
                if not meets(cpus):
                    return False
                rivals = [s for s in rivals if meets(s)]
        if not self.packing or self.split_cores(cpus) <= 1:
            return True
        interleaved = self.mem == "NUMA-MEM-AFFINITY-INTERLEAVE-REQUIRED" or (
            self.mem == "NUMA-MEM-AFFINITY-INTERLEAVE-PREFERRED" and self.affinity != "NUMA-DEVICE-AFFINITY-REQUIRED"
            and not self.on_device_node(cpus) and self.nodes(cpus) == self.cpu_nodes)
        if interleaved:  # S2.4: each node's part on its own, against that node's free CPUs
            for node in self.cpu_nodes:
                part = cpus & self.t.node_cpus[node]
                mine = self.free & self.t.node_cpus[node]
                if self.split_cores(part) > 1 and any(
                        self.split_cores(s) <= 1 for s in map(frozenset, itertools.combinations(sorted(mine),
                                                                                                len(part)))):
                    return False
            return True
        return not any(self.split_cores(s) <= 1 for s in rivals)

    def satisfiable(self) -> bool:
        """S1.6: some reply meets every hard rule."""
        return any(self.candidates(k) for k in range(self.lo, min(self.hi, len(self.free)) + 1))

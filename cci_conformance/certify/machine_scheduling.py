"""pytest-xdist scheduling that gives every test of one machine to one worker process (the kind backend's -n)."""

from __future__ import annotations

from xdist.scheduler import LoadScopeScheduling


def machine_of(nodeid: str, machines: tuple[str, ...]) -> str | None:
    """The run machine a test id is parametrized with, or None. plugin.pytest_generate_tests puts the machine
    first in the id (``test_x[<machine>]`` or ``test_x[<machine>-<other ids>]``); the longest name that fits
    wins, so a machine named like the start of another is not taken for it."""
    _, _, name = nodeid.rpartition("::")
    if not name.endswith("]") or "[" not in name:
        return None
    params = name[name.index("[") + 1:-1]
    fits = [m for m in machines if params == m or params.startswith(m + "-")]
    return max(fits, key=len) if fits else None


class MachineScheduling(LoadScopeScheduling):
    """loadscope with one scope per machine: a worker process makes clusters for the machines it runs alone
    (kind/cci/run_cluster.py), and two processes never act on one kubelet. A test without a machine keeps
    loadscope's scope, its module."""

    def __init__(self, config, log=None, machines: tuple[str, ...] = ()):
        super().__init__(config, log)
        self.machines = tuple(machines)

    def _split_scope(self, nodeid: str) -> str:
        machine = machine_of(nodeid, self.machines)
        return f"machine {machine}" if machine is not None else super()._split_scope(nodeid)

"""pytest-xdist scheduling by machine: every test of one machine in one worker (kind's -n), or of one machine and
module (an embedded run's -n)."""

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
    (kind/cci/run_cluster.py), and two processes never act on one kubelet. With ``by_module`` (the embedded backend,
    whose node sessions are processes of the worker's own) a scope is one machine's tests of one module: a
    machine's long tests (ACCT-010, the latency fills) then spread over the workers instead of queueing behind
    its others, at the price of a shared node per module and worker. A test without a machine keeps loadscope's
    scope, its module."""

    def __init__(self, config, log=None, machines: tuple[str, ...] = (), by_module: bool = False):
        super().__init__(config, log)
        self.machines = tuple(machines)
        self.by_module = by_module

    def _split_scope(self, nodeid: str) -> str:
        machine = machine_of(nodeid, self.machines)
        if machine is None:
            return super()._split_scope(nodeid)
        return f"machine {machine}" + (f" in {nodeid.split('::', 1)[0]}" if self.by_module else "")

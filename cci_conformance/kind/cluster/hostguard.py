"""Host-global kernel settings a kubelet in a node could change, read before and checked after a cluster."""

from __future__ import annotations

from pathlib import Path

# The sysctls the kubelet's setupKernelTunables wants (container_manager_linux.go); none is namespaced.
KUBELET_SYSCTLS = ("vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
                   "kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes")


def read_sysctls() -> dict[str, str]:
    values = {}
    for key in KUBELET_SYSCTLS:
        path = Path("/proc/sys") / key
        if path.exists():
            values[key] = path.read_text().strip()
    return values


def changed(before: dict[str, str]) -> dict[str, tuple[str, str]]:
    """Sysctls whose value differs from ``before``: key -> (before, now)."""
    now = read_sysctls()
    return {key: (value, now.get(key, "")) for key, value in before.items() if now.get(key) != value}


def restore(before: dict[str, str]) -> None:
    """Write back the values of ``before`` (a node must never leave kernel.panic_on_oops=1 on the host)."""
    for key, value in before.items():
        path = Path("/proc/sys") / key
        try:
            if path.read_text().strip() != value:
                path.write_text(value + "\n")
        except OSError:
            continue

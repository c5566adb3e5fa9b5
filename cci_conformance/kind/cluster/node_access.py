"""Read a kind node's files through testinfra (``docker://<node>``): CPU-manager state, cpusets, kubelet log."""

from __future__ import annotations

from dataclasses import dataclass

from ...cpuset import parse_cpulist
from ...node import checkpoint
from ...node.cpumanager import CPUManagerState, loads
from .cpuset_log import RECORDER_LOG, entries

STATE_PATH = "/var/lib/kubelet/cpu_manager_state"
# The CCI-patched kubelet's own checkpoint (kubelet-cci/README.md), in the embedded node's format.
CCI_STATE_PATH = "/var/lib/kubelet/cci_manager_state"


@dataclass(frozen=True)
class ContainerCpuset:
    """The cpuset the kubelet last asked for one container (fake CPU ids) and what runc was given."""

    container_id: str
    pod_uid: str
    pod_name: str
    namespace: str
    container_name: str
    requested: frozenset[int]
    applied: frozenset[int]


class NodeAccess:
    def __init__(self, node: str):
        import testinfra  # imported here: only kind users need pytest-testinfra

        self.node = node
        self.host = testinfra.get_host(f"docker://{node}")

    def state_bytes(self) -> bytes:
        return self.host.file(STATE_PATH).content

    def cpu_manager_state(self) -> CPUManagerState:
        """The kubelet's checkpoint, decoded and checksum-verified by the harness's own code."""
        return loads(self.state_bytes(), path=STATE_PATH)

    def cci_manager_state(self) -> dict:
        """The patched kubelet's ``cci_manager_state`` Data, checksum-verified by the embedded node's decoder."""
        return checkpoint.decode(self.host.file(CCI_STATE_PATH).content, CCI_STATE_PATH)

    def kubelet_pid(self) -> int:
        """The kubelet unit's main process id (0 while it is not running)."""
        return int(self.host.check_output("systemctl show -p MainPID --value kubelet") or 0)

    def recorded_cpusets(self) -> dict[str, ContainerCpuset]:
        """Application containers (not sandboxes) by container ID, with their latest requested cpuset."""
        text = self.host.file(RECORDER_LOG).content_string if self.host.file(RECORDER_LOG).exists else ""
        created: dict[str, dict] = {}
        latest: dict[str, tuple[str, str]] = {}
        for record in entries(text):
            if record["op"] == "create":
                created[record["id"]] = record
            if record.get("cpus"):
                latest[record["id"]] = (record["cpus"], record.get("applied", ""))
        out = {}
        for cid, record in created.items():
            if record.get("container-type") != "container" or cid not in latest:
                continue
            requested, applied = latest[cid]
            out[cid] = ContainerCpuset(cid, record.get("sandbox-uid", ""), record.get("sandbox-name", ""),
                                       record.get("sandbox-namespace", ""), record.get("container-name", ""),
                                       parse_cpulist(requested), parse_cpulist(applied))
        return out

    def running_container_ids(self) -> set[str]:
        out = self.host.check_output("crictl ps -q")
        return {line.strip() for line in out.splitlines() if line.strip()}

    def kubelet_log(self, lines: int = 300) -> str:
        return self.host.check_output(f"journalctl -u kubelet --no-pager -n {int(lines)}")

"""The patched kubelet's per-call record, read from the host: each pod's CCI calls timed alone (calllog.go)."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

# The node image's kubelet unit sets CCI_CALL_LOG to this file (kind/image/assets/10-kubeadm.conf).
CALL_LOG = "/var/log/cci-calls.jsonl"
ADMIT, ADD, ADMISSION = "CCIAdmit", "CCIAddContainerResource", "admission"


class CallLogError(RuntimeError):
    """The record holds a line that is not one of the kubelet's entries."""


class CallLog:
    """The record of one worker, read on from where the last read stopped (it only grows: the kubelet appends whole
    lines, and a restarted kubelet appends to the same file)."""

    def __init__(self, root: Path):
        self.path = root / CALL_LOG.lstrip("/")
        self._offset = 0
        self._by_pod: dict[str, list[dict]] = defaultdict(list)

    def _read_on(self) -> None:
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            return  # no CCI call yet
        whole = data[:data.rfind(b"\n") + 1]  # a line still being written is read next time
        self._offset += len(whole)
        for line in whole.splitlines():
            try:
                entry = json.loads(line)
                self._by_pod[entry["pod"]].append(entry)
            except (ValueError, KeyError, TypeError) as exc:
                raise CallLogError(f"{CALL_LOG} on the node: not a call entry ({exc}): {line[:200]!r}") from None

    def seconds(self, pod_uid: str) -> tuple[float, float]:
        """(node, driver) seconds of the pod's admission, as the embedded node times it: the driver's part is every
        CCIAdmit and CCIAddContainerResource of its containers, the node's part the CCI manager's whole admission
        of each plus the Add. A pod the CCI manager never admitted has no driver time and no node time (NaN, which
        fails any budget rather than passing it)."""
        self._read_on()
        entries = self._by_pod.get(pod_uid, [])
        admission = [e["seconds"] for e in entries if e["call"] == ADMISSION]
        if not admission:
            return float("nan"), 0.0
        add = sum(e["seconds"] for e in entries if e["call"] == ADD)
        admit = sum(e["seconds"] for e in entries if e["call"] == ADMIT)
        return sum(admission) + add, admit + add

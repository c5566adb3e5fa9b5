"""The contract's PersistedState from a node's checkpoint files, which the embedded node and the kubelet share."""

from __future__ import annotations

import json
from collections.abc import Mapping

from .api import PersistedState, SnapshotError
from .cci_journal import read_cci_state
from .checkpoint import CCI_STATE_FILE, CPU_STATE_FILE
from .codec import owed_from_dict

# Data fields that change on writes that change nothing a pod or a driver could see: the node generation
# (every start), the journal epoch (a snapshot replaced the journal) and the checksums of the
# cpu_manager_state pair (the harness compares that file's own bytes instead).
VOLATILE = ("generation", "journalEpoch", "cpuManagerState")


def persisted_state(files: Mapping[str, bytes]) -> PersistedState:
    """PersistedState from ``{file name: bytes}`` of the kubelet root; both checkpoints must be there (the
    node writes them at its first start), and damage raises the node's own CheckpointError."""
    for name in (CPU_STATE_FILE, CCI_STATE_FILE):
        if name not in files:
            raise SnapshotError(f"the node has no {name}: a running node always keeps one (docs/spec.md S3.5)")
    data = read_cci_state(files)
    try:
        pending = tuple(owed_from_dict(e) for e in data["pending"])
    except (KeyError, TypeError) as exc:
        raise SnapshotError(f"{CCI_STATE_FILE}: an owed Remove without {exc}") from None
    content = {k: v for k, v in data.items() if k not in VOLATILE}
    return PersistedState(cpu_manager_state=files[CPU_STATE_FILE], cci_content=json.dumps(content, sort_keys=True),
                          pending=pending)

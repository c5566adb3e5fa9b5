"""The node's cpuset recorder log: every cpuset the runtime was asked for, in order, with the container's identity."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

from ...cpuset import parse_cpulist

RECORDER_LOG = "/var/log/cci-cpusets.jsonl"  # in the node (assets/cpuset-recorder.go)

# An empty `cpus` at create means the runtime was asked for no cpuset: the container may run on every
# CPU of the node (docs/dra-cpu.md "What each observation point gives"), so it overlaps every grant.
EVERY_CPU = None


@dataclass(frozen=True)
class Record:
    """One line of /var/log/cci-cpusets.jsonl: a create or update the runtime was asked for."""

    index: int
    op: str  # create | update
    container_id: str
    cpus: frozenset[int] | None  # None: no cpuset asked for at create (every CPU)
    time: datetime | None
    kind: str = ""  # container | sandbox (create only)
    namespace: str = ""
    pod: str = ""
    container: str = ""


def _time(text: str) -> datetime | None:
    if not text:
        return None
    # Go's RFC3339Nano has up to 9 fractional digits; datetime takes 6.
    head, _, frac = text.rstrip("Z").partition(".")
    return datetime.fromisoformat(f"{head}.{(frac + '000000')[:6]}+00:00" if frac else f"{head}+00:00")


class RecorderLogError(ValueError):
    """A whole line of the recorder log is not a JSON object: the node's recorder is not the harness's."""


def complete(text: str) -> str:
    """The log's whole lines. The recorder appends each line with one write, but a reader of the file while
    another runc call appends may see that write in part (a buffered write fills the page cache a page at a time,
    and the file grows as each page is filled): what follows the last newline is read on the next read."""
    return text[:text.rfind("\n") + 1]


def entries(text: str) -> list[dict]:
    """The log's whole lines, decoded; a whole line that is not a JSON object is an error naming it."""
    out = []
    for number, line in enumerate(complete(text).splitlines(), 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError as exc:
            entry = exc
        if not isinstance(entry, dict):
            raise RecorderLogError(f"{RECORDER_LOG} line {number} is not a JSON object ({entry}): {line[:200]!r}; "
                                   "the node image's cpuset recorder is not this harness's: rebuild the image")
        out.append(entry)
    return out


def parse(text: str) -> list[Record]:
    """Records in log order; updates carry the identity of the create of the same container id."""
    records: list[Record] = []
    identity: dict[str, tuple[str, str, str, str]] = {}
    for raw in entries(text):
        if raw["op"] not in ("create", "update"):
            continue  # a start carries no cpuset: the container keeps the one of its create
        cid, cpus_text = raw["id"], raw.get("cpus", "")
        if raw["op"] == "create":
            identity[cid] = (raw.get("container-type", ""), raw.get("sandbox-namespace", ""),
                             raw.get("sandbox-name", ""), raw.get("container-name", ""))
            cpus = parse_cpulist(cpus_text) if cpus_text else EVERY_CPU
        else:
            cpus = parse_cpulist(cpus_text)
        kind, ns, pod, ctr = identity.get(cid, ("", "", "", ""))
        records.append(Record(len(records), raw["op"], cid, cpus, _time(raw.get("time", "")), kind, ns, pod, ctr))
    return records

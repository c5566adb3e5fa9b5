"""Run the conformance suites in a subprocess (as a vendor would) and read the verdicts from report.json."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from cci_conformance.paths import PROJECT_ROOT
from cci_conformance.procgroup import running, stop_group, with_parent_death
from cci_conformance.waiting import WaitTimeout, wait_for

SUITES = PROJECT_ROOT / "suites"
RUN_TIMEOUT_S = 900
STOP_GRACE_S = 240.0  # an interrupted run closes its node sessions and writes its partial report in this time
# (kind runs included: their cluster is deleted at exit, minutes on a loaded host)


@dataclass(frozen=True)
class Certification:
    """The outcome of one run: requirement id -> status, and the reason of every non-pass."""

    statuses: dict[str, str]
    reasons: dict[str, str]
    exit_code: int
    seconds: float
    output: str
    evidence: dict[str, str]  # requirement id -> the node and driver log tails of its failed tests
    stopped_early: str | None = None  # the run's startup probe found no registered driver: no test ran
    figures: dict[str, str] | None = None  # requirement id -> its figures ("name=value; ..."), e.g. ACCT-010's seed
    replays: dict[str, str] | None = None  # requirement id -> the replay command of its failed test (report.json)

    def evidence_for(self, req_id: str) -> str:
        return self.evidence.get(req_id, "(no evidence collected)")

    def with_status(self, *statuses: str) -> set[str]:
        return {rid for rid, s in self.statuses.items() if s in statuses}


def certify(driver: Path, topologies: list[str], modules: list[str] | None = None,
            extra: list[str] | None = None, timeout: float = RUN_TIMEOUT_S) -> Certification:
    """``pytest suites/ --cci-driver DRIVER --cci-topology T...`` with a report dir of its own."""
    report_dir = Path(tempfile.mkdtemp(prefix="cci-selftest-", dir="/tmp"))
    targets = [str(SUITES / m) for m in modules] if modules else [str(SUITES)]
    argv = [sys.executable, "-m", "pytest", *targets, "-q", "-p", "no:cacheprovider", "--cci-driver", str(driver),
            "--cci-report-dir", str(report_dir), *[a for t in topologies for a in ("--cci-topology", t)],
            *(extra or [])]
    env = dict(os.environ)  # with the session's bytecode cache (tests/conftest.py)
    try:
        proc = run_pytest(argv, env, timeout)
        report = json.loads((report_dir / "report.json").read_text())
        evidence = _log_tails(report, report_dir)  # read now: the report dir goes below
    finally:
        subprocess.run(["rm", "-rf", str(report_dir)], check=False)
    reqs = report["requirements"]
    return Certification(statuses={r["id"]: r["status"] for r in reqs},
                         reasons={r["id"]: r.get("reason", "") for r in reqs if r["status"] != "pass"},
                         exit_code=proc.returncode, seconds=report["run"].get("duration_s", 0.0),
                         output=proc.stdout[-4000:] + proc.stderr[-2000:], evidence=evidence,
                         stopped_early=report["run"].get("stopped_early"),
                         figures={r["id"]: "; ".join(f"{f.get('name')}={f.get('value')}" for f in r.get("figures", []))
                                  for r in reqs},
                         replays={r["id"]: r["replay"] for r in reqs if r.get("replay")})


def run_pytest(argv: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    """Run the suites' pytest in a process group of its own; on timeout, or when this self-test is itself
    interrupted, SIGTERM it first (it stops like Ctrl-C and closes its nodes and drivers) and SIGKILL the group
    only after STOP_GRACE_S (``subprocess.run`` would SIGKILL at once and orphan every node and driver); a
    SIGKILLed self-test has the kernel SIGTERM it."""
    command, preexec = with_parent_death(argv, signal.SIGTERM)
    proc = subprocess.Popen(command, cwd=PROJECT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, start_new_session=True, preexec_fn=preexec)
    out: dict[str, str] = {}
    readers = [threading.Thread(target=lambda n=name, s=stream: out.__setitem__(n, s.read()), daemon=True)
               for name, stream in (("stdout", proc.stdout), ("stderr", proc.stderr))]
    for reader in readers:
        reader.start()
    try:
        wait_for(lambda: not running(proc), timeout, interval=0.1, what="the certification run")
    except BaseException as exc:  # the deadline, or Ctrl-C/SIGTERM of the self-test
        stop_group(proc, grace_s=STOP_GRACE_S)
        if isinstance(exc, WaitTimeout):
            raise subprocess.TimeoutExpired(argv, timeout) from None
        raise
    stop_group(proc)  # reaps it (and kills any straggler of its group)
    for reader in readers:
        reader.join(timeout=10)
    return subprocess.CompletedProcess(argv, proc.returncode, out.get("stdout", ""), out.get("stderr", ""))


def _log_tails(report: dict, report_dir: Path, lines: int = 25) -> dict[str, str]:
    """For each failed requirement, the last lines of the logs its failed tests left as evidence."""
    out = {}
    for req in report["requirements"]:
        if req["status"] != "fail":
            continue
        parts = []
        for test in req["tests"]:
            for rel in test.get("evidence", []):
                path = report_dir / rel
                if path.name in ("node.log", "driver.log") and path.is_file():
                    tail = path.read_text(errors="replace").splitlines()[-lines:]
                    parts.append(f"--- {rel}\n" + "\n".join(tail))
        out[req["id"]] = "\n".join(parts)
    return out

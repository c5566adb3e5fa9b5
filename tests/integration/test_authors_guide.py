"""docs/authors.md stays true: every `sh tested` block runs, in order, in one empty folder, and must exit 0."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from cci_conformance.paths import PACKAGE_DIR
from cci_conformance.procgroup import stop_group
from cci_conformance.protocol.capabilities import KNOWN_CAPABILITIES

SOURCE = PACKAGE_DIR.parent
GUIDE = SOURCE / "docs" / "authors.md"
BLOCK_DEADLINE_S = 900
NOT_SOURCE = shutil.ignore_patterns(".git", ".venv", ".tox", "build", "dist", "*.egg-info", "__pycache__",
                                    "cci-reports", "reports-out", ".pytest_cache", ".ruff_cache", ".hypothesis")
# Where api/generate.sh --install-tools puts the pinned Go protoc plugins (a project convention).
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "cci-conformance"
GO_PLUGIN_DIR = CACHE / "gobin"
_FENCE = re.compile(r"^```sh tested(?P<opts>[^\n]*)\n(?P<body>.*?)^```$", re.M | re.S)

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@dataclass
class Block:
    line: int
    body: str
    needs: tuple[str, ...]
    slow: bool


def guide_blocks() -> list[Block]:
    text = GUIDE.read_text()
    blocks = []
    for m in _FENCE.finditer(text):
        opts = m.group("opts").split()
        needs = next((o.removeprefix("needs=").split(",") for o in opts if o.startswith("needs=")), [])
        blocks.append(Block(text[:m.start()].count("\n") + 1, m.group("body"), tuple(needs), "slow" in opts))
    return blocks


def environment(work: Path) -> dict[str, str]:
    """The harness venv the guide creates comes first on PATH (as if activated), then this interpreter's."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTEST_XDIST_WORKER")}
    # A Rust build compiles tokio and tonic: keep its output between runs, on one core, so the latency
    # tests running beside it under xdist are not starved.
    env.setdefault("CARGO_TARGET_DIR", str(CACHE / "cargo-target"))
    env.setdefault("CARGO_BUILD_JOBS", "1")
    path = [str(work / "harness" / "bin"), str(Path(sys.executable).parent), env.get("PATH", "")]
    if GO_PLUGIN_DIR.is_dir():
        path.append(str(GO_PLUGIN_DIR))
    env["PATH"] = os.pathsep.join(path)
    return env


def run_block(block: Block, work: Path) -> str | None:
    """Run one block with bash -euo pipefail; return why it was skipped, or None when it ran."""
    env = environment(work)
    missing = [tool for tool in block.needs if shutil.which(tool, path=env["PATH"]) is None]
    if missing:
        return f"docs/authors.md:{block.line} needs {', '.join(missing)}"
    nice = ["nice", "-n", "15"] if block.slow else []
    proc = subprocess.Popen([*nice, "bash", "-euo", "pipefail", "-c", block.body], cwd=work, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=BLOCK_DEADLINE_S)
    except subprocess.TimeoutExpired:
        stop_group(proc)
        pytest.fail(f"docs/authors.md:{block.line}: the block did not finish within {BLOCK_DEADLINE_S} s")
    assert proc.returncode == 0, f"docs/authors.md:{block.line} exited {proc.returncode}:\n{block.body}\n{out[-4000:]}"
    return None


def test_guide_has_tested_blocks_and_no_untested_shell():
    text = GUIDE.read_text()
    assert len(guide_blocks()) >= 8
    untested = re.findall(r"^```(?:sh|bash|shell)(?! tested)[^\n]*$", text, re.M)
    assert not untested, f"shell blocks the test would not run: {untested}"
    # Blocks run under pipefail: `| head` closes the pipe early, the writer dies of SIGPIPE (exit 141)
    # whenever it has not finished writing, so the block fails or passes by timing. `sed -n 1,Np` reads all.
    early_close = [b.line for b in guide_blocks() if re.search(r"\|\s*head\b", b.body)]
    assert not early_close, f"docs/authors.md blocks at lines {early_close} pipe into head: use sed -n 1,Np"


def test_guide_commands_run_in_order_in_an_empty_folder(tmp_path):
    # The reader's checkout, as the first block expects it: ./cci-conformance
    shutil.copytree(SOURCE, tmp_path / "cci-conformance", ignore=NOT_SOURCE, symlinks=True)
    skipped = [why for block in guide_blocks() if not block.slow for why in [run_block(block, tmp_path)] if why]
    # What the blocks left behind: the facts the guide states about them.
    assert (tmp_path / "harness" / "bin" / "cci-conformance").is_file()
    first = (tmp_path / "first-run.txt").read_text()
    assert "FAIL     CLAIM-001" in first and "choose_cpus is not written yet" in first
    assert "verdict: CERTIFIED" not in first
    skeleton_run_names_each_failing_requirement(first, json.loads((tmp_path / "first-run" / "report.json").read_text()))
    assert (tmp_path / "gen" / "python" / "cci_v1alpha1_pb2_grpc.py").is_file()
    if skipped:
        pytest.skip("; ".join(skipped) + " (the other blocks ran)")


def skeleton_run_names_each_failing_requirement(stdout: str, report: dict) -> None:
    """What `cci-conformance run` says of the Python skeleton of `init-driver` (the guide's first run, which is
    the only run of a skeleton in the tests: tests/integration/test_init_driver.py checks the skeletons alone)."""
    assert report["verdict"]["certified"] is False
    by_id = {r["id"]: r for r in report["requirements"] if r["kind"] == "driver"}
    assert by_id["REG-001"]["status"] == "pass"  # it registers
    for rid, req in by_id.items():
        if req["capability"] in KNOWN_CAPABILITIES:  # declared none: every such requirement is n/a, with why
            assert req["status"] == "not-applicable" and req["capability"] in req["reason"], rid
    failed = [r for r in by_id.values() if r["status"] == "fail"]
    assert failed and all(f"FAIL     {r['id']}" in stdout for r in failed)
    assert "choose_cpus is not written yet" in by_id["CLAIM-001"]["reason"]


def test_guide_slow_blocks(tmp_path):
    slow = [b for b in guide_blocks() if b.slow]
    assert slow
    skipped = [why for block in slow for why in [run_block(block, tmp_path)] if why]
    if skipped:
        pytest.skip("; ".join(skipped))

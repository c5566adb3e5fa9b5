"""A run whose environment writes no bytecode gives its processes a cache folder of its own, removed at the end."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from cci_conformance import bytecode


def test_only_an_environment_that_writes_no_bytecode_anywhere_needs_the_cache():
    assert bytecode.writing_disabled({"PYTHONDONTWRITEBYTECODE": "1"})
    assert not bytecode.writing_disabled({})
    assert not bytecode.writing_disabled({"PYTHONDONTWRITEBYTECODE": ""})  # empty: Python writes bytecode
    assert not bytecode.writing_disabled({"PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": "/elsewhere"})


def test_an_environment_that_caches_is_passed_on_unchanged():
    with bytecode.run_cache({"PATH": "/bin"}) as env:
        assert env == {"PATH": "/bin"}


def test_children_write_their_bytecode_under_the_runs_folder_and_nothing_beside_the_source(tmp_path):
    (tmp_path / "probe_module.py").write_text("VALUE = 1\n")
    with bytecode.run_cache({"PYTHONDONTWRITEBYTECODE": "1", "PATH": "/bin"}) as env:
        assert "PYTHONDONTWRITEBYTECODE" not in env and env["PATH"] == "/bin"
        folder = Path(env["PYTHONPYCACHEPREFIX"])
        subprocess.run([sys.executable, "-c", "import probe_module"], cwd=tmp_path, env=env, check=True, timeout=60)
        assert list(folder.rglob("probe_module.*.pyc")), "the child wrote no bytecode into the run's folder"
    assert not folder.exists(), "the run's bytecode folder outlived it"
    assert not list(tmp_path.rglob("*.pyc")), "bytecode was written beside the source"

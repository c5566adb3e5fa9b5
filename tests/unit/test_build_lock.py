"""Two processes never build into the build cache at once: the second waits for the first, within a deadline."""

from __future__ import annotations

import os
import subprocess
import sys

from cci_conformance.kind.image import cache

OTHER_PROCESS = """
import contextlib
import sys
from cci_conformance.kind.image import cache
cache.BUILD_WAIT_S = float(sys.argv[1])
try:
    with cache.cached_only() if sys.argv[2] == "cached" else contextlib.nullcontext(), cache.building("a test step"):
        print("built")
except TimeoutError as exc:
    print(exc)
"""


def _other_process(wait_s: float, mode: str = "build") -> str:
    return subprocess.run([sys.executable, "-c", OTHER_PROCESS, str(wait_s), mode], capture_output=True, text=True,
                          check=True, timeout=60, env=dict(os.environ)).stdout.strip()


def test_a_second_process_waits_for_the_build_and_a_nested_build_does_not(tmp_path, monkeypatch):
    monkeypatch.setenv("CCI_KIND_CACHE", str(tmp_path))
    with cache.building("the node image"):
        with cache.building("the dra-driver-cpu image"):  # nested in this process's own build: straight in
            said = _other_process(0.5)
        assert "another process is building (a test step)" in said and f"held by pid {os.getpid()}" in said
    assert _other_process(5) == "built"  # released: the next build goes in at once


def test_reading_only_cached_results_takes_no_lock(tmp_path, monkeypatch):
    monkeypatch.setenv("CCI_KIND_CACHE", str(tmp_path))
    with cache.building("the node image"):
        assert _other_process(0.5) != "built"  # a build waits
        assert _other_process(0.5, "cached") == "built"  # --cached-only builds nothing: it never waits


EXCLUSIVE_BUILD = """
import sys
from cci_conformance.kind.image import cache
cache.BUILD_WAIT_S = 0.5

@cache.exclusive
def build():
    step = cache.Step("a test step", "inputs")
    if not step.done:
        step.prepare()
        step.finish()
        return "built"
    return "reused"

try:
    print(build())
except TimeoutError as exc:
    print(exc)
"""


def _exclusive_build() -> str:
    return subprocess.run([sys.executable, "-c", EXCLUSIVE_BUILD], capture_output=True, text=True, check=True,
                          timeout=60, env=dict(os.environ)).stdout.strip()


def test_a_build_whose_steps_are_done_does_not_wait_behind_another_processs_build(tmp_path, monkeypatch):
    # a DRA run opening its second session (kind, kubectl, the driver image: all cached) waited for the lock held
    # by a node image build of another release, which takes 20 minutes on 2 cores
    monkeypatch.setenv("CCI_KIND_CACHE", str(tmp_path))
    with cache.building("the node image of another release"):
        assert "another process is building" in _exclusive_build()  # not done yet: it must build, so it waits
    assert _exclusive_build() == "built"
    with cache.building("the node image of another release"):
        assert _exclusive_build() == "reused"  # done: read without the lock

"""A bytecode cache for the Python processes a run starts, when the environment turned bytecode writing off.

With PYTHONDONTWRITEBYTECODE set (CI images and containers often set it), every node and driver process a run
starts compiles the harness's modules from source again: a certification starts hundreds of them (each test's
fresh node, ACCT-010's node and driver restarts), and compiling was about a tenth of a default run's CPU and a
third of a small one's. The setting's intent is kept, nothing is written beside the sources: the processes of
one run (or one test session) write their bytecode under a folder of that run's own (PYTHONPYCACHEPREFIX),
which is removed when it ends.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

OFF = "PYTHONDONTWRITEBYTECODE"
PREFIX = "PYTHONPYCACHEPREFIX"


def writing_disabled(env: Mapping[str, str]) -> bool:
    """Whether a child given ``env`` would write no bytecode at all (and so compile every import again)."""
    return bool(env.get(OFF)) and not env.get(PREFIX)


def cached(env: Mapping[str, str], folder: str) -> dict[str, str]:
    """``env`` with bytecode written under ``folder`` instead of nowhere."""
    out = {k: v for k, v in env.items() if k != OFF}
    out[PREFIX] = folder
    return out


@contextmanager
def run_cache(env: Mapping[str, str] | None = None) -> Iterator[dict[str, str]]:
    """The environment for a run's child processes: ``env`` (default os.environ) as it is when it writes
    bytecode, else with a cache folder of this run's own, removed on exit."""
    env = dict(os.environ if env is None else env)
    if not writing_disabled(env):
        yield env
        return
    folder = tempfile.mkdtemp(prefix="cci-pycache-")
    try:
        yield cached(env, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)

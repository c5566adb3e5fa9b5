"""Where the node-image build keeps its work, keyed by versions, and how a finished step is recorded."""

from __future__ import annotations

import contextlib
import contextvars
import functools
import hashlib
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from ...hostlock import held

T = TypeVar("T")
# How long a build waits for another process's: a cold node image takes 10 minutes on an idle 2-core host and
# took 30-50 beside other runs (docs/kind.md).
BUILD_WAIT_S = 5400.0

_CACHED_ONLY = contextvars.ContextVar("cached_only", default=False)


class NotCached(RuntimeError):
    """A step would have to build something, but only cached results were allowed."""


@contextlib.contextmanager
def cached_only() -> Iterator[None]:
    """Within this block every step that is not cached raises NotCached instead of building."""
    token = _CACHED_ONLY.set(True)
    try:
        yield
    finally:
        _CACHED_ONLY.reset(token)


def ensure_may_build(what: str) -> None:
    if _CACHED_ONLY.get():
        raise NotCached(f"{what} is not in the build cache ({cache_root()})")


@contextlib.contextmanager
def building(what: str) -> Iterator[None]:
    """Hold the build cache's lock for the block. Steps are directories that a build fills before stamping them
    done, so two processes building at once (the xdist workers of one `run -n 2`) wrote into one directory: two
    debootstraps of one Python base image failed with "Couldn't find these debs". The second process now waits,
    then finds the step done. Re-entrant (the node image build builds images), and free when only cached results
    are read."""
    if _CACHED_ONLY.get():
        yield
        return
    with held(cache_root() / "build.lock", BUILD_WAIT_S, f"another process is building ({what})", reentrant=True):
        yield


def exclusive(build: Callable[..., T]) -> Callable[..., T]:
    """``build`` under the build cache's lock (``building``), once it has to build. A finished step is never
    written again, so reading one needs no lock: ``build`` runs first with every step cached-only, and takes the
    lock only when a step is missing. Without that, a run whose images were all cached waited for the lock behind
    another process's node image build of another release (20 minutes on 2 cores), at the opening of a session."""
    @functools.wraps(build)
    def locked(*args, **kwargs) -> T:
        if not _CACHED_ONLY.get():
            try:
                with cached_only():
                    return build(*args, **kwargs)
            except NotCached:
                pass  # something must be built: under the lock, from the start
        with building(build.__qualname__):
            return build(*args, **kwargs)
    return locked


def cache_root() -> Path:
    """The build cache: ``$CCI_KIND_CACHE`` or ``~/.cache/cci-conformance/kind``."""
    override = os.environ.get("CCI_KIND_CACHE")
    root = Path(override) if override else Path.home() / ".cache" / "cci-conformance" / "kind"
    root.mkdir(parents=True, exist_ok=True)
    return root


def key_of(*parts: object) -> str:
    """A short stable digest of the inputs of a step (versions, package lists, file contents)."""
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class Step:
    """One cached build step: a directory named after its inputs plus a stamp written when it finished."""

    def __init__(self, name: str, *inputs: object):
        self.name = name
        self.key = key_of(name, *inputs)
        self.dir = cache_root() / "steps" / f"{name}-{self.key}"
        self._stamp = self.dir / ".done"

    @property
    def done(self) -> bool:
        return self._stamp.is_file()

    def prepare(self) -> Path:
        ensure_may_build(self.name)
        self.dir.mkdir(parents=True, exist_ok=True)
        return self.dir

    def finish(self, **facts: object) -> None:
        self._stamp.write_text(json.dumps(facts, sort_keys=True))

    def facts(self) -> dict:
        return json.loads(self._stamp.read_text())

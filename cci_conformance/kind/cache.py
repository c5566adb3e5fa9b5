"""Where the node-image build keeps its work, keyed by versions, and how a finished step is recorded."""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

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

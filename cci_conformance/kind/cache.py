"""Where the node-image build keeps its work, keyed by versions, and how a finished step is recorded."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path


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
        self.dir.mkdir(parents=True, exist_ok=True)
        return self.dir

    def finish(self, **facts: object) -> None:
        self._stamp.write_text(json.dumps(facts, sort_keys=True))

    def facts(self) -> dict:
        return json.loads(self._stamp.read_text())

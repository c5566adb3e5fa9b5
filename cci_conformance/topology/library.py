"""The machine library: the topology specs shipped under topologies/*.yaml, by name."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from ..errors import ConfigError
from ..paths import TOPOLOGIES_DIR
from .model import Topology
from .spec import load_spec


def names() -> list[str]:
    """Names of the library topologies, sorted."""
    return sorted(p.stem for p in TOPOLOGIES_DIR.glob("*.yaml"))


def path(name: str) -> Path:
    """The spec file of a library topology; ConfigError listing the names when unknown."""
    candidate = TOPOLOGIES_DIR / f"{name}.yaml"
    if not candidate.is_file():
        raise ConfigError(f"no library topology named {name!r}", field="topology",
                          fix=f"use one of: {', '.join(names())}, or the path of a topology YAML")
    return candidate


@lru_cache(maxsize=64)
def _load(file: Path, mtime_ns: int) -> Topology:
    return load_spec(file)


def load(name: str) -> Topology:
    """The Topology of a library machine (parsed once per file version)."""
    file = path(name)
    return _load(file, file.stat().st_mtime_ns)


def resolve(name_or_file: str) -> Topology:
    """A library name, or the path of a spec file (anything containing '/' or ending in .yaml/.yml)."""
    if "/" in name_or_file or name_or_file.endswith((".yaml", ".yml")) or Path(name_or_file).is_file():
        return load_spec(Path(name_or_file))
    return load(name_or_file)

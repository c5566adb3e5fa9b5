"""Backends by name: a built-in one is a module path, imported only when a run asks for it."""

from __future__ import annotations

import importlib

from ..errors import ConfigError
from .base import Backend

# name -> "module:Class". A path, not an import: the kind backend's module would pull in kind/ (docker,
# testinfra, the kubernetes client) for runs that never use it, and kind/ imports this package's contract,
# so importing it from here would close a circle (tests/unit/test_package_layout.py proves there is none).
BUILTIN = {
    "embedded": "cci_conformance.backends.embedded:EmbeddedBackend",
    "kind": "cci_conformance.kind.cci.backend:KindBackend",
    "cluster": "cci_conformance.cluster.backend:ClusterBackend",
}
_REGISTERED: dict[str, type] = {}


def register_backend(cls: type) -> type:
    """Class decorator for a backend that is not built in (the self-tests' fakes): available by its ``name``."""
    _REGISTERED[cls.name] = cls
    return cls


def names() -> list[str]:
    return sorted({*BUILTIN, *_REGISTERED})


def backend_class(name: str) -> type:
    """The class of backend ``name``, its module imported now; ConfigError naming --backend when unknown."""
    if name in _REGISTERED:
        return _REGISTERED[name]
    if name not in BUILTIN:
        raise ConfigError(f"unknown backend {name!r}", field="--backend", fix=f"use one of: {', '.join(names())}")
    module, _, cls = BUILTIN[name].partition(":")
    return getattr(importlib.import_module(module), cls)


def get_backend(name: str) -> Backend:
    return backend_class(name)()

"""Suites and their fixtures look at a node through the contract only: no node internals, no hasattr probes."""

from __future__ import annotations

import ast

from cci_conformance.backends.base import NodeSession
from cci_conformance.paths import PROJECT_ROOT, SUITES_DIR

# What suites may import of the embedded node's package: the contract's value types, and the parser of
# the kubelet's own cpu_manager_state format (upstream's, which every backend's kubelet writes).
ALLOWED_NODE_MODULES = frozenset({"cci_conformance.node.api", "cci_conformance.node.cpumanager.state"})
SESSION_NAMES = frozenset({"node", "session"})  # how suites and fixtures name a NodeSession
CONTRACT = frozenset(name for name in dir(NodeSession) if not name.startswith("_")) | \
    frozenset(NodeSession.__annotations__)


def sources() -> dict[str, str]:
    files = sorted(SUITES_DIR.rglob("*.py")) + sorted((PROJECT_ROOT / "fixtures").glob("*.py"))
    return {str(f.relative_to(PROJECT_ROOT)): f.read_text() for f in files}


def _session(expr: ast.AST) -> bool:
    """``node``, ``session`` or ``self.session``."""
    if isinstance(expr, ast.Name):
        return expr.id in SESSION_NAMES
    return isinstance(expr, ast.Attribute) and expr.attr in SESSION_NAMES and isinstance(expr.value, ast.Name) \
        and expr.value.id == "self"


def violations(source: str) -> list[str]:
    """Every look at a node that is not the contract's, with its line."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("cci_conformance.node") \
                and node.module not in ALLOWED_NODE_MODULES:
            found.append(f"line {node.lineno}: imports {node.module} (node internals)")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("hasattr", "getattr") \
                and node.args and _session(node.args[0]):
            found.append(f"line {node.lineno}: {node.func.id} on a session (use require_feature)")
        elif isinstance(node, ast.Attribute) and _session(node.value) and node.attr not in CONTRACT:
            found.append(f"line {node.lineno}: .{node.attr} is not part of NodeSession")
        elif isinstance(node, ast.Attribute) and node.attr == "extra":
            found.append(f"line {node.lineno}: .extra (the snapshot's fields are typed)")
    return found


def test_suites_and_fixtures_use_only_the_contract():
    found = {path: v for path, text in sources().items() if (v := violations(text))}
    assert not found, found


def test_the_check_sees_each_way_around_the_contract():
    bad = ("from cci_conformance.node.cci_journal import read_cci_state\n"
           "def t(node, session):\n"
           "    if hasattr(node, 'pause_driver'):\n"
           "        node.pause_driver()\n"
           "    node.kubelet.joinpath('cpu_manager_state')\n"
           "    session.snapshot().extra['pending']\n")
    found = violations(bad)
    assert sorted(v.split(":")[0] for v in found) == ["line 1", "line 3", "line 5", "line 6"], found
    good = ("from cci_conformance.certify.outcomes import require_feature\n"
            "def t(node):\n    require_feature(node, 'driver-pause')\n    node.pause_driver()\n"
            "    node.persisted_state().pending\n")
    assert violations(good) == []

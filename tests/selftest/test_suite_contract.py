"""Suites and their fixtures look at a node through the contract only: no node internals, no hasattr probes."""

from __future__ import annotations

import ast

from cci_conformance.backends.base import NodeSession
from cci_conformance.dra.api import DraSession
from cci_conformance.paths import PROJECT_ROOT, SUITES_DIR

# What suites may import of the embedded node's package: the contract's value types. (The kubelet's own
# cpu_manager_state format, which every backend's kubelet writes, is cci_conformance/cpu_manager_state.py.)
NODE = "cci_conformance.node"
ALLOWED_NODE_MODULES = frozenset({"cci_conformance.node.api"})
IMPORTERS = frozenset({"import_module", "__import__", "import_from_path"})  # a module named by a string
SESSION_NAMES = frozenset({"node", "session"})  # how suites and fixtures name a NodeSession
CONTRACT = frozenset(name for name in dir(NodeSession) if not name.startswith("_")) | \
    frozenset(NodeSession.__annotations__)


# The DRA suites (suites/dra/) act through their own contract, DraSession (cci_conformance/dra/api.py), not
# NodeSession: they are checked against that one (test_dra_suites_use_only_the_dra_contract).
DRA_SUITES = SUITES_DIR / "dra"
DRA_CONTRACT = frozenset(name for name in dir(DraSession) if not name.startswith("_")) | \
    frozenset(DraSession.__annotations__)


def sources(dra: bool = False) -> dict[str, str]:
    if dra:
        files = sorted(DRA_SUITES.rglob("*.py"))
    else:
        files = [f for f in sorted(SUITES_DIR.rglob("*.py")) if DRA_SUITES not in f.parents]
        files += sorted((PROJECT_ROOT / "fixtures").glob("*.py"))
    return {str(f.relative_to(PROJECT_ROOT)): f.read_text() for f in files}


def _session(expr: ast.AST) -> bool:
    """``node``, ``session`` or ``self.session``."""
    if isinstance(expr, ast.Name):
        return expr.id in SESSION_NAMES
    return isinstance(expr, ast.Attribute) and expr.attr in SESSION_NAMES and isinstance(expr.value, ast.Name) \
        and expr.value.id == "self"


def _is_node(module: str) -> bool:
    return module == NODE or module.startswith(NODE + ".")


def _node_modules(node: ast.AST) -> list[str]:
    """The modules of the node package that ``node`` imports, in every form: ``from ... import``, ``import``,
    ``from cci_conformance import node``, and a dotted name handed to importlib or ``__import__``."""
    if isinstance(node, ast.ImportFrom) and not node.level:
        base = node.module or ""
        if base == "cci_conformance":
            return [f"{base}.{a.name}" for a in node.names if _is_node(f"{base}.{a.name}")]
        if _is_node(base):  # from cci_conformance.node import api: the module api, else the names of base
            return [f"{base}.{a.name}" if f"{base}.{a.name}" in ALLOWED_NODE_MODULES else base for a in node.names]
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if _is_node(a.name)]
    if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
            and isinstance(node.args[0].value, str) and _is_node(node.args[0].value):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name in IMPORTERS:
            return [node.args[0].value]
    return []


def _forwarding_lines(tree: ast.AST) -> set[int]:
    """The lines of ``getattr`` calls inside a ``__getattr__`` (a wrapper forwarding to its session: what it
    forwards is checked where it is used)."""
    return {n.lineno for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) and f.name == "__getattr__"
            for n in ast.walk(f) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "getattr"}


def violations(source: str, contract: frozenset[str] = CONTRACT, name: str = "NodeSession") -> list[str]:
    """Every look at a node that is not the contract's, with its line."""
    found = []
    tree = ast.parse(source)
    forwarding = _forwarding_lines(tree) if contract is DRA_CONTRACT else set()
    for node in ast.walk(tree):
        for module in _node_modules(node):
            if module not in ALLOWED_NODE_MODULES:
                found.append(f"line {node.lineno}: imports {module} (node internals)")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("hasattr", "getattr") \
                and node.args and _session(node.args[0]) and node.lineno not in forwarding:
            found.append(f"line {node.lineno}: {node.func.id} on a session (use require_feature)")
        elif isinstance(node, ast.Attribute) and _session(node.value) and node.attr not in contract:
            found.append(f"line {node.lineno}: .{node.attr} is not part of {name}")
        elif isinstance(node, ast.Attribute) and node.attr == "extra":
            found.append(f"line {node.lineno}: .extra (the snapshot's fields are typed)")
    return found


def test_suites_and_fixtures_use_only_the_contract():
    found = {path: v for path, text in sources().items() if (v := violations(text))}
    assert not found, found


def test_dra_suites_use_only_the_dra_contract():
    """suites/dra/ imports nothing of the node's internals and uses of a session only what DraSession offers."""
    assert sources(dra=True), "no DRA suite found"
    found = {path: v for path, text in sources(dra=True).items()
             if (v := violations(text, DRA_CONTRACT, "DraSession"))}
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
    imports = ("import cci_conformance.node.cpumanager.state\n"
               "from cci_conformance.node import cpumanager\n"
               "from cci_conformance import node as embedded\n"
               "from cci_conformance.node.cpumanager import loads\n"
               "import importlib\n"
               "importlib.import_module('cci_conformance.node.persisted')\n"
               "__import__('cci_conformance.node.codec')\n")
    assert [v.split(":")[0] for v in violations(imports)] == \
        ["line 1", "line 2", "line 3", "line 4", "line 6", "line 7"], violations(imports)
    assert violations("from cci_conformance.node import api\nfrom cci_conformance.node.api import PodSpec\n"
                      "from cci_conformance.cpu_manager_state import loads\n") == []
    good = ("from cci_conformance.certify.outcomes import require_feature\n"
            "def t(node):\n    require_feature(node, 'driver-pause')\n    node.pause_driver()\n"
            "    node.persisted_state().pending\n")
    assert violations(good) == []

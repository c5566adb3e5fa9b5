"""Every conformance test that restarts, kills, pauses or corrupts anything has a node of its own (static check)."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

from cci_conformance.paths import SUITES_DIR

# Session calls that take the node or the driver down, or change what a later test would find.
# stop_container is not one: stopping a pod's container is ordinary pod lifecycle on a healthy node.
DESTRUCTIVE = frozenset({"remove_container_behind_node", "kill", "killpg", "send_signal", "write_bytes",
                         "write_text", "unlink", "truncate"})
DESTRUCTIVE_PREFIXES = ("restart_", "stop_", "start_", "pause_", "resume_", "kill")
NOT_DESTRUCTIVE = frozenset({"stop_container"})


def _is_destructive(name: str) -> bool:
    return name not in NOT_DESTRUCTIVE and (name in DESTRUCTIVE or name.startswith(DESTRUCTIVE_PREFIXES))


def _definitions(trees: list[ast.Module]) -> dict[str, ast.AST]:
    return {node.name: node for tree in trees for node in tree.body
            if isinstance(node, ast.FunctionDef | ast.ClassDef)}


def _destructive_calls(root: ast.AST, defs: dict[str, ast.AST], seen: set[str]) -> list[str]:
    """Destructive calls in ``root`` and in every module-level function or class it names, transitively."""
    found = []
    for node in ast.walk(root):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and _is_destructive(node.func.attr):
            found.append(f"{node.func.attr} (line {node.lineno})")
        elif isinstance(node, ast.Name) and node.id in defs and node.id not in seen:
            seen.add(node.id)
            found += [f"{c} via {node.id}" for c in _destructive_calls(defs[node.id], defs, seen)]
    return found


def _marked_fresh(tree: ast.Module, func: ast.FunctionDef) -> bool:
    marks = list(func.decorator_list)
    for stmt in tree.body:  # module-level pytestmark
        if isinstance(stmt, ast.Assign) and any(getattr(t, "id", "") == "pytestmark" for t in stmt.targets):
            marks.append(stmt.value)
    return any("fresh_node" in ast.unparse(m) for m in marks)


def unisolated_tests(source: str, helpers: tuple[str, ...] = ()) -> dict[str, list[str]]:
    """Test name -> its destructive calls, for tests on the shared ``node`` without @pytest.mark.fresh_node."""
    tree = ast.parse(source)
    defs = _definitions([tree, *(ast.parse(h) for h in helpers)])
    out = {}
    for func in tree.body:
        if not (isinstance(func, ast.FunctionDef) and func.name.startswith("test_")):
            continue
        if "node" not in {a.arg for a in func.args.args} or _marked_fresh(tree, func):
            continue  # no shared node (e.g. only node_session_factory), or a node of its own
        calls = _destructive_calls(func, defs, {func.name})
        if calls:
            out[func.name] = calls
    return out


def test_the_scanner_follows_helpers_and_honours_the_marker():
    helper = "def bounce(session):\n    session.restart_driver(hard=True)\n"
    source = textwrap.dedent("""
        import pytest

        class Machine:
            def step(self):
                self.session.pause_driver()

        def test_direct(node):
            node.stop_driver()

        def test_via_helper(node, pods):
            bounce(node)

        def test_via_class(node):
            Machine.session = node

        @pytest.mark.fresh_node
        def test_marked(node):
            node.restart_node()

        def test_factory(node_session_factory):
            node_session_factory().restart_node()

        def test_harmless(node, pods):
            node.stop_container("p", "c")
            node.snapshot()
        """)
    found = unisolated_tests(source, (helper,))
    assert set(found) == {"test_direct", "test_via_helper", "test_via_class"}
    assert "restart_driver" in found["test_via_helper"][0] and "pause_driver" in found["test_via_class"][0]


def test_every_destructive_suite_test_has_a_node_of_its_own():
    """A test that restarts, kills, pauses or corrupts the shared node would leave its damage to the next
    test, which would then fail for it (docs/certification.md, "Isolation")."""
    helpers = tuple(p.read_text() for p in sorted(Path(SUITES_DIR).glob("*.py")) if not p.name.startswith("test_"))
    problems = {}
    for path in sorted(Path(SUITES_DIR).glob("test_*.py")):
        for name, calls in unisolated_tests(path.read_text(), helpers).items():
            problems[f"{path.name}::{name}"] = calls
    assert not problems, ("tests on the shared node that restart, kill, pause or corrupt it; add "
                          "@pytest.mark.fresh_node (or use node_session_factory): " +
                          "; ".join(f"{k}: {', '.join(v[:3])}" for k, v in problems.items()))

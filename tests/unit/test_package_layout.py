"""The package map has no import circle, and every built-in backend is found by its registry path."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

from cci_conformance.backends import registry
from cci_conformance.paths import PACKAGE_DIR

# Generated stubs and the copy a wheel build bundles are not the harness's layout.
SKIPPED = {"protos", "_bundled"}


def _modules(root: Path) -> dict[str, tuple[bool, Path]]:
    """Dotted name -> (is a package, file), for every module under ``root``."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if SKIPPED & set(parts):
            continue
        is_package = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_package else parts)] = (is_package, path)
    return out


def _imports(name: str, modules: dict[str, tuple[bool, Path]]):
    """The modules of ``modules`` that ``name`` imports, at any depth of its code (imports inside functions too)."""
    is_package, path = modules[name]
    package = name if is_package else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([node.module] if node.module else []))
            for alias in node.names:
                if f"{base}.{alias.name}" in modules:
                    yield f"{base}.{alias.name}"
                elif base in modules:
                    yield base
        elif isinstance(node, ast.Import):
            for alias in node.names:
                target = alias.name
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target:
                    yield target


def package_graph(root: Path) -> dict[str, set[str]]:
    """Edges between the map's parts. A part is a package without code subpackages (one job, one node), or a
    loose module of a package that has them (cci_conformance/cpuset.py, kind/cli.py sit beside subpackages
    as their peers, not as their parent)."""
    modules = _modules(root)

    def has_code_subpackages(package: str) -> bool:  # a module (not an __init__) two levels below it
        return any(not is_pkg and m.rpartition(".")[0].rpartition(".")[0] == package
                   for m, (is_pkg, _) in modules.items())

    def part(name: str) -> str:
        is_package, _ = modules[name]
        package = name if is_package else name.rpartition(".")[0]
        if not has_code_subpackages(package):
            return package
        return f"{name}.__init__" if is_package else name

    edges: dict[str, set[str]] = defaultdict(set)
    for name in modules:
        for target in _imports(name, modules):
            if part(name) != part(target):
                edges[part(name)].add(part(target))
    return edges


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected parts with more than one member (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            members = []
            while True:
                w = stack.pop()
                members.append(w)
                if w == v:
                    break
            if len(members) > 1:
                found.append(sorted(members))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_no_circle_between_the_packages_of_the_harness():
    assert circles(package_graph(PACKAGE_DIR)) == []


def test_the_check_finds_a_circle_through_a_function_level_import(tmp_path):
    root = tmp_path / "pkg"
    for sub in ("a", "b", "c"):
        (root / sub).mkdir(parents=True)
        (root / sub / "__init__.py").write_text("")
    (root / "__init__.py").write_text("")
    (root / "a" / "x.py").write_text("from ..b import y\n")
    (root / "b" / "y.py").write_text("def f():\n    from ..a import x\n")  # the form backends/base.py used
    (root / "c" / "z.py").write_text("from pkg.a import x\n")
    assert circles(package_graph(root)) == [["pkg.a", "pkg.b"]]


@pytest.mark.parametrize("name", sorted(registry.BUILTIN))
def test_each_builtin_backend_is_found_by_its_path(name):
    assert registry.backend_class(name).name == name


def test_an_unknown_backend_is_refused_naming_the_option_and_the_choices():
    from cci_conformance.errors import ConfigError

    with pytest.raises(ConfigError) as info:
        registry.get_backend("kvm")
    assert info.value.field == "--backend" and "embedded" in str(info.value) and "kind" in str(info.value)

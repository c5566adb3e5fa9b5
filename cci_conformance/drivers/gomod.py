"""What the harness reads from a Go driver's go.mod: its module path, its local replaces, its program's name."""

from __future__ import annotations

import re
from pathlib import Path

from ..errors import ConfigError

_MODULE_RE = re.compile(r'^\s*module\s+"?([^\s"]+)"?', re.MULTILINE)
_PACKAGE_MAIN_RE = re.compile(r"^package\s+main\b", re.MULTILINE)
_VERSION_ELEMENT_RE = re.compile(r"^v(?:[2-9]|[1-9][0-9]+)$")  # example.com/tool/v2: go build names it `tool`


def module_path(gomod: str) -> str:
    """The ``module`` line of a go.mod's text ('' when it has none)."""
    match = _MODULE_RE.search(_uncommented(gomod))
    return match.group(1) if match else ""


def _uncommented(text: str) -> str:
    return "\n".join(line.split("//", 1)[0] for line in text.splitlines())


def is_directory_path(target: str) -> bool:
    """A replace target that is a folder rather than a module version (Go's modfile.IsDirectoryPath)."""
    return target in (".", "..") or target.startswith(("./", "../", "/"))


def local_replaces(gomod: str) -> list[str]:
    """The folders a go.mod's replace directives point at, as written (``../../api``, ``./cci-api``).

    Only the main module's go.mod has replaces that count (Go ignores those of its dependencies)."""
    found = []
    for line in _uncommented(gomod).splitlines():
        if "=>" not in line:
            continue
        words = line.split("=>", 1)[1].split()
        target = words[0].strip('"') if words else ""
        if is_directory_path(target) and target not in found:
            found.append(target)
    return found


def program_name(module: str, main: str = ".") -> str:
    """The name ``go build`` gives the executable of package ``main`` of ``module``: the last element of its import
    path, or the one before a major-version element (example.com/drivers/acme-cpu -> acme-cpu, ./cmd/agent ->
    agent, example.com/acme/v2 -> acme)."""
    parts = [p for p in f"{module}/{main}".split("/") if p not in ("", ".")]
    if len(parts) > 1 and _VERSION_ELEMENT_RE.match(parts[-1]):
        return parts[-2]
    return parts[-1] if parts else ""


def main_package_problem(module_dir: Path, main: str = ".") -> str:
    """'' when ``main`` (a go build path inside the module, ``.`` or ``./cmd/x``) holds a non-test file of
    ``package main``; otherwise what is wrong."""
    folder = (module_dir / main).resolve()
    if folder != module_dir.resolve() and module_dir.resolve() not in folder.parents:
        return f"{main} is outside the module {module_dir}"
    if not folder.is_dir():
        return f"the main package folder {folder} does not exist"
    sources = [p for p in sorted(folder.glob("*.go")) if not p.name.endswith("_test.go")]
    if not sources:
        return f"{folder} holds no Go files"
    if not any(_PACKAGE_MAIN_RE.search(p.read_text(errors="replace")) for p in sources):
        return f"{folder} is not a main package (no `package main` in {', '.join(p.name for p in sources)})"
    return ""


def checked_module(source: Path, main: str = ".", *, file: str, field: str) -> tuple[str, str]:
    """The module path and the program name of the Go module at ``source`` built at package ``main``. Bad input is a
    ConfigError naming ``file`` and ``field`` (kind.source or dra.source; a bad main package is named as that
    section's main, kind.main or dra.main): the manifest's loader and the image build ask the same questions."""
    gomod_file = Path(source) / "go.mod"
    if not gomod_file.is_file():
        raise ConfigError(f"{source} is not a Go module (no go.mod)", file=file, field=field,
                          fix="name the folder of the driver's go.mod (the module of its main package), relative to "
                              "the manifest")
    problem = main_package_problem(Path(source), main)
    if problem:
        section = field.rpartition(".")[0] or "kind"
        raise ConfigError(problem, file=file, field=f"{section}.main" if main != "." else field,
                          fix=f"name the folder of the driver's main package: {section}.main, relative to {field} "
                              "(default \".\")")
    module = module_path(gomod_file.read_text())
    if not module:
        raise ConfigError(f"{gomod_file} has no module line", file=file, field=field,
                          fix="start the go.mod with `module <path>`")
    return module, program_name(module, main)

"""Build Go programs from their published modules through the module proxy, cached by module version."""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from ..runner import run, say
from .cache import Step, cache_root, exclusive

# Go builds are the slow part of a cold image build: generous deadline per binary.
BUILD_TIMEOUT_S = 3600


@dataclass(frozen=True)
class GoComponent:
    """A set of main packages of one published module, built into static binaries."""

    name: str
    module: str
    version: str
    binaries: dict[str, str]  # output file name -> main package path
    ldflags: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    # Version used for modules the upstream go.mod replaces with local directories
    # (Kubernetes' staging repositories, etcd's sibling modules); default: the module's own version.
    local_replace_version: str | None = None
    extra_requires: tuple[str, ...] = field(default=())


def go_env() -> dict[str, str]:
    """One module cache and one build cache on disk for every build, so nothing is compiled twice."""
    root = cache_root()
    return {
        "GOMODCACHE": str(root / "gomod"),
        "GOCACHE": str(root / "gocache"),
        "GOFLAGS": "-mod=mod",
        "GOTOOLCHAIN": "local",
        "CGO_ENABLED": "0",
        "GOWORK": "off",
    }


def go_version() -> str:
    return run(["go", "env", "GOVERSION"], timeout=60).strip()


_LOCAL_REPLACE = re.compile(r"^\s*(?:replace\s+)?(\S+)(?:\s+v\S+)?\s+=>\s+(\.\.?/\S*)\s*$")


_REQUIRE = re.compile(r"^\s*(?:require\s+)?(\S+)\s+v\S+(?:\s*//.*)?$")


def local_replaces(upstream_gomod: str) -> list[str]:
    """Required module paths that the upstream go.mod replaces with directories of its own repository.

    Replaces of modules the upstream does not require (etcd's guards against forbidden imports) are left out.
    """
    required, found = set(), []
    for line in upstream_gomod.splitlines():
        if "=>" in line:
            match = _LOCAL_REPLACE.match(line)
            if match:
                found.append(match.group(1))
        else:
            match = _REQUIRE.match(line)
            if match:
                required.add(match.group(1))
    return [path for path in found if path in required]


def _upstream_gomod(component: GoComponent, workdir: Path, log: Path) -> str:
    out = run(
        ["go", "mod", "download", "-json", f"{component.module}@{component.version}"],
        timeout=1800, env=go_env(), cwd=workdir, log=log,
    )
    return Path(json.loads(out)["GoMod"]).read_text()


def write_wrapper_module(component: GoComponent, workdir: Path, log: Path,
                         local_dirs: dict[str, str] | None = None) -> None:
    """A throw-away main module that requires the component and maps its local replaces to published ones.

    ``local_dirs`` maps module paths to directories under ``workdir`` (e.g. a patched copy of the
    component itself): those modules are built from the directories instead.
    """
    for stale in ("go.mod", "go.sum"):  # left by an interrupted earlier attempt
        (workdir / stale).unlink(missing_ok=True)
    upstream = _upstream_gomod(component, workdir, log)
    pinned = component.local_replace_version or component.version
    lines = [f"module cci-conformance.invalid/build/{component.name}", "", "go 1.24", ""]
    lines.append(f"require {component.module} {component.version}")
    lines += [f"require {req}" for req in component.extra_requires]
    replaced = local_replaces(upstream)
    if replaced or local_dirs:
        lines += ["", "replace ("]
        lines += [f"\t{path} => {path} {pinned}" for path in replaced]
        lines += [f"\t{path} => ./{directory}" for path, directory in sorted((local_dirs or {}).items())]
        lines.append(")")
    (workdir / "go.mod").write_text("\n".join(lines) + "\n")
    imports = "\n".join(f'\t_ "{pkg}"' for pkg in sorted(set(component.binaries.values())))
    (workdir / "tools.go").write_text(f"//go:build tools\n\npackage tools\n\nimport (\n{imports}\n)\n")


def _step(component: GoComponent) -> Step:
    """The build-cache step of a component's binaries (keyed by the component and the Go version)."""
    return Step(f"go-{component.name}", component, go_version())


def built(component: GoComponent) -> Path | None:
    """The directory of the component's binaries when an earlier build left them, else None; never builds."""
    step = _step(component)
    return step.dir / "bin" if step.done else None


@exclusive
def build(component: GoComponent) -> Path:
    """Build (or reuse) the component's binaries; returns the directory holding them."""
    step = _step(component)
    out_dir = step.dir / "bin"
    if step.done:
        return out_dir
    work = step.prepare()
    log = work / "build.log"
    say(f"building {component.name} {component.version} from Go modules (log: {log})")
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir()
    write_wrapper_module(component, work, log)
    run(["go", "mod", "tidy"], timeout=1800, env=go_env(), cwd=work, log=log, nice=True)
    for name, package in component.binaries.items():
        argv = ["go", "build", "-trimpath", "-ldflags", " ".join(("-s", "-w", *component.ldflags))]
        if component.tags:
            argv += ["-tags", ",".join(component.tags)]
        argv += ["-o", str(out_dir / name), package]
        run(argv, timeout=BUILD_TIMEOUT_S, env=go_env(), cwd=work, log=log, nice=True)
    step.finish(binaries=sorted(component.binaries))
    return out_dir


@exclusive
def build_local(name: str, source: Path) -> Path:
    """Build one of our own small Go programs (a single main package file) into a static binary."""
    text = source.read_text()
    step = Step(f"go-own-{name}", text, go_version())
    binary = step.dir / name
    if step.done:
        return binary
    work = step.prepare()
    (work / "go.mod").write_text(f"module cci-conformance.invalid/{name}\n\ngo 1.24\n")
    shutil.copyfile(source, work / "main.go")
    run(["go", "build", "-trimpath", "-ldflags", "-s -w", "-o", str(binary), "."],
        timeout=600, env=go_env(), cwd=work, log=work / "build.log", nice=True)
    step.finish()
    return binary


def executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)

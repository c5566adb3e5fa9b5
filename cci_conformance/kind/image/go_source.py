"""Build a Go driver's own source tree into a one-file image archive: its static binary on an empty layer.

Offline from docker and registries: modules come through the Go module proxy into the build cache (gobuild.go_env),
the binary is CGO_ENABLED=0 and -trimpath, and the archive is written by oci_archive.write_archive. Cached by the
module's sources and those of the local modules its go.mod replaces (``replace ... => ../../api``), which are laid
out in the step's work dir at the same relative place, so the go.mod builds unchanged."""

from __future__ import annotations

import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from ...drivers import gomod
from ...errors import ConfigError
from ..runner import CommandFailed, run, say
from . import gobuild
from .cache import Step, exclusive
from .oci_archive import ImageSpec, write_archive

# Never pulled: loaded into the nodes (`kind load image-archive`); `localhost/` never resolves to a registry.
REPOSITORY_PREFIX = "localhost/cci-conformance/"
# What go build reads: the module files and assembly; go ignores folders named testdata or starting with . or _,
# and -mod=mod ignores vendor/.
_SUFFIXES = (".go", ".s")
_SKIPPED_DIR = re.compile(r"^(?:[._].*|testdata|vendor)$")
LOG_TAIL_LINES = 20


@dataclass(frozen=True)
class BuiltDriverImage:
    reference: str
    archive: Path
    binary: Path
    seconds: float
    reused: bool


@dataclass(frozen=True)
class GoTree:
    """A Go module and the local modules its go.mod replaces, each as (folder under their common parent, files)."""

    modules: tuple[tuple[str, tuple[tuple[str, str], ...]], ...]  # the driver's module first
    main: str  # go build's package path inside the driver's module
    program: str  # the executable's name: go build's (gomod.program_name)

    @property
    def module_dir(self) -> str:
        return self.modules[0][0]


def module_files(root: Path) -> tuple[tuple[str, str], ...]:
    """(path under ``root``, text) of what go build reads: go.mod, go.sum, non-test .go and .s files."""
    out = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not _SKIPPED_DIR.match(d))
        for name in sorted(files):
            if name in ("go.mod", "go.sum") or (name.endswith(_SUFFIXES) and not name.endswith("_test.go")):
                path = Path(folder) / name
                out.append((path.relative_to(root).as_posix(), path.read_text()))
    return tuple(out)


def read_tree(source: Path, main: str = ".", *, file: str = "", field: str = "kind.source") -> GoTree:
    """The sources of the Go module at ``source`` and of the modules its go.mod replaces with local folders; bad
    input is a ConfigError naming ``file`` (the manifest, or the go.mod) and ``field`` (kind.source or dra.source;
    a bad main package is named as the section's main, kind.main or dra.main)."""
    source = Path(source).resolve()
    gomod_file = source / "go.mod"
    _, program = gomod.checked_module(source, main, file=file or str(gomod_file), field=field)
    text = gomod_file.read_text()
    roots = [source]
    for target in gomod.local_replaces(text):
        if target.startswith("/"):
            raise ConfigError(f"{gomod_file} replaces a module with the absolute path {target}", file=str(gomod_file),
                              field="replace", fix="write the folder relative to the go.mod (the build copies the "
                                                   "module and what it replaces, keeping their relative places)")
        folder = (source / target).resolve()
        if not (folder / "go.mod").is_file():
            raise ConfigError(f"{gomod_file} replaces a module with {target}, and {folder} has no go.mod",
                              file=str(gomod_file), field="replace",
                              fix="point the replace directive at the folder of that module's go.mod")
        if folder != source and source not in folder.parents and folder not in roots:  # inside: the module's own
            roots.append(folder)
    base = Path(os.path.commonpath(roots))
    modules = tuple((root.relative_to(base).as_posix(), module_files(root)) for root in roots)
    return GoTree(modules, main, program)


def default_repository(name: str) -> str:
    """``localhost/cci-conformance/<name>``, ``name`` made into a repository path component."""
    cleaned = re.sub(r"[^a-z0-9._-]+", "-", name.lower()).strip("-._") or "driver"
    return REPOSITORY_PREFIX + cleaned


def step_inputs(tree: GoTree, repository: str) -> tuple:
    """What the image is made of: sources, package, names, the Go version and this build's own steps."""
    recipe = Path(__file__).read_text()
    return tree.modules, tree.main, tree.program, repository, gobuild.go_version(), recipe


def image_spec(binary: Path, reference: str) -> ImageSpec:
    """The binary alone (CGO_ENABLED=0: no libc); state, sockets and sysfs come from the DaemonSet's mounts."""
    return ImageSpec(reference=reference, files={f"/{binary.name}": binary}, entrypoint=[f"/{binary.name}"])


def lay(files: tuple[tuple[str, str], ...], dest: Path, *, fresh: bool = True) -> None:
    """Write ``files`` under ``dest`` (emptied first when ``fresh``)."""
    if fresh and dest.exists():
        shutil.rmtree(dest)
    for rel, text in files:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / rel).write_text(text)


def _log_tail(log: Path) -> str:
    lines = log.read_text(errors="replace").strip().splitlines() if log.is_file() else []
    return "\n".join(lines[-LOG_TAIL_LINES:])


@exclusive
def build_image(source: Path, main: str = ".", *, repository: str | None = None, file: str = "",
                field: str = "kind.source") -> BuiltDriverImage:
    """Build (or reuse) the program of package ``main`` of the Go module at ``source`` and its image archive,
    ``<repository>:<digest of the inputs>`` (default repository: localhost/cci-conformance/<program>). A change
    to the module's or a replaced local module's Go files rebuilds. Errors name ``file`` and ``field``."""
    started = time.monotonic()
    tree = read_tree(source, main, file=file, field=field)
    file = file or str(Path(source).resolve() / "go.mod")
    if shutil.which("go") is None:
        # a CCI driver may name a prebuilt archive instead (kind.image); a dra/v1 manifest has no such field
        instead = ", or build the image yourself and name its archive in kind.image (docs/kind.md \"Your driver " \
            "on kind\")" if field.startswith("kind.") else ""
        raise ConfigError("go is not on PATH: the harness builds the driver's image with it", file=file, field=field,
                          fix=f"install Go (https://go.dev/dl){instead}")
    repository = repository or default_repository(tree.program)
    step = Step("go-driver-image", *step_inputs(tree, repository))
    binary = step.dir / "bin" / tree.program
    spec = image_spec(binary, f"{repository}:{step.key}")
    archive = step.dir / f"{tree.program}.oci.tar"
    if step.done and archive.is_file():
        return BuiltDriverImage(spec.reference, archive, binary, time.monotonic() - started, True)
    work = step.prepare()
    log = work / "build.log"
    log.unlink(missing_ok=True)
    say(f"building the Go driver image of {Path(source).resolve()} ({main}) (log: {log})")
    # A copy of the sources (the driver's go.mod and go.sum stay untouched by -mod=mod), and of the modules its
    # go.mod replaces, at their relative places.
    src = work / "src"
    if src.exists():
        shutil.rmtree(src)
    for rel, files in tree.modules:
        lay(files, src / rel, fresh=False)
    binary.parent.mkdir(exist_ok=True)
    binary.unlink(missing_ok=True)
    try:
        run(["go", "build", "-trimpath", "-buildvcs=false", "-ldflags", "-s -w", "-o", str(binary), main],
            timeout=gobuild.BUILD_TIMEOUT_S, env=gobuild.go_env(), cwd=src / tree.module_dir, log=log, nice=True)
    except CommandFailed as exc:
        tail = _log_tail(log) or str(exc)
        raise ConfigError(f"`go build {main}` of {Path(source).resolve()} failed; the end of its log:\n{tail}\n",
                          file=file, field=field,
                          fix=f"make `CGO_ENABLED=0 go build {main}` succeed in that folder (whole log: {log})"
                          ) from None
    if not gobuild.executable(binary):
        raise CommandFailed(f"the driver build finished without an executable {binary} (log: {log})")
    write_archive(spec, archive)
    shutil.rmtree(src, ignore_errors=True)
    step.finish(reference=spec.reference)
    return BuiltDriverImage(spec.reference, archive, binary, time.monotonic() - started, False)

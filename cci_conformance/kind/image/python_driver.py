"""Build an image archive that runs a Python CCI driver (``local.command`` starting with {python}) on kind."""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from ...drivers.manifest import DriverManifest
from ...errors import ConfigError
from ...paths import PACKAGE_DIR, PROJECT_ROOT
from .cache import Step, exclusive
from .oci_archive import ImageSpec, layer_bytes
from .oci_layers import Layer, gzip_layer_bytes, image_config, write_image
from .python_layers import DEPS_DIR, build_base, build_deps

# Never pulled: loaded into the nodes (`kind load image-archive`); `localhost/` never resolves to a registry.
IMAGE_REPOSITORY = "localhost/cci-conformance/python-driver"
PYTHON = "/usr/bin/python3"
# The project's layout is kept under one root, so a mutant's sys.path.insert(0, parents[3]) and the
# reference's parents[2] both land on APP_ROOT; a driver from elsewhere gets OUTSIDE_DRIVER_DIR.
APP_ROOT = "/opt/cci-conformance"
OUTSIDE_DRIVER_DIR = "/opt/driver"
PACKAGE = "cci_conformance"
REFERENCE = Path("drivers_under_test") / "reference"  # mutants subclass its policy
# A driver folder may hold what it built or left behind when run locally; none of it belongs in the image.
# An installed harness keeps the project's data folders in cci_conformance/_bundled: not the package's code.
SKIPPED_DIRS = frozenset({"__pycache__", "bin", "tests", "_bundled"})
SKIPPED_SUFFIXES = (".pyc", ".log", ".sock", ".jsonl")
APP_RECIPE = 1
# Each app step holds a whole archive (~50 MB, base and wheels included), and any edit of the harness
# makes a new one; a driver's older ones are dropped once no run can still be loading them.
STALE_AFTER_S = 3600.0
COMMAND_FIELD = "local.command"


@dataclass(frozen=True)
class PythonDriverImage:
    reference: str
    archive: Path
    python: str
    working_dir: str
    env: dict[str, str]
    seconds: float
    reused: bool
    layers: tuple[Layer, ...] = ()


def check_python_command(manifest: DriverManifest) -> None:
    """Only a driver started as ``{python} <script> ...`` can run on this image's interpreter."""
    first = manifest.command[0] if manifest.command else ""
    if first != "{python}":
        raise ConfigError(f"the Python driver image runs only drivers started by {{python}}, this one starts "
                          f"with {first!r}", file=str(manifest.path), field=COMMAND_FIELD,
                          fix='start local.command with "{python}" and the script, or give the driver its own '
                              "image (kind.image) with its program")


def _wanted(path: Path, top: Path) -> bool:
    parts = path.relative_to(top).parts
    if any(part in SKIPPED_DIRS or part.startswith(".") for part in parts[:-1]):
        return False
    return path.is_file() and not path.is_symlink() and not path.name.startswith(".") \
        and not path.name.endswith(SKIPPED_SUFFIXES)


def _tree(top: Path, inside: str) -> dict[str, Path]:
    return {f"{inside}/{p.relative_to(top).as_posix()}": p for p in sorted(top.rglob("*")) if _wanted(p, top)}


def driver_location(manifest: DriverManifest, repo_root: Path = PROJECT_ROOT) -> str:
    """Where the driver folder goes in the image: its project-relative path under APP_ROOT, else /opt/driver."""
    folder, root = manifest.folder.resolve(), repo_root.resolve()
    if folder != root and folder.is_relative_to(root):
        return f"{APP_ROOT}/{folder.relative_to(root).as_posix()}"
    return OUTSIDE_DRIVER_DIR


def app_files(manifest: DriverManifest, repo_root: Path = PROJECT_ROOT) -> dict[str, Path]:
    """The app layer: the harness package, drivers_under_test/reference (with its package marker), the driver."""
    files = _tree(PACKAGE_DIR, f"{APP_ROOT}/{PACKAGE}")
    marker = repo_root / REFERENCE.parent / "__init__.py"
    if marker.is_file():
        files[f"{APP_ROOT}/{REFERENCE.parent.as_posix()}/__init__.py"] = marker
    files.update(_tree(repo_root / REFERENCE, f"{APP_ROOT}/{REFERENCE.as_posix()}"))
    files.update(_tree(manifest.folder, driver_location(manifest, repo_root)))
    return files


def image_env() -> dict[str, str]:
    # The package root first so `import cci_conformance` works from any cwd; unbuffered for `kubectl logs`.
    return {"PYTHONPATH": f"{APP_ROOT}:{DEPS_DIR}", "PYTHONUNBUFFERED": "1"}


def _digests(files: dict[str, Path]) -> list[tuple[str, str, int]]:
    return [(inside, hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mode & 0o111)
            for inside, path in sorted(files.items())]


def _prune_older(keep: Step, working_dir: str) -> None:
    for other in keep.dir.parent.glob("python-app-*"):
        stamp = other / ".done"
        if other == keep.dir or not stamp.is_file() or time.time() - stamp.stat().st_mtime < STALE_AFTER_S:
            continue
        try:
            mine = json.loads(stamp.read_text()).get("working_dir") == working_dir
        except (OSError, ValueError):
            continue
        if mine:
            shutil.rmtree(other, ignore_errors=True)


@exclusive
def build_python_image(manifest: DriverManifest, repo_root: Path = PROJECT_ROOT) -> PythonDriverImage:
    """Build (or reuse) the driver's image archive; base and wheels are shared by every Python driver."""
    started = time.monotonic()
    check_python_command(manifest)
    base_step, base = build_base()
    _, deps = build_deps(base_step.facts()["python_version"])
    files = app_files(manifest, repo_root)
    working_dir = driver_location(manifest, repo_root)
    env = image_env()
    step = Step("python-app", base.diff_id, deps.diff_id, _digests(files), working_dir, env, APP_RECIPE)
    reference = f"{IMAGE_REPOSITORY}:{step.key}"
    archive = step.dir / "image.oci.tar"
    layer_path = step.dir / "app.tar.gz"
    if step.done:
        layers = (base, deps, Layer.from_facts(layer_path, step.facts()))
        return PythonDriverImage(reference, archive, PYTHON, working_dir, env, time.monotonic() - started, True,
                                 layers)
    step.prepare()
    app = gzip_layer_bytes(layer_bytes(ImageSpec(reference=reference, files=files)), layer_path)
    layers = (base, deps, app)
    config = image_config(list(layers), env=env, working_dir=working_dir, cmd=[PYTHON])
    write_image(reference, list(layers), config, archive)
    step.finish(reference=reference, working_dir=working_dir, **app.facts())
    _prune_older(step, working_dir)
    return PythonDriverImage(reference, archive, PYTHON, working_dir, env, time.monotonic() - started, False, layers)

"""Build the Go reference CCI driver into a single-layer image archive, offline and cached by its sources."""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from ..runner import CommandFailed, run, say
from . import gobuild
from .cache import Step, exclusive
from .kubelet_cci import API, REPO_ROOT
from .kubelet_cci import _module_files as module_files  # go.mod, go.sum, non-test .go
from .oci_archive import ImageSpec, write_archive

# The driver on kind is the Go reference (drivers_under_test/go-reference): one static binary, so the
# image is one file on an empty layer, like the control-plane images (docs/kind.md "CCI drivers").
# The Python reference would need an interpreter and its wheels in the image; the node rootfs has none.
DRIVER_SOURCE = REPO_ROOT / "drivers_under_test" / "go-reference"
BINARY = "go-reference"
# Never pulled: loaded into the nodes (`kind load image-archive`); `localhost/` never resolves to a registry.
IMAGE_REPOSITORY = "localhost/cci-conformance/go-reference"
# Where the sources are laid out in the step dir: go.mod replaces the API module with ../../api.
SOURCE_SUBDIR = Path("drivers_under_test") / "go-reference"


@dataclass(frozen=True)
class BuiltDriverImage:
    reference: str
    archive: Path
    binary: Path
    seconds: float
    reused: bool


def _inputs() -> tuple:
    recipe = Path(__file__).read_text()  # this build's own steps are an input too
    return module_files(DRIVER_SOURCE), module_files(API), gobuild.go_version(), recipe


def image_spec(binary: Path, tag: str) -> ImageSpec:
    """The binary alone (CGO_ENABLED=0: no libc); state, sockets and sysfs come from the DaemonSet's mounts."""
    return ImageSpec(reference=f"{IMAGE_REPOSITORY}:{tag}", files={f"/{BINARY}": binary},
                     entrypoint=[f"/{BINARY}"])


def _lay(files: tuple[tuple[str, str], ...], dest: Path) -> None:
    if dest.exists():
        shutil.rmtree(dest)
    for rel, text in files:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / rel).write_text(text)


@exclusive
def build_image() -> BuiltDriverImage:
    """Build (or reuse) the driver binary and its image archive; a change to its or the API's sources rebuilds."""
    started = time.monotonic()
    driver_files, api_files, go_version, recipe = _inputs()
    step = Step("cci-driver-image", driver_files, api_files, go_version, recipe)
    spec = image_spec(step.dir / "bin" / BINARY, step.key)
    archive = step.dir / f"{BINARY}.oci.tar"
    if step.done:
        return BuiltDriverImage(spec.reference, archive, step.dir / "bin" / BINARY, time.monotonic() - started, True)
    work = step.prepare()
    log = work / "build.log"
    say(f"building the Go reference CCI driver image (log: {log})")
    # A copy of the sources (the repository's files stay untouched by -mod=mod), laid out as in the repository.
    _lay(driver_files, work / "src" / SOURCE_SUBDIR)
    _lay(api_files, work / "src" / "api")
    binary = work / "bin" / BINARY
    binary.parent.mkdir(exist_ok=True)
    run(["go", "build", "-trimpath", "-buildvcs=false", "-ldflags", "-s -w", "-o", str(binary), "."],
        timeout=gobuild.BUILD_TIMEOUT_S, env=gobuild.go_env(), cwd=work / "src" / SOURCE_SUBDIR, log=log, nice=True)
    if not gobuild.executable(binary):
        raise CommandFailed(f"the driver build finished without an executable {binary} (log: {log})")
    write_archive(spec, archive)
    shutil.rmtree(work / "src", ignore_errors=True)
    step.finish(reference=spec.reference)
    return BuiltDriverImage(spec.reference, archive, binary, time.monotonic() - started, False)

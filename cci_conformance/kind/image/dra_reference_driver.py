"""Build our reference DRA CPU driver into a single-layer image archive, offline and cached by its sources."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from ..runner import CommandFailed, run, say
from . import gobuild
from .cache import Step, exclusive
from .go_driver import BuiltDriverImage
from .go_driver import _lay as lay_files
from .kubelet_cci import REPO_ROOT
from .kubelet_cci import _module_files as module_files  # go.mod, go.sum, non-test .go
from .oci_archive import ImageSpec, write_archive

# drivers_under_test/dra-reference: a DRA kubelet plugin and an NRI plugin in one static binary, so the
# image is that one file on an empty layer, as for the Go CCI reference (cci_driver_image.py).
DRIVER_SOURCE = REPO_ROOT / "drivers_under_test" / "dra-reference"
BINARY = "dra-reference"
# Never pulled: loaded into the nodes (`kind load image-archive`); `localhost/` never resolves to a registry.
IMAGE_REPOSITORY = "localhost/cci-conformance/dra-reference"


def _inputs(source: Path) -> tuple:
    recipe = Path(__file__).read_text()  # this build's own steps are an input too
    return module_files(source), gobuild.go_version(), recipe


def image_spec(binary: Path, tag: str) -> ImageSpec:
    """The binary alone (CGO_ENABLED=0: no libc); sysfs, sockets, CDI and state dirs come from the mounts."""
    return ImageSpec(reference=f"{IMAGE_REPOSITORY}:{tag}", files={f"/{BINARY}": binary},
                     entrypoint=[f"/{BINARY}"])


@exclusive
def build_image(source: Path = DRIVER_SOURCE) -> BuiltDriverImage:
    """Build (or reuse) the driver binary and its image archive; any change to its Go sources rebuilds."""
    started = time.monotonic()
    files, go_version, recipe = _inputs(source)
    step = Step("dra-reference-image", files, go_version, recipe)
    spec = image_spec(step.dir / "bin" / BINARY, step.key)
    archive = step.dir / f"{BINARY}.oci.tar"
    if step.done:
        return BuiltDriverImage(spec.reference, archive, step.dir / "bin" / BINARY, time.monotonic() - started, True)
    work = step.prepare()
    log = work / "build.log"
    say(f"building the reference DRA CPU driver image (log: {log})")
    # A copy of the sources, so -mod=mod never touches the repository's go.mod/go.sum.
    lay_files(files, work / "src")
    binary = work / "bin" / BINARY
    binary.parent.mkdir(exist_ok=True)
    run(["go", "build", "-trimpath", "-buildvcs=false", "-ldflags", "-s -w", "-o", str(binary), "."],
        timeout=gobuild.BUILD_TIMEOUT_S, env=gobuild.go_env(), cwd=work / "src", log=log, nice=True)
    if not gobuild.executable(binary):
        raise CommandFailed(f"the driver build finished without an executable {binary} (log: {log})")
    write_archive(spec, archive)
    shutil.rmtree(work / "src", ignore_errors=True)
    step.finish(reference=spec.reference)
    return BuiltDriverImage(spec.reference, archive, binary, time.monotonic() - started, False)

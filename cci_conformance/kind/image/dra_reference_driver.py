"""Build a DRA driver's Go source tree (ours by default) into a one-layer image archive, offline, cached by source."""

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


def program_name(source: Path, main: str = ".") -> str:
    """The executable's name in the image: the main package's folder (dra-reference, or dracpu for ./cmd/dracpu)."""
    return source.name if main.strip("./") == "" else main.rstrip("/").rsplit("/", 1)[-1]


def image_spec(binary: Path, tag: str, repository: str = IMAGE_REPOSITORY) -> ImageSpec:
    """The binary alone (CGO_ENABLED=0: no libc); sysfs, sockets, CDI and state dirs come from the mounts."""
    return ImageSpec(reference=f"{repository}:{tag}", files={f"/{binary.name}": binary},
                     entrypoint=[f"/{binary.name}"])


@exclusive
def build_image(source: Path = DRIVER_SOURCE, main: str = ".") -> BuiltDriverImage:
    """Build (or reuse) the binary of ``main`` in the Go module at ``source`` and its image archive; any change to
    the module's Go sources rebuilds. Another tree than ours gets an image repository named after its folder."""
    started = time.monotonic()
    files, go_version, recipe = _inputs(source)
    name = program_name(source, main)
    step = Step("dra-reference-image", files, go_version, recipe, main)
    repository = IMAGE_REPOSITORY if source.resolve() == DRIVER_SOURCE.resolve() else \
        f"localhost/cci-conformance/dra-source-{source.name.lower()}"
    spec = image_spec(step.dir / "bin" / name, step.key, repository)
    archive = step.dir / f"{name}.oci.tar"
    if step.done:
        return BuiltDriverImage(spec.reference, archive, step.dir / "bin" / name, time.monotonic() - started, True)
    work = step.prepare()
    log = work / "build.log"
    say(f"building the DRA driver image of {source.name} ({main}) (log: {log})")
    # A copy of the sources, so -mod=mod never touches the tree's go.mod/go.sum.
    lay_files(files, work / "src")
    binary = work / "bin" / name
    binary.parent.mkdir(exist_ok=True)
    run(["go", "build", "-trimpath", "-buildvcs=false", "-ldflags", "-s -w", "-o", str(binary), main],
        timeout=gobuild.BUILD_TIMEOUT_S, env=gobuild.go_env(), cwd=work / "src", log=log, nice=True)
    if not gobuild.executable(binary):
        raise CommandFailed(f"the driver build finished without an executable {binary} (log: {log})")
    write_archive(spec, archive)
    shutil.rmtree(work / "src", ignore_errors=True)
    step.finish(reference=spec.reference)
    return BuiltDriverImage(spec.reference, archive, binary, time.monotonic() - started, False)

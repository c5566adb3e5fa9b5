"""The Go reference CCI driver's image: its source tree built by go_source, one static binary on an empty layer."""

from __future__ import annotations

from pathlib import Path

from . import (
    go_source,
    gobuild,  # noqa: F401  (tests fake gobuild.go_version through this module)
)
from .go_source import BuiltDriverImage
from .kubelet_cci import REPO_ROOT
from .oci_archive import ImageSpec

# The driver on kind is the Go reference (drivers_under_test/go-reference): one static binary, so the
# image is one file on an empty layer, like the control-plane images (docs/kind.md "CCI drivers").
# Its go.mod replaces the API module with ../../api: go_source lays both out as in the repository.
DRIVER_SOURCE = REPO_ROOT / "drivers_under_test" / "go-reference"
BINARY = "go-reference"
# Never pulled: loaded into the nodes (`kind load image-archive`); `localhost/` never resolves to a registry.
# The repository go_source names it after its program too, so its manifest's kind.source builds the same image.
IMAGE_REPOSITORY = go_source.default_repository(BINARY)


def _inputs() -> tuple:
    """What the image's cache step is keyed by: the driver's and the API's sources, names, Go, the recipe."""
    return go_source.step_inputs(go_source.read_tree(DRIVER_SOURCE), IMAGE_REPOSITORY)


def image_spec(binary: Path, tag: str) -> ImageSpec:
    """The binary alone (CGO_ENABLED=0: no libc); state, sockets and sysfs come from the DaemonSet's mounts."""
    return go_source.image_spec(binary, f"{IMAGE_REPOSITORY}:{tag}")


def build_image() -> BuiltDriverImage:
    """Build (or reuse) the driver binary and its image archive; a change to its or the API's sources rebuilds."""
    return go_source.build_image(DRIVER_SOURCE, repository=IMAGE_REPOSITORY,
                                 file=str(DRIVER_SOURCE / "driver.yaml"))

"""The image of a dra/v1 driver, built as its manifest says: from a Go module version or from a local source tree."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..drivers.manifest import DriverManifest
from ..errors import ConfigError

DRA_DRIVER_CPU = "github.com/kubernetes-sigs/dra-driver-cpu"


@dataclass(frozen=True)
class DraDriverImage:
    """An image archive to load into the node, and how the DaemonSet runs it."""

    reference: str
    archive: Path
    program: str  # the executable inside the image, first word of the container's command
    driver_name: str  # its ResourceSlices' driver, and the DeviceClass the harness creates
    args: tuple[str, ...]  # the manifest's extra flags (a mutant's --mutant=NAME)
    reused: bool
    origin: str = "go build"  # report.json driver_image.origin (report.schema.json): go build, vendor archive


def build(manifest: DriverManifest) -> DraDriverImage:
    """Build (or take from the cache) the image ``manifest`` describes; ConfigError names what cannot be built.

    ``dra.image``: the vendor's archive, loaded as is; ``dra.program`` is started in it.

    ``dra.source``: the Go module in that folder, its main package ``dra.main`` (default its root), one static
    binary on an empty layer, built as a CCI driver's ``kind.source`` is (kind/image/go_source.py; our reference
    driver, its mutants, a vendor's tree, an upstream checkout). Else ``dra.module`` at ``version`` from the module
    proxy, which the harness knows how to build for dra-driver-cpu only (upstream_image.py; its main package is
    cmd/dracpu).
    """
    if manifest.dra_image is not None:
        from ..kind.cci.driver_image import archive_reference

        reference = archive_reference(manifest.dra_image, str(manifest.path), field="dra.image")
        return DraDriverImage(reference, manifest.dra_image, manifest.dra_program, manifest.dra_driver,
                              manifest.dra_args, True, "vendor archive")
    if manifest.dra_source is not None:
        from ..kind.image import go_source  # Go and the build cache only when a node is opened

        # the repository is named after the program, not the manifest: the mutants share our reference's build
        built = go_source.build_image(manifest.dra_source, manifest.dra_main, file=str(manifest.path),
                                      field="dra.source")
        return DraDriverImage(built.reference, built.archive, "/" + built.binary.name, manifest.dra_driver,
                              manifest.dra_args, built.reused)
    if manifest.dra_module != DRA_DRIVER_CPU:
        raise ConfigError(f"the harness builds {DRA_DRIVER_CPU} from the module proxy, not {manifest.dra_module}",
                          file=str(manifest.path), field="dra.source",
                          fix="point dra.source at the driver's Go source tree (its go.mod and main package)")
    if not manifest.version:
        raise ConfigError("a module build needs the version to fetch", file=str(manifest.path), field="version",
                          fix="set version: to a tag the module proxy serves, e.g. v0.2.0")
    from . import upstream_image

    built_cpu = upstream_image.build_image(manifest.version)
    return DraDriverImage(built_cpu.reference, built_cpu.archive, upstream_image.PROGRAM, manifest.dra_driver,
                          manifest.dra_args, built_cpu.reused)

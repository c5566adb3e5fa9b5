"""Build kubernetes-sigs/dra-driver-cpu offline from its published Go module into a single-layer image archive."""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError
from ..kind.image import gobuild
from ..kind.image.cache import Step, exclusive
from ..kind.image.gobuild import GoComponent
from ..kind.image.oci_archive import ImageSpec, write_archive
from ..kind.runner import CommandFailed, run, say

MODULE = "github.com/kubernetes-sigs/dra-driver-cpu"
MAIN_PACKAGE = f"{MODULE}/cmd/dracpu"
# The image is never pulled: it is loaded into the nodes with `kind load image-archive`, and the
# DaemonSet says imagePullPolicy: Never. `localhost/` keeps it from ever resolving to a registry.
IMAGE_REPOSITORY = "localhost/cci-conformance/dra-driver-cpu"
PROGRAM = "/dracpu"  # where upstream's Dockerfile puts the binary; the DaemonSet's command starts with it


@dataclass(frozen=True)
class Target:
    """One build target: a version the Go module proxy serves, and where that fact comes from."""

    version: str
    note: str


# What the module proxy served when probed (drivers_under_test/dra-driver-cpu/README.md has the
# exact answers): the release v0.2.0 only. The version list, @latest, @main, v0.1.0 and
# pseudo-versions of later commits were all refused with 403, so there is no second target yet;
# add one here when `probe()` shows the proxy serving it.
TARGETS: tuple[Target, ...] = (
    Target("v0.2.0", "release tag v0.2.0 (commit 7f955682842f, 2026-06-22)"),
)

# The queries `probe()` sends; each answer (version or exact refusal) is recorded in the README.
PROBE_QUERIES: tuple[str, ...] = (
    "-versions",
    "@latest",
    "@main",
    "@v0.1.0",
    "@v0.2.0",
)


def target(version: str) -> Target:
    """The build target of ``version``, or an error naming the versions that can be built."""
    for known in TARGETS:
        if known.version == version:
            return known
    served = ", ".join(t.version for t in TARGETS)
    raise ConfigError(f"dra-driver-cpu {version} is not a build target (the module proxy serves {served})",
                      field="--version", fix="pick one of those, or add a Target after checking it with probe()")


def component(version: str) -> GoComponent:
    """The wrapper-module build of one version: the driver binary from ``cmd/dracpu``, static.

    A plain ``go install <module>/cmd/dracpu@<version>`` fails before building: it asks the proxy
    for the module's version list (to look for a deprecation notice) and the proxy refuses that list.
    A wrapper module that requires the exact version never asks for the list.
    """
    target(version)
    return GoComponent(
        name=f"dra-driver-cpu-{version}",
        module=MODULE,
        version=version,
        binaries={"dracpu": MAIN_PACKAGE},
    )


def image_reference(version: str) -> str:
    return f"{IMAGE_REPOSITORY}:{version}"


def image_spec(binary: Path, version: str) -> ImageSpec:
    """What the container needs at run time, as upstream's Dockerfile ships it, minus what a static binary does not use.

    Upstream copies the binary to ``/dracpu`` and again to ``/dracpu-gatherinfo`` (the program picks its
    diagnostics mode from the name it is run as) on a distroless base. The binary is built with
    ``CGO_ENABLED=0`` here, so it needs no libc; it reaches the API server through the in-cluster
    service-account CA, not system CAs; it logs to stderr. So the layer holds the binary, the name
    alias as a symlink and ``/tmp``.
    """
    return ImageSpec(
        reference=image_reference(version),
        files={PROGRAM: binary},
        symlinks={"/dracpu-gatherinfo": "dracpu"},
        entrypoint=[PROGRAM],
    )


@dataclass(frozen=True)
class BuiltImage:
    version: str
    reference: str
    archive: Path
    binary: Path
    binary_sha256: str
    seconds: float
    reused: bool


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


@exclusive
def build_image(version: str) -> BuiltImage:
    """Build (or reuse) the driver binary of ``version`` and its image archive; both cached by input digest."""
    started, wall_start = time.monotonic(), time.time()
    binary = gobuild.build(component(version)) / "dracpu"
    if not gobuild.executable(binary):
        raise CommandFailed(f"the build of dra-driver-cpu {version} finished without an executable {binary}")
    # gobuild keeps its own cache key; a binary older than this call came from its cache.
    reused_binary = binary.stat().st_mtime < wall_start
    binary_sha = _sha256(binary)
    spec = image_spec(binary, version)
    # Keyed by the binary's digest and the spec, so a rebuilt binary or a changed layout gives a new archive.
    step = Step("dracpu-image", version, binary_sha, spec.reference, spec.symlinks, spec.entrypoint, spec.env)
    archive = step.dir / f"dra-driver-cpu-{version}.oci.tar"
    reused = reused_binary and step.done
    if not step.done:
        step.prepare()
        write_archive(spec, archive)
        step.finish(reference=spec.reference, binary_sha256=binary_sha)
    return BuiltImage(version, spec.reference, archive, binary, binary_sha, time.monotonic() - started, reused)


def probe(queries: tuple[str, ...] = PROBE_QUERIES, *, timeout: float = 120) -> dict[str, str]:
    """Ask the module proxy (through ``go list -m``) what it serves; the answer or the exact refusal per query."""
    answers = {}
    for query in queries:
        argv = ["go", "list", "-m", "-versions", MODULE] if query == "-versions" else \
            ["go", "list", "-m", f"{MODULE}{query}"]
        try:
            answers[" ".join(argv)] = run(argv, timeout=timeout, env=gobuild.go_env()).strip()
        except CommandFailed as exc:
            # Below the command line, the message holds go's own error: what the README records.
            answers[" ".join(argv)] = "refused: " + " ".join(
                line.strip() for line in str(exc).strip().splitlines()[1:])
    return answers


def add_parser(subparsers) -> None:
    """``cci-conformance kind build-dra-cpu``: build the image archive(s); prints one JSON line per version."""
    parser = subparsers.add_parser("build-dra-cpu", help="build kubernetes-sigs/dra-driver-cpu offline into an "
                                   "image archive (cached by version)")
    parser.add_argument("--version", action="append", default=None,
                        help=f"version to build (repeatable; default: every target: "
                             f"{', '.join(t.version for t in TARGETS)})")
    parser.add_argument("--probe", action="store_true", help="only ask the module proxy which versions it serves")
    parser.set_defaults(handler=_cli)


def _cli(args) -> int:
    if args.probe:
        print(json.dumps(probe(), indent=1))
        return 0
    for version in args.version or [t.version for t in TARGETS]:
        say(f"dra-driver-cpu {version}")
        built = build_image(version)
        print(json.dumps({"version": built.version, "image": built.reference, "archive": str(built.archive),
                          "binary_sha256": built.binary_sha256, "seconds": round(built.seconds, 1),
                          "reused": built.reused}))
    return 0

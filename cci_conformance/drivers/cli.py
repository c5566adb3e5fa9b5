"""``cci-conformance driver``: check a driver manifest, list capabilities, start a driver on a library machine, or
build a Go driver's image archive for the kind backend."""

from __future__ import annotations

import argparse
import sys
import threading

from ..protocol.capabilities import KNOWN_CAPABILITIES
from .manifest import load_manifest


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("driver", help="driver manifests and driver processes")
    sub = parser.add_subparsers(dest="driver_command", metavar="ACTION")

    check = sub.add_parser("check", help="validate a driver manifest (a folder or its driver.yaml)")
    check.add_argument("path")
    check.set_defaults(handler=_check)

    caps = sub.add_parser("capabilities", help="list the capability names a manifest may declare")
    caps.set_defaults(handler=_capabilities)

    start = sub.add_parser("start", help="start a driver on a rendered library topology until Ctrl-C")
    start.add_argument("path")
    start.add_argument("--topology", default="server-2s8c-smt2-intel", help="library topology name")
    start.set_defaults(handler=_start)

    image = sub.add_parser("image", help="build a Go driver into an image archive for kind.image",
                           description="Build the Go driver in DIR (its driver.yaml's kind.source, or DIR itself "
                                       "when it holds a go.mod) into a static binary on an empty layer, write the "
                                       "image archive and print the kind section that runs it "
                                       '(docs/kind.md "Your driver on kind").')
    image.add_argument("folder", metavar="DIR")
    image.add_argument("--out", metavar="FILE", help="where to write the archive (default DIR/<name>.oci.tar)")
    image.add_argument("--main", metavar="PKG", help="the main package inside the module (default: kind.main, or .)")
    image.set_defaults(handler=_image)
    parser.set_defaults(handler=lambda args: parser.print_help() or 2)


def _check(args: argparse.Namespace) -> int:
    m = load_manifest(args.path)
    print(f"{m.path}: ok: driver {m.name!r}, protocol {m.protocol}, capabilities: "
          f"{', '.join(sorted(m.capabilities)) or '(none)'}")
    return 0


def _capabilities(args: argparse.Namespace) -> int:
    width = max(map(len, KNOWN_CAPABILITIES))
    for name, meaning in KNOWN_CAPABILITIES.items():
        print(f"{name:<{width}}  {meaning}")
    return 0


def _image(args: argparse.Namespace) -> int:
    from ..kind.cci.driver_image import make_archive
    from ..kind.runner import CommandFailed

    try:
        made = make_archive(args.folder, args.out, args.main)
    except CommandFailed as exc:  # the toolchain itself (bad input is a ConfigError naming the file)
        print(f"cci-conformance: error: {exc}", file=sys.stderr)
        return 1
    how = "reused from the build cache" if made.reused else f"built in {made.seconds:.1f} s"
    print(f"image:   {made.reference} ({how})")
    print(f"archive: {made.archive}")
    print(f"sha256:  {made.digest.removeprefix('sha256:')}")
    print("for driver.yaml (in place of kind.source and kind.main; placeholders as in local.command):")
    print(made.kind_section(), end="")
    return 0


def _start(args: argparse.Namespace) -> int:
    from ..topology import library
    from .client import LocalDriver

    m = load_manifest(args.path)
    with LocalDriver(m, library.load(args.topology)) as driver:
        print(f"driver {m.name} registered; CCI socket {driver.client.socket_path}; "
              f"log {driver.process.log_path}; Ctrl-C stops it")
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
    return 0

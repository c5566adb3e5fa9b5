"""``cci-conformance driver``: check a driver manifest, list capabilities, start a driver on a library machine, or
build a Go driver's image archive for the kind backend."""

from __future__ import annotations

import argparse
import importlib
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

    image = sub.add_parser("image", help="build a Go driver into an image archive for kind.image or dra.image",
                           description="Build the Go driver in DIR (its driver.yaml's kind.source, or dra.source of "
                                       "a dra/v1 driver, or DIR itself when it holds a go.mod) into a static binary "
                                       "on an empty layer, write the image archive and print the manifest keys that "
                                       'run it (docs/kind.md "Your driver on kind", docs/dra-cpu.md).')
    image.add_argument("folder", metavar="DIR")
    image.add_argument("--out", metavar="FILE", help="where to write the archive (default DIR/<name>.oci.tar)")
    image.add_argument("--main", metavar="PKG",
                       help="the main package inside the module (default: kind.main or dra.main, or .)")
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


# An image is kind's business, and kind/ imports this package (manifests), never the reverse: the handler is named
# by its module path and imported only when asked, as the cci-conformance dispatcher names its sub-commands
# (tests/unit/test_package_layout.py proves there is no circle).
IMAGE_HANDLER = "cci_conformance.kind.cli:driver_image_command"


def _image(args: argparse.Namespace) -> int:
    module, _, name = IMAGE_HANDLER.partition(":")
    return int(getattr(importlib.import_module(module), name)(args))


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

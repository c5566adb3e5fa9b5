"""The ``cci-conformance`` command: a thin dispatcher over the library's sub-commands."""

from __future__ import annotations

import argparse
import importlib
import sys

from .errors import ConfigError

# Each module defines add_parser(subparsers) and sets a ``handler(args) -> int`` default on its parser.
SUBCOMMAND_MODULES = {
    "topology": "cci_conformance.topology.cli",
    "run": "cci_conformance.certify.cli",
    "node": "cci_conformance.node.cli",
    "driver": "cci_conformance.drivers.cli",
    "init-driver": "cci_conformance.drivers.scaffold",
    "kind": "cci_conformance.kind.cli",
    "report": "cci_conformance.certify.report_cli",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cci-conformance", description=__doc__)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in SUBCOMMAND_MODULES.values():
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name == module:  # sub-command not built yet
                continue
            raise
        mod.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    if not argv:  # no arguments: the main job, certify the reference driver
        argv = ["run"]
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        parser.print_help()
        return 2
    try:
        return int(args.handler(args) or 0)
    except ConfigError as exc:
        print(f"cci-conformance: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("cci-conformance: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

"""``cci-conformance topology list | show | render | validate``: a thin layer over the topology library."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from . import library
from .render import render
from .show import show_text, summary, to_json
from .spec import load_spec


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("topology", help="faked machines: list, show, render, validate")
    sub = parser.add_subparsers(dest="topology_command", metavar="ACTION")
    parser.set_defaults(handler=lambda args: (parser.print_help(), 2)[1])

    p = sub.add_parser("list", help="the library machines")
    p.set_defaults(handler=cmd_list)

    p = sub.add_parser("show", help="a picture of a machine")
    p.add_argument("machine", metavar="NAME|FILE", help="library name or path of a topology YAML")
    p.add_argument("--json", action="store_true", help="print the model as JSON")
    p.set_defaults(handler=cmd_show)

    p = sub.add_parser("render", help="write DIR/sys/... and DIR/proc/cpuinfo for a machine")
    p.add_argument("machine", metavar="NAME|FILE", help="library name or path of a topology YAML")
    p.add_argument("--out", required=True, type=Path, metavar="DIR", help="output directory (created)")
    p.set_defaults(handler=cmd_render)

    p = sub.add_parser("validate", help="check a topology YAML (exit 2 with the problem when invalid)")
    p.add_argument("file", type=Path, metavar="FILE")
    p.set_defaults(handler=cmd_validate)


def cmd_list(args: argparse.Namespace) -> int:
    width = max((len(n) for n in library.names()), default=0)
    for name in library.names():
        print(f"{name:<{width}}  {summary(library.load(name))}")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    topology = library.resolve(args.machine)
    print(json.dumps(to_json(topology), indent=2) if args.json else show_text(topology), end="\n" if args.json else "")
    return 0


def cmd_render(args: argparse.Namespace) -> int:
    topology = library.resolve(args.machine)
    out = render(topology, args.out)
    print(f"rendered {topology.name}: {out / 'sys'} (sysfs root), {out / 'proc' / 'cpuinfo'}")
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    topology = load_spec(args.file)
    print(f"{args.file}: valid: {summary(topology)}")
    return 0

"""``cci-conformance init-driver``: write a manifest and a minimal driver that registers and refuses every claim."""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
from pathlib import Path
from string import Template

from ..errors import ConfigError
from ..paths import GO_API_DIR
from .manifest import load_manifest

TEMPLATES_DIR = Path(__file__).parent / "templates"
LANGUAGES = {"python": ("driver.yaml", "driver.py"), "go": ("driver.yaml", "main.go", "go.mod")}
GO_API_COPY = "cci-api"  # go.mod's replace directive points here
GO_TIDY_DEADLINE_S = 300
_NAME_RE = re.compile(r"^[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?$")  # the manifest schema's `name` pattern


def default_name(folder: Path) -> str:
    """The folder's name made into a driver name (lower case, other characters become '-')."""
    return re.sub(r"[^a-z0-9.-]+", "-", folder.resolve().name.lower()).strip("-.") or "my-driver"


def init_driver(folder: Path | str, lang: str, name: str | None = None) -> list[Path]:
    """Write the skeleton of ``lang`` into ``folder``; never overwrites a file. Returns the files written."""
    folder = Path(folder)
    if lang not in LANGUAGES:
        raise ConfigError(f"unknown language {lang!r}", field="--lang", fix="use one of " + ", ".join(LANGUAGES))
    name = name or default_name(folder)
    if not _NAME_RE.match(name):
        raise ConfigError(f"{name!r} is not a driver name", field="--name",
                          fix="lower-case letters, digits, '-' and '.', at most 63, starting and ending alphanumeric")
    targets = [folder / f for f in LANGUAGES[lang]] + ([folder / GO_API_COPY] if lang == "go" else [])
    existing = [str(t) for t in targets if t.exists()]
    if existing:
        raise ConfigError("would overwrite " + ", ".join(existing), file=str(folder),
                          fix="choose an empty or new folder (init-driver never overwrites)")
    if lang == "go" and not (GO_API_DIR / "go.mod").is_file():
        raise ConfigError("this harness has no Go stubs of the CCI API", file=str(GO_API_DIR),
                          fix="install a cci-conformance built with its api/ folder, or run from a source tree")
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for file in LANGUAGES[lang]:
        text = Template((TEMPLATES_DIR / lang / f"{file}.tmpl").read_text()).substitute(name=name)
        (folder / file).write_text(text)
        written.append(folder / file)
    if lang == "go":
        shutil.copytree(GO_API_DIR, folder / GO_API_COPY,
                        ignore=shutil.ignore_patterns("generate.sh", "__pycache__"))
        written.append(folder / GO_API_COPY)
    load_manifest(folder)  # the skeleton must itself be a valid manifest
    return written


def go_mod_tidy(folder: Path) -> str:
    """Fill in go.sum (downloads modules once); returns '' or what went wrong."""
    if shutil.which("go") is None:
        return "go is not on PATH"
    try:
        done = subprocess.run(["go", "mod", "tidy"], cwd=folder, capture_output=True, text=True,
                              timeout=GO_TIDY_DEADLINE_S, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return f"go mod tidy did not finish within {GO_TIDY_DEADLINE_S} s"
    return "" if done.returncode == 0 else f"go mod tidy failed: {done.stderr.strip()[-2000:]}"


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("init-driver", help="write a new driver's manifest and a minimal driver",
                              description="Write DIR/driver.yaml and a minimal driver that registers and "
                                          "refuses every claim; then `cci-conformance run --driver DIR` shows "
                                          "what is left to write (docs/authors.md).")
    p.add_argument("folder", metavar="DIR", type=Path)
    p.add_argument("--lang", choices=sorted(LANGUAGES), required=True)
    p.add_argument("--name", help="driver name (default: from DIR)")
    p.set_defaults(handler=_init)


def _init(args: argparse.Namespace) -> int:
    written = init_driver(args.folder, args.lang, args.name)
    for path in written:
        print(f"wrote {path}")
    if args.lang == "go":
        problem = go_mod_tidy(args.folder)
        if problem:
            print(f"note: {problem}; run `go mod tidy` in {args.folder} before the first run "
                  "(the build needs a complete go.sum)")
        else:
            print(f"wrote {args.folder / 'go.sum'} (go mod tidy)")
    print(f"next: cci-conformance run --driver {args.folder}  (lists every requirement the skeleton fails and why)")
    return 0

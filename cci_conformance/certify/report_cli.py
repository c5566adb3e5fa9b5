"""`cci-conformance report merge DIR... --out DIR`: one report.json from the reports of several runs."""

from __future__ import annotations

from pathlib import Path

from ..errors import ConfigError
from .merge import merge
from .report import validation_errors, write_json_atomic


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("report", help="work with report bundles",
                              description="Work with the report.json files of certification runs.")
    sub = p.add_subparsers(dest="report_command", metavar="COMMAND")
    m = sub.add_parser("merge", help="one certificate from several runs' reports",
                       description="Merge the report.json of several runs (a CI matrix fanned out as jobs) into "
                                   "one: each requirement's status is the conjunction over the runs, each test "
                                   "named by its cell (backend:machines:node profile:kubernetes). Exit as a run "
                                   "does: 0 certified, 1 not certified, 3 invalid, 2 the reports cannot be merged.")
    m.add_argument("dirs", nargs="+", metavar="DIR", help="report directories (or report.json files)")
    m.add_argument("--out", required=True, metavar="DIR", help="where the merged report.json goes")
    m.set_defaults(handler=run_merge)


def run_merge(args) -> int:
    report = merge([Path(d) for d in args.dirs])
    problems = validation_errors(report)
    if problems:  # a bug of the merge, not of the input: never write a report the schema refuses
        raise ConfigError(f"the merged report breaks the schema: {problems[0]}", field="DIR",
                          fix="report this as a harness bug")
    out = Path(args.out)
    write_json_atomic(out / "report.json", report)
    verdict = report["verdict"]
    print(f"merged {len(report['run']['backend_facts']['cells'])} runs: {verdict['state']} "
          f"({', '.join(f'{k} {v}' for k, v in verdict['counts'].items())}); report: {out / 'report.json'}")
    for cell in report["run"]["backend_facts"]["cells"]:
        print(f"  {cell['name']}: {cell['verdict']}")
    return int(verdict["exit_code"])

"""A DRA run over several Kubernetes releases: one run per release in a folder of its own, then one merged report."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from pathlib import Path

from . import bundle
from .merge import merge
from .report import validation_errors, write_json_atomic
from .settings import RunSettings
from .summary import summary_lines

# exit codes that end the whole run: a usage error is the same for every release, an interrupt is the user's
STOPS_THE_RUN = (2, 130)


def release_dir(report_dir: Path, release: str) -> Path:
    return report_dir / f"kubernetes-{release}"


def certify_releases(settings: RunSettings, releases: tuple[str, ...], report_dir: Path,
                     certify: Callable[[RunSettings, Path], int]) -> int:
    """``certify`` each release into ``release_dir``; report.json of ``report_dir`` is their merge, each test
    named by its cell (backend:machines:node profile:release), each requirement the conjunction over releases."""
    done: list[Path] = []
    for release in releases:
        code = certify(dataclasses.replace(settings, kubernetes=release), release_dir(report_dir, release))
        if (release_dir(report_dir, release) / bundle.REPORT_JSON).is_file():
            done.append(release_dir(report_dir, release))
        if code in STOPS_THE_RUN:
            return code
    if len(done) < len(releases):
        missing = [r for r in releases if release_dir(report_dir, r) not in done]
        print(f"cci-conformance: error: no report for Kubernetes {', '.join(missing)}; nothing merged",
              file=sys.stderr)
        return 1
    report = merge(done)
    problems = validation_errors(report)
    if problems:  # a bug of the merge, never a report the schema refuses
        raise RuntimeError(f"the merged report breaks the schema: {problems[0]}")
    write_json_atomic(report_dir / bundle.REPORT_JSON, report)
    print(f"\ncci-conformance: {len(releases)} releases merged into {report_dir / bundle.REPORT_JSON}")
    for cell in report["run"]["backend_facts"]["cells"]:
        print(f"  {cell['name']}: {cell['verdict']}")
    for line in summary_lines(report, report_dir):
        print(line)
    return int(report["verdict"]["exit_code"])

"""Readable text for people: one progress line per finished test, and the end-of-run summary table."""

from __future__ import annotations

import textwrap
from pathlib import Path

from . import bundle
from .outcomes import TestResult

PROGRESS_PREFIX = "[cci]"
_LABELS = {"passed": "PASS", "failed": "FAIL", "error": "ERROR", "skipped": "SKIP", "not-applicable": "N/A",
           "missing": "MISSING"}
MAX_FIGURE_LINES = 24
# A failure's reason is its evidence: a CI log may be all a reader has, so it is shown whole up to this length,
# wrapped, not cut at one line (a replay command in front of the cause once hid the cause).
MAX_REASON_CHARS = 1200


def reason_lines(reason: str, indent: str, limit: int = MAX_REASON_CHARS, width: int = 118) -> list[str]:
    """``reason`` wrapped under ``indent``, cut at ``limit`` characters with a pointer to the full text."""
    text = " ".join(reason.split())
    if len(text) > limit:
        text = text[:limit] + " ... (whole reason in report.json)"
    return textwrap.wrap(text, width=width, initial_indent=indent, subsequent_indent=indent,
                         break_long_words=True, break_on_hyphens=False) or [indent.rstrip()]


def progress_line(finished: int, total: int, result: TestResult) -> str:
    width = len(str(total)) if total else 3
    count = f"{finished:>{width}}/{total}" if total else f"{finished}"
    reqs = ",".join(result.requirements) or "-"
    line = f"{PROGRESS_PREFIX} [{count}] {_LABELS.get(result.outcome, result.outcome.upper()):<5} {reqs}  " \
           f"{result.nodeid}  {result.duration_s:.2f}s"
    if result.outcome in ("failed", "error") and result.reason:
        line += "\n" + "\n".join(reason_lines(result.reason, f"{PROGRESS_PREFIX}        "))
    if result.outcome in ("failed", "error") and result.replay:
        line += "\n" + "\n".join(replay_lines(result.replay, f"{PROGRESS_PREFIX}        "))
    return line


def replay_lines(command: str, indent: str) -> list[str]:
    """``replay: <command>`` under ``indent``, on one line and whole: a command cut or wrapped is not one to paste."""
    return [f"{indent}replay: {' '.join(command.split())}"]


def status_text(req: dict) -> str:
    """A requirement's status as people read it: a pass that left cases out says so ("pass, 1 case not ...")."""
    if req["status"] == "pass" and req.get("reason"):
        return f"pass, {req['reason']}"
    return req["status"]


def _format_value(value: float, unit: str) -> str:
    if unit == "s":
        return f"{value * 1e3:.2f} ms"
    return f"{value:.3g} {unit}".strip()


def figure_lines(report: dict) -> list[str]:
    lines = []
    for req in report["requirements"]:
        for fig in req["figures"]:
            unit = fig.get("unit", "")
            text = f"  {req['id']:<11} {fig['name']:<28} {_format_value(fig['value'], unit):>12}"
            if fig.get("budget") is not None:
                text += f"  (budget {fig.get('comparison', '<=')} {_format_value(fig['budget'], unit)})"
            if fig.get("topology"):
                text += f"  on {fig['topology']}"
            lines.append(text)
    if len(lines) > MAX_FIGURE_LINES:
        lines = lines[:MAX_FIGURE_LINES] + [f"  ... {len(lines) - MAX_FIGURE_LINES} more in the HTML report"]
    return lines


def verdict_label(verdict: dict) -> str:
    if verdict.get("state") == "invalid":
        return ("INVALID RUN: node precondition(s) " + ", ".join(verdict["preconditions"]["failed"])
                + " failed, so this run says nothing about the driver; report it as a harness bug")
    return "CERTIFIED" if verdict["certified"] else "NOT CERTIFIED"


def summary_lines(report: dict, report_dir: Path | None) -> list[str]:
    """The summary table per area, the failed and untested requirements, figures, verdict, report paths."""
    run, verdict = report["run"], report["verdict"]
    driver = run["driver"]
    version = f" {driver['version']}" if driver.get("version") else ""
    digest = driver.get("digest") or {}
    ident = f"; {digest['of']} sha256 {digest['value'][:16]}…" if digest.get("value") else ""
    lines = [f"driver {driver['name']}{version} (capabilities: {', '.join(driver['capabilities']) or 'none'}{ident})",
             f"topologies {', '.join(t['name'] for t in run['topologies'])}; backend {run['backend']}; "
             f"{node_line(run)}; "
             f"latency profile {(run['profile'] or {}).get('name', '?')}", ""]
    header = f"{'area':<14}{'pass':>6}{'fail':>6}{'n/a':>6}{'untested':>10}"
    lines += [header, "-" * len(header)]
    for area in report["areas"]:
        c = area["counts"]
        lines.append(f"{area['key']:<14}{c['pass']:>6}{c['fail']:>6}{c['not-applicable']:>6}{c['untested']:>10}")
    c = verdict["counts"]
    total = f"{'total':<14}{c['pass']:>6}{c['fail']:>6}{c['not-applicable']:>6}{c['untested']:>10}"
    lines += ["-" * len(header), total]
    pre = verdict["preconditions"]["counts"]
    lines.append(f"{'node preconditions':<20}{pre['pass']} pass, {pre['fail']} fail, {pre['not-applicable']} n/a, "
                 f"{pre['untested']} untested (checks of the harness's own node: not the driver's passes)")
    problems = [r for r in report["requirements"] if r["status"] in ("fail", "untested")]
    if run.get("stopped_early"):  # one message, not one line per requirement that could not run
        lines += ["", f"STOPPED  {run['stopped_early']}"]
        problems = [r for r in problems if r["status"] == "fail"]
    if problems:
        lines.append("")
        for req in problems:
            kind = "precondition" if req.get("kind") == "node-precondition" else \
                "required" if req["required"] else "optional"
            lines.append(f"{req['status'].upper():<9}{req['id']:<12}({kind})")
            # an untested reason is the harness's, often one per requirement: shorter than a failure's evidence
            lines += reason_lines(req["reason"], " " * 9, MAX_REASON_CHARS if req["status"] == "fail" else 300)
            if req.get("replay"):
                lines += replay_lines(req["replay"], " " * 9)
    partial = [r for r in report["requirements"] if r["status"] == "pass" and r.get("reason")]
    if partial:  # passes that left cases out: the certificate did not exercise them here
        lines += ["", "passed with cases not applicable:"]
        for req in partial:
            lines += reason_lines(f"{req['id']}: pass, {req['reason']}", "  ", 600)
    for err in report["errors"]:
        if err["kind"] == "driver-start" and run.get("stopped_early"):
            continue  # the STOPPED line above says it
        lines.append(f"ERROR    {err['kind']} {err['where']}: {err['message'][:200]}")
    figures = figure_lines(report)
    if figures:
        lines += ["", "figures:"] + figures
    state = verdict_label(verdict)
    if not run["complete"]:
        state += " (run incomplete)"
    lines += ["", f"verdict: {state} (exit {verdict['exit_code']})"]
    other = verdict.get("other_mode_requirements") or []
    if other:  # the certification says nothing about the modes this run did not exercise
        lines.append(f"scope:   {run.get('node_mode')} mode only; not applicable here: {', '.join(other)}")
    if report_dir is not None:
        lines.append(f"report:  {Path(report_dir) / bundle.REPORT_JSON}")
        lines.append(f"html:    {Path(report_dir) / bundle.REPORT_HTML}")
        lines.append(f"junit:   {Path(report_dir) / bundle.JUNIT_XML}")
    return lines


def node_line(run: dict) -> str:
    """The node the run certified on: a kind run's Kubernetes release, kubelet and node image (a CCI run's kubelet
    is the patched one, named by its patch's digest; a DRA run's the vanilla one), else the CCI node's mode."""
    facts = run.get("backend_facts") or {}
    mode = f" ({run.get('node_mode') or '?'} mode)"
    if facts.get("kubernetes"):
        image = f", node image {facts['node_image']}" if facts.get("node_image") else ""
        if facts.get("kubelet_patch"):  # kind/cci: the kubelet with the CCI manager, not the release's own
            patch = facts["kubelet_patch"].removeprefix("sha256:")[:12]
            return (f"Kubernetes {facts['kubernetes']} (kubelet with the CCI manager, patch {patch}{image}), "
                    f"node profile {run['node_profile']}{mode}")
        devices = f", {facts['device_mode']} devices" if facts.get("device_mode") else ""
        return f"Kubernetes {facts['kubernetes']} (vanilla kubelet{image}), node profile {run['node_profile']}{devices}"
    return f"node profile {run['node_profile']}{mode}"

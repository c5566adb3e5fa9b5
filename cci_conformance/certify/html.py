"""Render report.json as one self-contained HTML page a person reads (tables, evidence links, inline SVG)."""

from __future__ import annotations

from collections import defaultdict
from html import escape

from .summary import node_line, status_text, verdict_label
from .svg import growth_curve, histogram

CSS = """
body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1100px}
table{border-collapse:collapse;margin:0.5em 0 1.5em}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top;font-size:14px}
th{background:#f2f2f2}
.pass{background:#dff0d8}.fail{background:#f2dede}.untested{background:#fcf8e3}.not-applicable{background:#eee}
.verdict{font-size:1.4em;padding:0.4em 0.8em;display:inline-block}
code{font-size:12px}
.charts svg{margin:0 1em 1em 0;border:1px solid #ddd}
"""


def _e(value) -> str:
    return escape(str(value))


def _run_table(run: dict) -> str:
    driver = run["driver"]
    env = run["environment"]
    digest = driver.get("digest") or {}
    rows = [
        ("driver", f"{driver['name']} {driver.get('version') or ''}".strip()),
        ("capabilities", ", ".join(driver["capabilities"]) or "none"),
        ("manifest", f"{driver['manifest']} (sha256 {driver.get('manifest_sha256') or '?'})"),
        ("what ran", f"{digest.get('of', '?')} sha256 {digest.get('value', '?')} ({digest.get('files', '?')} files)"),
        ("topologies", ", ".join(f"{t['name']} ({t.get('cpus', '?')} CPUs)" for t in run["topologies"])),
        ("backend / node", f"{run['backend']} / {node_line(run)}"),
        ("latency profile", (run["profile"] or {}).get("name", "?")),
        ("harness", run["harness_version"]),
        ("started / finished", f"{run['started']} / {run['finished'] or 'not finished'} ({run['duration_s']} s)"),
        ("complete", "yes" if run["complete"] else "NO (interrupted or still running)"),
        ("environment", f"Python {env['python']} on {env['platform']}; kernel {env['kernel']}"),
    ]
    return "<table>" + "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in rows) + "</table>"


def _area_table(report: dict) -> str:
    head = "<tr><th>area</th><th>pass</th><th>fail</th><th>n/a</th><th>untested</th></tr>"
    rows = []
    for area in report["areas"]:
        c = area["counts"]
        rows.append(f"<tr><td title='{_e(area['title'])}'>{_e(area['key'])}</td><td>{c['pass']}</td>"
                    f"<td>{c['fail']}</td><td>{c['not-applicable']}</td><td>{c['untested']}</td></tr>")
    c = report["verdict"]["preconditions"]["counts"]
    rows.append(f"<tr class='not-applicable'><td title='checks of the harness&#39;s own node: they must pass for the "
                f"run to be valid and are not the driver&#39;s passes'>node preconditions</td><td>{c['pass']}</td>"
                f"<td>{c['fail']}</td><td>{c['not-applicable']}</td><td>{c['untested']}</td></tr>")
    return f"<table>{head}{''.join(rows)}</table>"


def _requirements_table(report: dict) -> str:
    head = "<tr><th>id</th><th>status</th><th>requirement</th><th>source</th><th>why</th></tr>"
    rows = []
    for req in report["requirements"]:
        req_mark = " (node precondition)" if req.get("kind") == "node-precondition" else \
            "" if req["required"] else " (optional)"
        cap = f"<br><small>capability: {_e(req['capability'])}</small>" if req["capability"] else ""
        rows.append(f"<tr class='{_e(req['status'])}'><td id='{_e(req['id'])}'>{_e(req['id'])}</td>"
                    f"<td>{_e(status_text(req))}{req_mark}</td><td>{_e(req['text'])}{cap}</td>"
                    f"<td><small>{_e(req['source'])}</small></td><td>{_e(req['reason'])}{_replay(req)}</td></tr>")
    return f"<table>{head}{''.join(rows)}</table>"


def _replay(entry: dict) -> str:
    return f"<br>replay: <code>{_e(entry['replay'])}</code>" if entry.get("replay") else ""


def _failures(report: dict) -> str:
    parts = []
    for req in report["requirements"]:
        bad = [t for t in req["tests"] if t["outcome"] in ("failed", "error")]
        if not bad:
            continue
        items = []
        for test in bad:
            links = " ".join(f"<a href='{_e(p)}'>{_e(p.rsplit('/', 1)[-1])}</a>" for p in test.get("evidence", []))
            items.append(f"<li><code>{_e(test['nodeid'])}</code>: {_e(test['outcome'])}: {_e(test['reason'])}"
                         + _replay(test) + (f"<br>evidence: {links}" if links else "") + "</li>")
        parts.append(f"<h3><a href='#{_e(req['id'])}'>{_e(req['id'])}</a> {_e(req['text'])}</h3>"
                     f"<ul>{''.join(items)}</ul>")
    for err in report["errors"]:
        parts.append(f"<p class='fail'>{_e(err['kind'])} error at {_e(err['where'])}: {_e(err['message'])}</p>")
    return "".join(parts) or "<p>No failures.</p>"


def _charts(report: dict) -> str:
    hists, curves = [], []
    by_name: dict[str, list[dict]] = defaultdict(list)
    for req in report["requirements"]:
        for fig in req["figures"]:
            by_name[fig["name"]].append(fig)
            if fig.get("samples"):
                scale = 1e3 if fig.get("unit") == "s" else 1.0
                markers = {}
                if fig.get("budget") is not None:
                    markers["budget"] = fig["budget"] * scale
                title = f"{req['id']} {fig['name']} on {fig.get('topology', '?')}"
                svg = histogram([s * scale for s in fig["samples"]], title, markers)
                hists.append(f"<figure>{svg}<figcaption>{_e(title)}: {len(fig['samples'])} samples"
                             f"</figcaption></figure>")
    for name, figs in by_name.items():
        points = {}
        for fig in figs:
            if fig.get("cpus") and fig.get("topology"):
                points[fig["topology"]] = (float(fig["cpus"]), float(fig["value"]), fig["topology"])
        if len(points) >= 2:
            unit = figs[0].get("unit", "")
            scale = 1e3 if unit == "s" else 1.0
            pts = [(x, y * scale, label) for x, y, label in points.values()]
            budget = figs[0].get("budget")
            svg = growth_curve(pts, f"{name} by machine size", "ms" if unit == "s" else unit or name,
                               budget * scale if budget is not None and figs[0].get("comparison") != ">=" else None)
            curves.append(f"<figure>{svg}<figcaption>{_e(name)} over the run's topologies</figcaption></figure>")
    if not hists and not curves:
        return "<p>No latency figures were recorded.</p>"
    return "<div class='charts'>" + "".join(curves + hists) + "</div>"


def _scope(report: dict) -> str:
    other = report["verdict"].get("other_mode_requirements") or []
    if not other:
        return ""
    return (f"<p>For the node's {_e(report['run'].get('node_mode'))} mode only: {_e(', '.join(other))} apply in "
            "other modes and are not applicable to this run.</p>")


def render_html(report: dict) -> str:
    verdict = report["verdict"]
    state = verdict_label(verdict)
    cls = "pass" if verdict["certified"] else "fail"
    stopped = report["run"].get("stopped_early")
    driver = report["run"]["driver"]["name"] or "?"
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>cci-conformance: {_e(driver)}: {_e(state.split(':')[0])}</title><style>{CSS}</style></head><body>"
        f"<h1>CCI driver certification: {_e(driver)}</h1>"
        f"<p class='verdict {cls}'>{_e(state)}</p>{_scope(report)}"
        + (f"<p class='fail'>Stopped before any test: {_e(stopped)}</p>" if stopped else "") +
        f"{_run_table(report['run'])}"
        f"<h2>Summary by area</h2>{_area_table(report)}"
        f"<h2>Failures</h2>{_failures(report)}"
        f"<h2>Latency</h2>{_charts(report)}"
        f"<h2>Requirements</h2>{_requirements_table(report)}"
        "<p><small>Machine-readable: report.json (schema reports/schemas/report.schema.json), junit.xml."
        "</small></p></body></html>\n"
    )

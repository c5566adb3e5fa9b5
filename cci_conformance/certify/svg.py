"""Small inline SVG charts for the HTML report: a latency histogram and a growth curve, no plotting library."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

WIDTH, HEIGHT = 480, 220
LEFT, RIGHT, TOP, BOTTOM = 56, 16, 16, 40


def _frame(body: list[str], title: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
            f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(title)}">'
            f"<title>{escape(title)}</title>" + "".join(body) + "</svg>")


def _axes(x_label: str, y_label: str) -> list[str]:
    x0, y0, x1 = LEFT, HEIGHT - BOTTOM, WIDTH - RIGHT
    return [
        f'<line x1="{x0}" y1="{TOP}" x2="{x0}" y2="{y0}" stroke="#444"/>',
        f'<line x1="{x0}" y1="{y0}" x2="{x1}" y2="{y0}" stroke="#444"/>',
        f'<text x="{(x0 + x1) / 2}" y="{HEIGHT - 6}" font-size="11" text-anchor="middle">{escape(x_label)}</text>',
        f'<text x="12" y="{(TOP + y0) / 2}" font-size="11" text-anchor="middle" '
        f'transform="rotate(-90 12 {(TOP + y0) / 2})">{escape(y_label)}</text>',
    ]


def _tick(x: float, y: float, text: str, anchor: str = "middle") -> str:
    return f'<text x="{x:.1f}" y="{y:.1f}" font-size="10" text-anchor="{anchor}">{escape(text)}</text>'


def histogram(samples_ms: Sequence[float], title: str, markers: dict[str, float] | None = None,
              bins: int = 24) -> str:
    """Bars of how many samples fall in each latency bin; ``markers`` draws labelled vertical lines (budgets)."""
    if not samples_ms:
        return ""
    lo = 0.0
    hi = max(max(samples_ms), *(markers or {}).values()) if markers else max(samples_ms)
    hi = hi * 1.05 if hi > 0 else 1.0
    counts = [0] * bins
    for value in samples_ms:
        counts[min(bins - 1, int((value - lo) / (hi - lo) * bins))] += 1
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    top = max(counts) or 1
    body = _axes("latency (ms)", "admissions")
    bar_w = plot_w / bins
    for i, count in enumerate(counts):
        h = plot_h * count / top
        body.append(f'<rect x="{LEFT + i * bar_w + 1:.1f}" y="{TOP + plot_h - h:.1f}" width="{bar_w - 2:.1f}" '
                    f'height="{h:.1f}" fill="#4a7bb7"><title>{count}</title></rect>')
    for frac in (0, 0.5, 1):
        body.append(_tick(LEFT + plot_w * frac, HEIGHT - BOTTOM + 14, f"{lo + (hi - lo) * frac:.2f}"))
    body.append(_tick(LEFT - 4, TOP + 8, str(top), "end"))
    for label, value in (markers or {}).items():
        x = LEFT + plot_w * (value - lo) / (hi - lo)
        body.append(f'<line x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{TOP + plot_h}" stroke="#c0392b" '
                    f'stroke-dasharray="4 3"/>')
        body.append(_tick(x - 3, TOP + 10, label, "end"))
    return _frame(body, title)


def growth_curve(points: Sequence[tuple[float, float, str]], title: str, y_label: str,
                 limit: float | None = None) -> str:
    """A line through (x = CPUs, y = value, label = topology) points; ``limit`` draws the allowed ceiling."""
    if len(points) < 2:
        return ""
    pts = sorted(points)
    x_lo, x_hi = min(p[0] for p in pts), max(p[0] for p in pts)
    y_hi = max([p[1] for p in pts] + ([limit] if limit else [])) * 1.1 or 1.0
    plot_w, plot_h = WIDTH - LEFT - RIGHT - 20, HEIGHT - TOP - BOTTOM

    def xy(x: float, y: float) -> tuple[float, float]:
        fx = (x - x_lo) / (x_hi - x_lo) if x_hi > x_lo else 0.5
        return LEFT + 10 + plot_w * fx, TOP + plot_h * (1 - y / y_hi)

    body = _axes("CPUs", y_label)
    coords = [xy(x, y) for x, y, _ in pts]
    body.append('<polyline fill="none" stroke="#4a7bb7" stroke-width="2" points="'
                + " ".join(f"{cx:.1f},{cy:.1f}" for cx, cy in coords) + '"/>')
    for (x, y, label), (cx, cy) in zip(pts, coords, strict=True):
        body.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="4" fill="#4a7bb7"><title>{escape(label)}: '
                    f'{y:.3g}</title></circle>')
        body.append(_tick(cx, HEIGHT - BOTTOM + 14, f"{x:g}"))
        body.append(_tick(cx, cy - 8, f"{y:.3g}"))
    if limit is not None:
        _, ly = xy(x_lo, limit)
        body.append(f'<line x1="{LEFT}" y1="{ly:.1f}" x2="{WIDTH - RIGHT}" y2="{ly:.1f}" stroke="#c0392b" '
                    f'stroke-dasharray="4 3"/>')
        body.append(_tick(WIDTH - RIGHT, ly - 4, "allowed", "end"))
    body.append(_tick(LEFT - 4, TOP + 8, f"{y_hi:.3g}", "end"))
    return _frame(body, title)

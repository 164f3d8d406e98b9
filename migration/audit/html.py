"""One self-contained HTML page per run report: inline CSS, inline SVG charts, no JavaScript.

The page is served inside the Airflow UI (an iframe), attached to tickets and opened from
buckets, so it must work offline and must not execute anything. Every figure on it is taken
from the report's JSON form (``report.model_dump(mode="json")``), and the key figures are
repeated as ``data-*`` attributes so tests and scrapers can compare the page with the JSON.

All text goes through jinja2 autoescaping; the SVG is built here with ``html.escape`` on every
label and attribute value, then marked safe.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup

from migration.audit.model import RunReport

# Fixed colours for the message formats people look for; other labels cycle through the rest.
FORMAT_COLOURS = {"v0": "#d9534f", "v1": "#f0ad4e", "v2": "#5cb85c"}
PALETTE = ["#5bc0de", "#8e6cc7", "#777777", "#c7a26c", "#2e86ab", "#e377c2"]
SIDE_COLOURS = {"before": "#8fa8c8", "after": "#2e5c8a"}


def fmt_bytes(n: int | float | None) -> str:
    if n is None:
        return "–"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def fmt_int(n: int | None) -> str:
    return "–" if n is None else f"{n:,}"


def fmt_seconds(s: float | None) -> str:
    if s is None:
        return "–"
    if s < 60:
        return f"{s:.2f} s"
    minutes, sec = divmod(s, 60)
    hours, minutes = divmod(int(minutes), 60)
    return f"{hours}h {minutes:02d}m {sec:04.1f}s" if hours else f"{minutes}m {sec:04.1f}s"


def attrs(values: Mapping[str, Any]) -> Markup:
    """``data-*`` (or any) attributes, escaped. None is written as an empty string."""
    parts = []
    for key, value in values.items():
        if isinstance(value, bool):
            value = "true" if value else "false"
        text = "" if value is None else str(value)
        parts.append(f'{html.escape(key, quote=True)}="{html.escape(text, quote=True)}"')
    return Markup(" ".join(parts))


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def format_colour(label: str, order: list[str]) -> str:
    if label in FORMAT_COLOURS:
        return FORMAT_COLOURS[label]
    others = [f for f in order if f not in FORMAT_COLOURS]
    return PALETTE[others.index(label) % len(PALETTE)] if label in others else PALETTE[0]


def _format_order(labels: set[str]) -> list[str]:
    known = [f for f in FORMAT_COLOURS if f in labels]
    return known + sorted(labels - set(known))


def _tick_values(maximum: float, count: int = 4) -> list[float]:
    if maximum <= 0:
        return [0.0]
    return [maximum * i / count for i in range(count + 1)]


# --- charts ----------------------------------------------------------------------------------


def svg_format_mix(brokers: list[dict[str, Any]]) -> Markup:
    """Per broker two stacked horizontal bars (before / after), one segment per format, by bytes."""
    rows = [(b["broker_id"], side, b["format_mix"][side]) for b in brokers for side in ("before", "after")]
    labels = _format_order({f for _, _, mix in rows for f in mix})
    if not rows or not labels:
        return Markup('<p class="muted" data-chart-empty="format-mix">No format information in this report.</p>')
    left, bar_w, row_h, gap = 120, 560, 18, 6
    top = 10
    height = top + len(rows) * (row_h + gap) + 40 + 20 * ((len(labels) + 3) // 4)
    scale_max = max(sum(mix.values()) for _, _, mix in rows) or 1
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" id="chart-format-mix" data-chart="format-mix" '
        f'width="{left + bar_w + 100}" height="{height}" role="img" '
        f'aria-label="Message format mix per broker before and after, by bytes">'
    ]
    y = top
    for broker_id, side, mix in rows:
        out.append(
            f'<text x="{left - 8}" y="{y + row_h - 5}" text-anchor="end" class="axis">'
            f"broker {_esc(broker_id)} {side}</text>"
        )
        x = float(left)
        for label in labels:
            size = mix.get(label, 0)
            if not size:
                continue
            w = bar_w * size / scale_max
            out.append(
                f'<rect class="seg" x="{x:.2f}" y="{y}" width="{w:.2f}" height="{row_h}" '
                f'fill="{format_colour(label, labels)}" '
                f"{attrs({'data-broker-id': broker_id, 'data-side': side, 'data-format': label, 'data-bytes': size})}>"
                f"<title>broker {_esc(broker_id)} {side}: {_esc(label)} {_esc(fmt_bytes(size))} "
                f"({size} bytes)</title></rect>"
            )
            x += w
        total = sum(mix.values())
        out.append(f'<text x="{x + 6:.2f}" y="{y + row_h - 5}" class="axis">{_esc(fmt_bytes(total))}</text>')
        y += row_h + gap
    y += 14
    for i, label in enumerate(labels):
        lx, ly = left + (i % 4) * 140, y + (i // 4) * 20
        out.append(
            f'<rect x="{lx}" y="{ly}" width="12" height="12" fill="{format_colour(label, labels)}"></rect>'
            f'<text x="{lx + 16}" y="{ly + 11}" class="legend" {attrs({"data-legend-format": label})}>'
            f"{_esc(label)}</text>"
        )
    out.append("</svg>")
    return Markup("".join(out))


def svg_bytes_per_broker(brokers: list[dict[str, Any]]) -> Markup:
    """Grouped vertical bars: bytes before and after per broker."""
    if not brokers:
        return Markup('<p class="muted" data-chart-empty="bytes-per-broker">No brokers in this report.</p>')
    left, top, plot_h, group_w, bar_w = 80, 16, 180, 70, 26
    width = left + group_w * len(brokers) + 120
    height = top + plot_h + 40
    scale_max = max(max(b["totals"]["bytes_before"], b["totals"]["bytes_after"]) for b in brokers) or 1
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" id="chart-bytes-per-broker" '
        f'data-chart="bytes-per-broker" width="{width}" height="{height}" role="img" '
        f'aria-label="Bytes before and after per broker">'
    ]
    for tick in _tick_values(scale_max):
        ty = top + plot_h - plot_h * tick / scale_max
        out.append(
            f'<line x1="{left}" x2="{width - 110}" y1="{ty:.2f}" y2="{ty:.2f}" class="grid"></line>'
            f'<text x="{left - 6}" y="{ty + 4:.2f}" text-anchor="end" class="axis">{_esc(fmt_bytes(tick))}</text>'
        )
    for i, b in enumerate(brokers):
        gx = left + i * group_w + 8
        for j, side in enumerate(("before", "after")):
            value = b["totals"][f"bytes_{side}"]
            h = plot_h * value / scale_max
            out.append(
                f'<rect class="bar" x="{gx + j * bar_w}" y="{top + plot_h - h:.2f}" width="{bar_w - 2}" '
                f'height="{h:.2f}" fill="{SIDE_COLOURS[side]}" '
                f"{attrs({'data-broker-id': b['broker_id'], 'data-side': side, 'data-bytes': value})}>"
                f"<title>broker {_esc(b['broker_id'])} {side}: {_esc(fmt_bytes(value))} ({value} bytes)</title>"
                f"</rect>"
            )
        out.append(
            f'<text x="{gx + bar_w}" y="{top + plot_h + 16}" text-anchor="middle" class="axis">'
            f"broker {_esc(b['broker_id'])}</text>"
        )
    lx = width - 100
    for k, side in enumerate(("before", "after")):
        out.append(
            f'<rect x="{lx}" y="{top + k * 20}" width="12" height="12" fill="{SIDE_COLOURS[side]}"></rect>'
            f'<text x="{lx + 16}" y="{top + k * 20 + 11}" class="legend">{side}</text>'
        )
    out.append("</svg>")
    return Markup("".join(out))


def svg_progress(timeline: list[dict[str, Any]], started_at: str) -> Markup:
    """Bytes done over elapsed time, one marker per timeline point."""
    if not timeline:
        return Markup('<p class="muted" data-chart-empty="progress">No progress recorded.</p>')
    t0 = datetime.fromisoformat(started_at)
    xs = [max((datetime.fromisoformat(p["at"]) - t0).total_seconds(), 0.0) for p in timeline]
    ys = [p["bytes_done"] for p in timeline]
    left, top, plot_w, plot_h = 80, 12, 560, 180
    x_max, y_max = (max(xs) or 1.0), (max(ys) or 1)
    last = timeline[-1]
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" id="chart-progress" data-chart="progress" '
        f'width="{left + plot_w + 30}" height="{top + plot_h + 40}" role="img" aria-label="Progress over the run" '
        f"{attrs({'data-points': len(timeline), 'data-final-units-done': last['units_done'], 'data-final-bytes-done': last['bytes_done']})}>"  # noqa: E501
    ]
    for tick in _tick_values(y_max):
        ty = top + plot_h - plot_h * tick / y_max
        out.append(
            f'<line x1="{left}" x2="{left + plot_w}" y1="{ty:.2f}" y2="{ty:.2f}" class="grid"></line>'
            f'<text x="{left - 6}" y="{ty + 4:.2f}" text-anchor="end" class="axis">{_esc(fmt_bytes(tick))}</text>'
        )
    for tick in _tick_values(x_max):
        tx = left + plot_w * tick / x_max
        out.append(
            f'<text x="{tx:.2f}" y="{top + plot_h + 16}" text-anchor="middle" class="axis">'
            f"{_esc(fmt_seconds(tick))}</text>"
        )
    coords = [(left + plot_w * x / x_max, top + plot_h - plot_h * y / y_max) for x, y in zip(xs, ys, strict=True)]
    out.append(
        '<polyline class="progress-line" fill="none" stroke="#2e5c8a" stroke-width="2" points="'
        + " ".join(f"{cx:.2f},{cy:.2f}" for cx, cy in coords)
        + '"></polyline>'
    )
    for (cx, cy), p in zip(coords, timeline, strict=True):
        out.append(
            f'<circle class="progress-point" cx="{cx:.2f}" cy="{cy:.2f}" r="2.5" fill="#2e5c8a" '
            f"{attrs({'data-at': p['at'], 'data-units-done': p['units_done'], 'data-bytes-done': p['bytes_done']})}>"
            f"<title>{_esc(p['at'])}: {p['units_done']} units, {_esc(fmt_bytes(p['bytes_done']))}</title></circle>"
        )
    out.append("</svg>")
    return Markup("".join(out))


# --- page ------------------------------------------------------------------------------------


# The template ships inside the package (hatch includes non-Python files of ``migration/``).
_ENV = Environment(
    loader=FileSystemLoader(Path(__file__).with_name("templates")),
    autoescape=True,  # every {{ }} is escaped; only Markup built above is trusted
    undefined=StrictUndefined,
    keep_trailing_newline=True,
)
_PAGE = _ENV.get_template("report.html.j2")


def _finding_text(f: Mapping[str, Any]) -> str:
    where = f["file"] or ""
    if f["position"] is not None:
        where = f"{where} @ byte {f['position']}" if where else f"byte {f['position']}"
    code = f" [{f['code']}]" if f.get("code") else ""
    return f"{where}: {f['message']}{code}" if where else f"{f['message']}{code}"


def _finding_attrs(f: Mapping[str, Any]) -> Markup:
    return attrs({"data-file": f["file"], "data-position": f["position"], "data-code": f.get("code")})


def _totals_attrs(t: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    return {
        f"data-{prefix}units-total": t["units"],
        f"data-{prefix}units-ok": t["units_ok"],
        f"data-{prefix}units-failed": t["units_failed"],
        f"data-{prefix}units-skipped": t["units_skipped"],
        f"data-{prefix}units-refused": t["units_refused"],
        f"data-{prefix}units-planned": t["units_planned"],
        f"data-{prefix}bytes-before": t["bytes_before"],
        f"data-{prefix}bytes-after": t["bytes_after"],
        f"data-{prefix}records-before": t["records_before"],
        f"data-{prefix}records-after": t["records_after"],
        f"data-{prefix}errors": t["errors"],
        f"data-{prefix}warnings": t["warnings"],
        f"data-{prefix}digest-mismatches": t["digest_mismatches"],
    }


def _unit_attrs(broker_id: int, p: Mapping[str, Any], u: Mapping[str, Any]) -> Markup:
    return attrs(
        {
            "data-broker-id": broker_id,
            "data-topic": p["topic"],
            "data-partition": p["partition"],
            "data-unit": u["unit"],
            "data-status": u["status"],
            "data-bytes-before": u["bytes_before"],
            "data-bytes-after": u["bytes_after"],
            "data-records-before": u["records_before"],
            "data-records-after": u["records_after"],
        }
    )


def render_html(report: RunReport) -> str:
    """The report page. Works from the JSON form only, so the page cannot show a number the JSON lacks."""
    r = report.model_dump(mode="json")
    t = r["totals"]
    brokers = []
    for b in r["brokers"]:
        b = dict(b)
        b["attrs"] = attrs({"data-broker-id": b["broker_id"], **_totals_attrs(b["totals"], "")})
        brokers.append(b)
    problems = []
    for broker_id, topic, partition, unit in report.problem_units():
        u = unit.model_dump(mode="json")
        problems.append(
            {
                "broker_id": broker_id,
                "topic": topic,
                "partition": partition,
                "unit": u,
                "mismatch": unit.digest_mismatch,
                "attrs": attrs(
                    {
                        "data-broker-id": broker_id,
                        "data-topic": topic,
                        "data-partition": partition,
                        "data-unit": u["unit"],
                        "data-status": u["status"],
                        "data-path": u["path"],
                    }
                ),
            }
        )
    summary_attrs = attrs(
        {
            "data-report-version": r["report_version"],
            "data-run-id": r["run_id"],
            "data-kind": r["kind"],
            "data-status": r["status"],
            "data-exit-code": r["exit_code"],
            "data-dag-id": r["dag_id"],
            "data-dag-run-id": r["dag_run_id"],
            "data-started-at": r["started_at"],
            "data-finished-at": r["finished_at"],
            "data-duration-s": r["duration_s"],
            "data-brokers": len(r["brokers"]),
            **_totals_attrs(t, "total-"),
            # The names the brief and dashboards use for the headline figures.
            "data-units-failed": t["units_failed"],
            "data-units-ok": t["units_ok"],
            "data-units-total": t["units"],
        }
    )
    failures_attrs = attrs(
        {
            "data-units-failed": t["units_failed"],
            "data-units-refused": t["units_refused"],
            "data-problem-units": len(problems),
            "data-run-errors": len(r["errors"]),
        }
    )
    plan_attrs = attrs(
        {"data-units-planned": r["plan"]["units_planned"], "data-bytes-planned": r["plan"]["bytes_planned"]}
    )
    session_attrs = Markup("")
    if r["session"]:
        s = r["session"]
        session_attrs = attrs(
            {
                "data-session-id": s["session_id"],
                "data-epoch": s["epoch"],
                "data-full-rescan": s["full_rescan"],
                "data-dirty": s["dirty"],
                "data-deferred": s["deferred"],
                "data-clean": s["clean"],
            }
        )
    return _PAGE.render(
        r=r,
        t=t,
        brokers=brokers,
        problems=problems,
        summary_attrs=summary_attrs,
        failures_attrs=failures_attrs,
        plan_attrs=plan_attrs,
        session_attrs=session_attrs,
        chart_mix=svg_format_mix(brokers),
        chart_bytes=svg_bytes_per_broker(brokers),
        chart_progress=svg_progress(r["timeline"], r["started_at"]),
        fmt_bytes=fmt_bytes,
        fmt_int=fmt_int,
        fmt_seconds=fmt_seconds,
        finding_text=_finding_text,
        finding_attrs=_finding_attrs,
        unit_attrs=_unit_attrs,
    )

"""One self-contained HTML page per run report: inline CSS, inline SVG charts, no JavaScript.

The page is served inside the Airflow UI (an iframe), attached to tickets and opened from
buckets, so it must work offline and must not execute anything. Every figure on it is taken
from the report's JSON form (``report.model_dump(mode="json")``), and the key figures are
repeated as ``data-*`` attributes so tests and scrapers can compare the page with the JSON.

All text goes through jinja2 autoescaping; the SVG is built here with ``html.escape`` on every
label and attribute value, then marked safe.
"""

from __future__ import annotations

import contextlib
import html
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemBytecodeCache, FileSystemLoader, StrictUndefined
from jinja2.bccache import Bucket
from markupsafe import Markup

from migration.audit.model import RunReport
from migration.logdir.findings import locate

# Fixed colours for the message formats people look for; other labels cycle through the rest.
FORMAT_COLOURS = {"v0": "#d9534f", "v1": "#f0ad4e", "v2": "#5cb85c"}
PALETTE = ["#5bc0de", "#8e6cc7", "#777777", "#c7a26c", "#2e86ab", "#e377c2"]
SIDE_COLOURS = {"before": "#8fa8c8", "after": "#2e5c8a"}


_BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")


def fmt_bytes(n: int | float | None) -> str:
    if n is None:
        return "–"
    value = float(n)
    for unit in _BYTE_UNITS:
        if abs(value) < 1024 or unit == "TiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def fmt_int(n: int | None) -> str:
    return "–" if n is None else f"{n:,}"


def _significant(x: float, digits: int = 3) -> str:
    """``x`` (> 0) to ``digits`` significant digits, without exponent or trailing zeros."""
    text = f"{x:.{max(0, digits - 1 - math.floor(math.log10(x)))}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def fmt_seconds(s: float | None) -> str:
    """A duration as people read it. Below a second in milliseconds (three significant digits):
    a step that did nothing takes a fraction of a millisecond, which "0.00 s" would hide."""
    if s is None:
        return "–"
    if s <= 0:
        return "0 s"
    if s < 1:
        return f"{_significant(s * 1000)} ms"
    if s < 60:
        return f"{s:.2f} s"
    minutes, sec = divmod(s, 60)
    hours, minutes = divmod(int(minutes), 60)
    return f"{hours}h {minutes:02d}m {sec:04.1f}s" if hours else f"{minutes}m {sec:04.1f}s"


def fmt_formats(input_format: str | None, output_format: str | None) -> str:
    """A unit's format column: ``v0 → v2`` when it was (or would be) rewritten, ``v2 (unchanged)``
    when it was kept, the one known side alone, and ``–`` for a unit with no message format (a
    partition the preflight validated, a checkpoint file): never ``? → ?``."""
    if input_format is None and output_format is None:
        return "–"
    if output_format is None:
        return input_format or "–"
    if input_format is None:
        return f"→ {output_format}"
    if input_format == output_format:
        return f"{input_format} (unchanged)"
    return f"{input_format} → {output_format}"


def run_formats(report: RunReport) -> str:
    """The formats a whole run read and wrote (``v0, v1 → v2``), from its units, as
    ``fmt_formats`` writes them; ``–`` when no unit has a message format (a preflight, a
    run with nothing to do)."""
    before: set[str] = set()
    after: set[str] = set()
    for u in report.iter_results():
        before |= _labels(u.format_mix("before"), u.input_format)
        after |= _labels(u.format_mix("after"), u.output_format)
    return fmt_formats(", ".join(_format_order(before)) or None, ", ".join(_format_order(after)) or None)


def run_digest(report: RunReport) -> str:
    """The run's record digest, ``blake3-256, canonical records v1``; units digested with another
    hash (finished by another kmigrate version) are counted after it."""
    others = {a: n for a, n in report.digest_algorithms().items() if a != report.digest.algorithm}
    extra = ", ".join(f"{n} unit{'' if n == 1 else 's'} {a.value}" for a, n in sorted(others.items()))
    return f"{report.digest}" + (f" ({extra})" if extra else "")


def _labels(mix: Mapping[str, int], label: str | None) -> set[str]:
    """A unit's formats on one side: its per-format bytes, else its label (``v0,v1`` for a mix)."""
    return set(mix) if mix else {f.strip() for f in (label or "").split(",") if f.strip()}


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


def _nice_step(raw: float) -> float:
    """The smallest 1, 2 or 5 × 10^k at or above ``raw`` (> 0)."""
    exp = math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        step = m * 10.0**exp
        if step >= raw * (1 - 1e-9):
            return step
    raise AssertionError("unreachable")


def _ticks(maximum: float, step: float) -> list[float]:
    """0, step, 2·step, … up to the first multiple at or above ``maximum``."""
    n = max(1, math.ceil(maximum / step - 1e-9))
    return [i * step for i in range(n + 1)]


def byte_ticks(maximum: float, count: int = 4) -> list[tuple[float, str]]:
    """(bytes, label) of an axis from 0 to at least ``maximum`` bytes in about ``count`` steps.

    The step is 1, 2 or 5 × 10^k in the unit ``fmt_bytes`` would pick for the maximum (whole
    bytes at least), and every label carries the decimals that step needs: labels are distinct
    and increase, and the axis ends at a labelled tick at or above the highest bar. With nothing
    to show (0 bytes) the axis is the single tick ``0 B``."""
    if maximum <= 0:
        return [(0.0, "0 B")]
    k = 0
    while maximum / 1024**k >= 1024 and k < len(_BYTE_UNITS) - 1:
        k += 1
    scaled = maximum / 1024**k
    step = _nice_step(scaled / count)
    if k == 0:
        step = max(step, 1.0)
    decimals = max(0, -math.floor(math.log10(step) + 1e-9))
    return [(t * 1024**k, "0 B" if t == 0 else f"{t:.{decimals}f} {_BYTE_UNITS[k]}") for t in _ticks(scaled, step)]


def second_ticks(maximum: float, count: int = 4) -> list[tuple[float, str]]:
    """(seconds, label) of a time axis from 0 to at least ``maximum``, steps of 1, 2 or 5 × 10^k
    seconds; a single ``0 s`` tick when no time passed."""
    if maximum <= 0:
        return [(0.0, "0 s")]
    return [(t, fmt_seconds(t)) for t in _ticks(maximum, _nice_step(maximum / count))]


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


def _y_tick(x1: float, x2: float, y: float, value: float, label: str) -> str:
    return (
        f'<line x1="{x1}" x2="{x2}" y1="{y:.2f}" y2="{y:.2f}" class="grid"></line>'
        f'<text x="{x1 - 6}" y="{y + 4:.2f}" text-anchor="end" class="axis tick" '
        f"{attrs({'data-axis': 'y', 'data-tick': value})}>{_esc(label)}</text>"
    )


def svg_bytes_per_broker(brokers: list[dict[str, Any]]) -> Markup:
    """Grouped vertical bars: bytes before and after per broker."""
    if not brokers:
        return Markup('<p class="muted" data-chart-empty="bytes-per-broker">No brokers in this report.</p>')
    left, top, plot_h, group_w, bar_w = 80, 16, 180, 70, 26
    width = left + group_w * len(brokers) + 120
    height = top + plot_h + 40
    ticks = byte_ticks(max(max(b["totals"]["bytes_before"], b["totals"]["bytes_after"]) for b in brokers))
    scale_max = ticks[-1][0] or 1
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" id="chart-bytes-per-broker" '
        f'data-chart="bytes-per-broker" width="{width}" height="{height}" role="img" '
        f'aria-label="Bytes before and after per broker">'
    ]
    for tick, label in ticks:
        ty = top + plot_h - plot_h * tick / scale_max
        out.append(_y_tick(left, width - 110, ty, tick, label))
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
    y_ticks, x_ticks = byte_ticks(max(ys)), second_ticks(max(xs))
    x_max, y_max = (x_ticks[-1][0] or 1.0), (y_ticks[-1][0] or 1)
    last = timeline[-1]
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" id="chart-progress" data-chart="progress" '
        f'width="{left + plot_w + 30}" height="{top + plot_h + 40}" role="img" aria-label="Progress over the run" '
        f"{attrs({'data-points': len(timeline), 'data-final-units-done': last['units_done'], 'data-final-bytes-done': last['bytes_done']})}>"  # noqa: E501
    ]
    for tick, label in y_ticks:
        out.append(_y_tick(left, left + plot_w, top + plot_h - plot_h * tick / y_max, tick, label))
    for tick, label in x_ticks:
        tx = left + plot_w * tick / x_max
        out.append(
            f'<text x="{tx:.2f}" y="{top + plot_h + 16}" text-anchor="middle" class="axis tick" '
            f"{attrs({'data-axis': 'x', 'data-tick': tick})}>{_esc(label)}</text>"
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


class _CompiledTemplateCache(FileSystemBytecodeCache):
    """jinja2's cache of compiled templates, in the user's private directory under the system's
    temporary one (jinja2 creates it mode 0700 and refuses one that another user owns; an entry
    is keyed by the template's name and a checksum of its source). Compiling the report page
    costs about 50 ms per process, as much as the rest of a small run's finalize. A cache that
    cannot be read or written is no cache, never an error: the page is compiled and written."""

    def load_bytecode(self, bucket: Bucket) -> None:
        try:
            super().load_bytecode(bucket)  # jinja2 itself resets on a damaged entry
        except OSError:  # unreadable: compile
            bucket.reset()

    def dump_bytecode(self, bucket: Bucket) -> None:
        with contextlib.suppress(OSError):  # not written: the next process compiles again
            super().dump_bytecode(bucket)


def _compiled_template_cache() -> FileSystemBytecodeCache | None:
    try:
        return _CompiledTemplateCache()
    except (OSError, RuntimeError):  # no private temporary directory: compile every time
        return None


# The template ships inside the package (the build includes non-Python files of ``migration/``).
_ENV = Environment(
    loader=FileSystemLoader(Path(__file__).with_name("templates")),
    autoescape=True,  # every {{ }} is escaped; only Markup built above is trusted
    undefined=StrictUndefined,
    keep_trailing_newline=True,
    bytecode_cache=_compiled_template_cache(),
)
_PAGE = _ENV.get_template("report.html.j2")


def _finding_text(f: Mapping[str, Any]) -> str:
    where = locate(f["file"], f["position"])
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
        f"data-{prefix}units-ineligible": t.get("units_ineligible", 0),
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


def stored_page_href(run_id: str) -> str:
    """Another run's page seen from a stored page: the report store's layout,
    ``<root>/<run id>/report.html``, the same on disk and in a bucket."""
    return f"../{run_id}/report.html"


@dataclass(frozen=True)
class ReportLink:
    """Another report of the same DAG run, as the report store lists it."""

    run_id: str
    kind: str
    status: str
    exit_code: int
    units: int
    task_id: str | None = None
    broker_ids: tuple[int, ...] = ()
    merges_steps: bool = False  # the DAG run's own report


# Row roles of the "Reports of this DAG run" table, and the status of a step that left no report.
STATUS_MISSING = "missing"
ROLE_DAG_RUN = "dag-run report"
ROLE_STEP = "step"
ROLE_RELATED = "other report of this DAG run"


def dag_run_rows(r: Mapping[str, Any], links: Sequence[ReportLink], href: Callable[[str], str]) -> list[dict[str, Any]]:
    """The reports a page links: the DAG run's own report first (on a step's page), then every
    step this report merged (a step without a report is listed, unlinked), then any other
    report of the DAG run the store holds (each broker's preflight, a rollback)."""
    rows: list[dict[str, Any]] = []
    for link in links:
        if link.merges_steps and link.run_id != r["run_id"]:
            rows.append(_link_row(link, ROLE_DAG_RUN, href))
    seen = {r["run_id"], *(row["run_id"] for row in rows)}
    for step in r["steps"]:
        seen.add(step["run_id"])
        found = step["status"] is not None
        rows.append({
            "run_id": step["run_id"], "role": ROLE_STEP, "kind": step["kind"], "task_id": step["task_id"],
            "broker_ids": list(step["broker_ids"]), "status": step["status"] if found else STATUS_MISSING,
            "exit_code": step["exit_code"], "units": step["units"] if found else None,
            "href": href(step["run_id"]) if found else None,
        })
    rows.extend(_link_row(link, ROLE_RELATED, href) for link in links if link.run_id not in seen)
    for row in rows:
        row["attrs"] = attrs({"data-run-id": row["run_id"], "data-role": row["role"], "data-status": row["status"],
                              "data-href": row["href"], "data-broker-ids": ",".join(map(str, row["broker_ids"]))})
    return rows


def _link_row(link: ReportLink, role: str, href: Callable[[str], str]) -> dict[str, Any]:
    return {"run_id": link.run_id, "role": role, "kind": link.kind, "task_id": link.task_id,
            "broker_ids": list(link.broker_ids), "status": link.status, "exit_code": link.exit_code,
            "units": link.units, "href": href(link.run_id)}


def param_rows(params: Mapping[str, Any], prefix: str = "") -> list[tuple[str, str]]:
    """The run's parameters as key/value rows a person reads: a mapping becomes one row per key
    (``excluded_topics.audit``), a list of plain values one comma-separated cell, None ``–``."""
    rows: list[tuple[str, str]] = []
    for key, value in params.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            rows.extend(param_rows(value, name + ".") if value else [(name, "–")])
        elif isinstance(value, list) and all(not isinstance(v, Mapping | list) for v in value):
            rows.append((name, ", ".join("–" if v is None else str(v) for v in value) or "–"))
        elif isinstance(value, Mapping | list):
            import json

            rows.append((name, json.dumps(value)))
        elif value is None:
            rows.append((name, "–"))
        elif isinstance(value, bool):
            rows.append((name, "yes" if value else "no"))
        else:
            rows.append((name, str(value)))
    return rows


def render_html(
    report: RunReport, *, links: Sequence[ReportLink] = (), href: Callable[[str], str] = stored_page_href
) -> str:
    """The report page. Works from the JSON form only, so the page cannot show a number the JSON lacks.

    ``links``: other reports of the same DAG run (the store finds them); with the steps this
    report merged they make the page's "Reports of this DAG run" table, whose links ``href``
    builds from a run id (default: the store's layout on disk, for the stored page)."""
    r = report.model_dump(mode="json")
    # Shown with the run's other format facts ("Run details"); the JSON holds it as ``digest``.
    r["formats"]["other"] = {**r["formats"]["other"], "Record digest": run_digest(report)}
    t = r["totals"]
    dag_run_reports = dag_run_rows(r, links, href)
    brokers = []
    for b in r["brokers"]:
        b = dict(b)
        b["attrs"] = attrs({"data-broker-id": b["broker_id"], **_totals_attrs(b["totals"], "")})
        # The step reports that cover this broker (a rollout has one per broker).
        b["reports"] = [row for row in dag_run_reports
                        if row["role"] == ROLE_STEP and row["href"] and b["broker_id"] in row["broker_ids"]]
        window = report.broker(b["broker_id"]).window
        b["window_text"] = window.describe(b["broker_id"]) if window is not None else None
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
            "data-digest-algorithm": r["digest"]["algorithm"],
            "data-digest-version": r["digest"]["version"],
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
        dag_run_reports=dag_run_reports,
        param_rows=param_rows(r["params"]),
        href=href,
        fmt_bytes=fmt_bytes,
        fmt_int=fmt_int,
        fmt_seconds=fmt_seconds,
        fmt_formats=fmt_formats,
        finding_text=_finding_text,
        finding_attrs=_finding_attrs,
        unit_attrs=_unit_attrs,
    )

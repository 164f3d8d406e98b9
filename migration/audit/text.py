"""Terminal renderings of a run report: a ``rich`` table and a plain-text summary.

Both read the same JSON-derived totals as the HTML page, so the CLI, the page and the JSON
cannot disagree."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.measure import Measurement
from rich.table import Table

from migration.audit.html import fmt_bytes, fmt_seconds, run_digest, run_formats
from migration.audit.model import Finding, FindingCode, RunReport, RunStatus, Totals
from migration.logdir.model import Inventory

_STATUS_STYLE = {
    RunStatus.OK: "bold green",
    RunStatus.FAILED: "bold red",
    RunStatus.REFUSED: "bold yellow",
    RunStatus.RUNNING: "bold",
}

_COLUMNS = (
    "broker",
    "units",
    "ok",
    "failed",
    "refused",
    "skipped",
    "bytes before",
    "bytes after",
    "records before",
    "records after",
)


def _row(label: str, t: Totals) -> list[str]:
    return [
        label,
        f"{t.units:,}",
        f"{t.units_ok:,}",
        f"{t.units_failed:,}",
        f"{t.units_refused:,}",
        f"{t.units_skipped:,}",
        f"{t.bytes_before:,}",
        f"{t.bytes_after:,}",
        f"{t.records_before:,}",
        f"{t.records_after:,}",
    ]


@dataclass(frozen=True)
class _Column:
    name: str
    value: Callable[[Totals], int]
    is_bytes: bool = False
    optional: bool = False  # shown only when a row holds something other than 0


_TABLE_COLUMNS = (
    _Column("units", lambda t: t.units),
    _Column("ok", lambda t: t.units_ok),
    _Column("failed", lambda t: t.units_failed),
    _Column("refused", lambda t: t.units_refused, optional=True),
    _Column("skipped", lambda t: t.units_skipped, optional=True),
    _Column("ineligible", lambda t: t.units_ineligible, optional=True),
    _Column("planned", lambda t: t.units_planned, optional=True),
    _Column("bytes before", lambda t: t.bytes_before, is_bytes=True),
    _Column("bytes after", lambda t: t.bytes_after, is_bytes=True),
    _Column("records before", lambda t: t.records_before),
    _Column("records after", lambda t: t.records_after),
)
# What goes first when the table is wider than the terminal: the "before" figures (the
# report keeps them), then the rarer counts. Broker, units, ok, failed and records after stay:
# they are the verdict (docs/operations.md, "Reading a run's summary").
_DROP_ORDER = ("bytes before", "records before", "planned", "ineligible", "skipped", "refused", "bytes after")


@dataclass
class _Layout:
    columns: list[_Column]
    human_bytes: bool = False
    dropped: list[str] = field(default_factory=list)


def _build_table(report: RunReport, layout: _Layout) -> Table:
    status = report.status
    table = Table(
        title=f"kmigrate {report.kind} {report.run_id}: {status.value} (exit {report.exit_code()})",
        title_style=_STATUS_STYLE[status],
        show_footer=True,
        box=box.SIMPLE_HEAVY,
        pad_edge=False,
        collapse_padding=True,
        padding=(0, 1, 0, 0),
    )

    def cells(label: str, t: Totals) -> list[str]:
        return [label, *((fmt_bytes(c.value(t)) if c.is_bytes and layout.human_bytes else f"{c.value(t):,}")
                         for c in layout.columns)]

    total = cells("total", report.totals)
    rows = [(cells(str(b.broker_id), b.totals), b.totals) for b in report.brokers]
    for i, name in enumerate(["broker", *(c.name for c in layout.columns)]):
        # A narrow terminal may wrap headers, never truncate a number into "42,0…".
        width = max(len(w) for w in [*name.split(), *(r[i] for r in [total, *(r for r, _ in rows)])])
        table.add_column(
            name.replace(" ", "\n"), footer=total[i], justify="left" if i == 0 else "right", min_width=width,
            no_wrap=i > 0,
        )
    for row, t in rows:
        table.add_row(*row, style="red" if t.units_failed or t.units_refused else None)
    return table


def _layout(report: RunReport, width: int | None) -> _Layout:
    """The columns that fit ``width`` (None: all of them), following ``_DROP_ORDER``."""
    every = [report.totals, *(b.totals for b in report.brokers)]
    layout = _Layout([c for c in _TABLE_COLUMNS if not c.optional or any(c.value(t) for t in every)])
    if width is None:
        return layout
    measure = Console(width=10_000, color_system=None)

    def fits() -> bool:
        return Measurement.get(measure, measure.options, _build_table(report, layout)).minimum <= width

    if fits():
        return layout
    layout.human_bytes = True  # "1.2 GiB" is narrower than "1,234,567,890"
    for name in _DROP_ORDER:
        if fits():
            break
        if any(c.name == name for c in layout.columns):
            layout.columns = [c for c in layout.columns if c.name != name]
            layout.dropped.append(name)
    return layout


def summary_table(report: RunReport, width: int | None = None) -> Table:
    """Per broker: units ok/failed (refused/skipped/ineligible/planned when any), bytes and
    records before/after; a total row. With ``width`` (a terminal's), the columns that fit."""
    return _build_table(report, _layout(report, width))


def print_summary(report: RunReport, console: Console | None = None) -> None:
    console = console or Console()
    layout = _layout(report, console.width)
    console.print(_build_table(report, layout))
    if layout.dropped:
        console.print(f"(left out to fit {console.width} columns: {', '.join(layout.dropped)}; "
                      f"'kmigrate report {report.run_id} --format text' shows every column)",
                      markup=False, highlight=False, style="dim")
    console.print(_figures_line(report), markup=False, highlight=False, soft_wrap=True)
    for line in _window_lines(report):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    for line, clean in _steps(report):
        console.print(line, style=None if clean else "red", markup=False, highlight=False, soft_wrap=True)
    for line in _repair_lines(report):
        console.print(line, style="yellow", markup=False, highlight=False, soft_wrap=True)
    for line in _problem_lines(report):
        # soft wrap: a path broken by the console could not be copied back into a shell
        console.print(line, style="red", markup=False, highlight=False, soft_wrap=True)


# Unit warnings that say the run repaired something beyond its plain job: always shown.
REPAIR_CODES = frozenset({FindingCode.INDEX_REBUILT, FindingCode.ROLLBACK_REPAIR})


def _repair_lines(report: RunReport) -> list[str]:
    return [f"REPAIRED broker {broker_id} {topic}-{partition} {u.unit} ({w.code}): {w.message}"
            for broker_id, topic, partition, u in report.iter_units() for w in u.warnings if w.code in REPAIR_CODES]


def _window_lines(report: RunReport) -> list[str]:
    return [b.window.describe(b.broker_id) for b in report.brokers if b.window is not None]


def _figures_line(report: RunReport) -> str:
    return f"duration {fmt_seconds(report.duration_s)}, formats {run_formats(report)}"


def _steps(report: RunReport) -> list[tuple[str, bool]]:
    """(line, clean) for every step a DAG run's report merged (none for a step's own report)."""
    out = []
    for s in report.steps:
        if s.status is None:
            out.append((f"step {s.run_id}: no report", False))
            continue
        brokers = (f"broker{'' if len(s.broker_ids) == 1 else 's'} {', '.join(map(str, s.broker_ids))}"
                   if s.broker_ids else "no brokers")
        why = f" ({s.note})" if s.note and not s.units else ""
        out.append((f"step {s.run_id}: {s.status.value} (exit {s.exit_code}), {s.units} units, {brokers}{why}",
                    s.exit_code == 0))
    return out


def note_lines(report: RunReport) -> list[str]:
    """The run's warnings (where the backups are, the commit and rollback commands, ...) and what
    happened to it since (a rollback, a commit: its events), one line each."""
    lines = [f"note: {_where(w)}{w.message}" for w in report.warnings]
    lines.extend(f"event: {e.describe()}" for e in report.events)
    return lines


_DETAIL_COLUMNS = ("broker", "partition", "units", "ok", "failed", "skipped", "other", "bytes before", "bytes after",
                   "records before", "records after", "why")


def partition_rows(report: RunReport) -> list[list[str]]:
    """Per partition: its units' outcomes and figures, and the reason codes of the units left as
    they were (skipped, ineligible, planned) or that failed."""
    rows = []
    for b in report.brokers:
        for p in b.partitions:
            t = Totals.of_units(p.units)
            why = sorted({str(f.code) for u in p.units if u.status.value != "ok"
                          for f in [*u.errors, *u.warnings] if f.code})
            rows.append([str(b.broker_id), p.name, f"{t.units:,}", f"{t.units_ok:,}", f"{t.units_failed:,}",
                         f"{t.units_skipped:,}", f"{t.units_refused + t.units_ineligible + t.units_planned:,}",
                         f"{t.bytes_before:,}", f"{t.bytes_after:,}", f"{t.records_before:,}",
                         f"{t.records_after:,}", ",".join(why) or "-"])
    return rows


def _aligned(header: tuple[str, ...] | list[str], rows: list[list[str]], left: int = 2) -> list[str]:
    """Plain columns: the first ``left`` and the last left-aligned, the others right-aligned."""
    table = [list(header), *rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    out = []
    for n, r in enumerate(table):
        out.append("  ".join(c.ljust(widths[i]) if i < left or i == len(header) - 1 else c.rjust(widths[i])
                             for i, c in enumerate(r)).rstrip())
        if n == 0:
            out.append("  ".join("-" * w for w in widths))
    return out


def detail_lines(report: RunReport) -> list[str]:
    """``--detail``: one row per partition."""
    rows = partition_rows(report)
    return _aligned(_DETAIL_COLUMNS, rows) if rows else ["(no partitions)"]


def _problem_lines(report: RunReport) -> list[str]:
    lines: list[str] = []
    if report.refusal:
        lines.append(f"REFUSED: {report.refusal}")
    for e in report.errors:
        lines.append(f"ERROR {_where(e)}{e.message}")
    for broker_id, topic, partition, u in report.problem_units():
        head = f"{u.status.value.upper()} broker {broker_id} {topic}-{partition} {u.unit}"
        if u.digest_mismatch:
            head += (f" (record digest changed: {u.digest_before} -> {u.digest_after}, "
                     f"{report.unit_digest_algorithm(u).value})")
        lines.append(head)
        lines.extend(f"  {_where(e)}{e.message}" for e in u.errors)
    return lines


def _where(f: Finding) -> str:
    """``FILE @ byte N: `` (:func:`~migration.logdir.findings.locate`), empty for no place."""
    return f"{f.where}: " if f.where else ""


def render_text(report: RunReport, *, detail: bool = False) -> str:
    """Plain text (no colour, no box drawing) for logs, e-mails and CI output: the summary, the
    steps, repairs, problems, the run's notes and events, and with ``detail`` one row per
    partition."""
    t = report.totals
    lines = [
        f"kmigrate {report.kind} run {report.run_id}",
        f"status: {report.status.value} (exit code {report.exit_code()})",
        f"started: {report.started_at.isoformat()}  finished: "
        + (report.finished_at.isoformat() if report.finished_at else "not finished"),
    ]
    lines.append(_figures_line(report))
    lines.append(f"record digest: {run_digest(report)}")
    if report.dag_id:
        lines.append(f"airflow: dag {report.dag_id} run {report.dag_run_id}")
    lines.append(
        f"units: {t.units} (ok {t.units_ok}, failed {t.units_failed}, refused {t.units_refused}, "
        f"skipped {t.units_skipped}, ineligible {t.units_ineligible}, planned {t.units_planned})"
    )
    lines.append(
        f"bytes: {t.bytes_before} -> {t.bytes_after} ({fmt_bytes(t.bytes_before)} -> {fmt_bytes(t.bytes_after)})"
    )
    lines.append(f"records: {t.records_before} -> {t.records_after}")
    rows = [list(_COLUMNS)] + [_row(str(b.broker_id), b.totals) for b in report.brokers] + [_row("total", t)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(_COLUMNS))]
    for n, r in enumerate(rows):
        lines.append("  ".join(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(r)).rstrip())
        if n == 0 or n == len(rows) - 2:
            lines.append("  ".join("-" * w for w in widths))
    lines.extend(_window_lines(report))
    lines.extend(line for line, _ in _steps(report))
    lines.extend(_repair_lines(report))
    lines.extend(_problem_lines(report))
    lines.extend(note_lines(report))
    if detail:
        lines.append("")
        lines.extend(detail_lines(report))
    return "\n".join(lines) + "\n"


def print_inventory(inv: Inventory, console: Console) -> None:
    """The inventory of log dirs as a person reads it: one table of partitions per log dir."""
    inexact = False
    for d in inv.log_dirs:
        flags = []
        if d.locked:
            flags.append("[red]LOCKED by a live process[/red]")
        flags.append("clean shutdown" if d.clean_shutdown else "[yellow]unclean shutdown[/yellow]")
        if d.bootstrap_checkpoint:
            flags.append("bootstrap.checkpoint")
        if d.meta is None:
            who = f"[yellow]meta.properties unreadable: {escape(d.meta_error)}[/yellow]" if d.meta_error \
                else "no meta.properties"
        else:
            who = f"node {_or_dash(d.node_id)} cluster {escape(_or_dash(d.cluster_id))}"
        console.print(f"[bold]{escape(d.path)}[/bold] {who}: {', '.join(flags)}", highlight=False, soft_wrap=True)
        if d.partitions:
            t = Table(show_edge=False, pad_edge=False)
            for col in ("partition", "topic id", "segments", "bytes", "records", "formats", "codecs", "snapshots",
                        "max timestamp"):
                t.add_column(col, overflow="fold")
            for p in d.partitions:
                fmts: dict[str, int] = {}
                codecs: dict[str, int] = {}
                records = 0
                exact = True
                max_ts = -1
                for s in p.segments:
                    if s.stats:
                        for k, v in s.stats.bytes_by_magic.items():
                            fmts[k] = fmts.get(k, 0) + v
                        for k, v in s.stats.codecs.items():
                            codecs[k] = codecs.get(k, 0) + v
                        records += s.stats.records
                        exact &= s.stats.records_exact
                        max_ts = max(max_ts, s.stats.max_timestamp)
                inexact |= not exact
                t.add_row(escape(p.name), p.topic_id or "-", str(len(p.segments)), str(p.size),
                          f"{records}{'' if exact else '+'}", ",".join(sorted(fmts)) or "-",
                          ",".join(sorted(codecs)) or "-", str(len(p.producer_snapshots)),
                          _timestamp(max_ts) if max_ts >= 0 else "-")
            # in a pipe or a file, rows stay whole (no name broken mid-word at the console's width)
            if console.is_terminal:
                console.print(t)
            else:
                wide = Console(file=console.file, width=100_000, color_system=None, highlight=False)
                wide.print(t, crop=False)
        elif d.metadata_log is None:
            console.print("  no partitions", highlight=False)
        if d.metadata_log:
            checkpoints = ", ".join(c.file for c in d.metadata_log.checkpoints) or "none"
            n = len(d.metadata_log.segments)
            console.print(f"  metadata log {d.metadata_log.path}: {n} segment{'' if n == 1 else 's'}, "
                          f"snapshots {checkpoints}", markup=False, highlight=False, soft_wrap=True)
    if inexact:
        console.print("records: N+ counts at least N (compressed legacy wrappers were not opened; --deep counts "
                      "every record)", markup=False, highlight=False, soft_wrap=True, style="dim")


def _timestamp(ms: int) -> str:
    """Epoch milliseconds as ISO 8601 UTC, with the raw value (what kafka-dump-log prints)."""
    from datetime import UTC, datetime

    try:
        iso = datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    except (OverflowError, OSError, ValueError):
        return str(ms)
    return f"{iso} ({ms})"


def _or_dash(value: object) -> str:
    return "-" if value is None else str(value)

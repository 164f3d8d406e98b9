"""What every command of the CLI shares: exit codes, the consoles, the inventory printer."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.table import Table

EXIT_OK = 0
EXIT_PROBLEMS = 1
EXIT_USAGE = 2
EXIT_REFUSED = 3

# Wide tables when piped or captured (reports, CI logs); the terminal's width otherwise.
console = Console(width=None if sys.stdout.isatty() else 160)
err_console = Console(stderr=True, width=None if sys.stderr.isatty() else 160)


def print_inventory(inv) -> None:  # noqa: ANN001 - Inventory, imported lazily
    for d in inv.log_dirs:
        flags = []
        if d.locked:
            flags.append("[red]LOCKED by a live process[/red]")
        flags.append("clean shutdown" if d.clean_shutdown else "[yellow]unclean shutdown[/yellow]")
        if d.bootstrap_checkpoint:
            flags.append("bootstrap.checkpoint")
        console.print(f"[bold]{d.path}[/bold] node {d.node_id} cluster {d.cluster_id}: {', '.join(flags)}")
        if d.partitions:
            t = Table(show_edge=False, pad_edge=False)
            for col in ("partition", "topic id", "segments", "bytes", "records", "formats", "codecs", "snapshots",
                        "max timestamp"):
                t.add_column(col)
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
                t.add_row(p.name, p.topic_id or "-", str(len(p.segments)), str(p.size),
                          f"{records}{'' if exact else '+'}", ",".join(sorted(fmts)), ",".join(sorted(codecs)),
                          str(len(p.producer_snapshots)), str(max_ts))
            console.print(t)
        if d.metadata_log:
            console.print(f"  metadata log {d.metadata_log.path}: checkpoints "
                          f"{[c.file for c in d.metadata_log.checkpoints]}, "
                          f"{len(d.metadata_log.segments)} segment(s)")

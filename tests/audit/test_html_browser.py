"""The report page in a real headless Chromium: the DOM it builds has the charts and its
numbers equal the JSON; a screenshot is written for eyeballing (``KMIGRATE_KEEP_SCREENSHOT``)."""

from __future__ import annotations

import json
import os
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from migration.audit.store import ReportStore

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def ensure_chromium() -> Path:
    """Debian's chromium, which ``make test`` installs (``make system-tools``); a test run
    without it fails with the command, never skips."""
    assert CHROMIUM.exists(), f"{CHROMIUM} is missing: run 'make system-tools' (apt-get install chromium, as root)"
    return CHROMIUM


@pytest.fixture(scope="module")
def chromium() -> Path:
    return ensure_chromium()


def _run(chromium: Path, tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(chromium), *FLAGS, f"--user-data-dir={tmp / 'profile'}", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HOME": str(tmp)},
    )


class _Dom(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str | None], tuple[str, ...]]] = []
        self._stack: list[tuple[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self.elements.append((tag, a, tuple(i for _, i in self._stack if i)))
        if tag not in {"meta", "br", "img", "input", "link", "hr"}:
            self._stack.append((tag, a.get("id") or ""))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, dict(attrs), tuple(i for _, i in self._stack if i)))

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self._stack) - 1, -1, -1):
            if self._stack[i][0] == tag:
                del self._stack[i:]
                break


@pytest.mark.slow
def test_page_in_headless_chromium(chromium: Path, tmp_path: Path, make_report) -> None:
    report = make_report()
    store = ReportStore(tmp_path / "reports")
    store.save(report)
    page = store.html_path(report.run_id)
    data = json.loads(store.json_path(report.run_id).read_text())

    dumped = _run(chromium, tmp_path, "--dump-dom", page.as_uri())
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    dom = _Dom()
    dom.feed(dumped.stdout)
    els = dom.elements

    # The browser parsed the page into a document with our three charts as SVG elements.
    charts = {a.get("data-chart"): t for t, a, _ in els if a.get("data-chart")}
    assert charts == {"format-mix": "svg", "bytes-per-broker": "svg", "progress": "svg"}

    (summary,) = [a for t, a, _ in els if t == "header" and a.get("id") == "summary"]
    t = data["totals"]
    assert int(summary["data-total-bytes-before"]) == t["bytes_before"]
    assert int(summary["data-total-bytes-after"]) == t["bytes_after"]
    assert int(summary["data-units-failed"]) == t["units_failed"]
    assert int(summary["data-exit-code"]) == data["exit_code"]

    for b in data["brokers"]:
        bars = {
            a["data-side"]: int(a["data-bytes"])
            for tag, a, ids in els
            if tag == "rect" and "chart-bytes-per-broker" in ids and a.get("data-broker-id") == str(b["broker_id"])
        }
        assert bars == {"before": b["totals"]["bytes_before"], "after": b["totals"]["bytes_after"]}
        for side in ("before", "after"):
            segs = {
                a["data-format"]: int(a["data-bytes"])
                for tag, a, ids in els
                if tag == "rect"
                and "chart-format-mix" in ids
                and a.get("data-broker-id") == str(b["broker_id"])
                and a.get("data-side") == side
            }
            assert segs == b["format_mix"][side]

    points = [(a["data-at"], int(a["data-bytes-done"])) for tag, a, ids in els if tag == "circle"]
    assert points == [(p["at"], p["bytes_done"]) for p in data["timeline"]]
    assert any(tag == "polyline" and "chart-progress" in ids for tag, _, ids in els)

    failures = [a for tag, a, ids in els if tag == "li" and "failures" in ids and a.get("class") == "failure"]
    assert [f["data-unit"] for f in failures] == [
        u["unit"] for b in data["brokers"] for p in b["partitions"] for u in p["units"] if u["status"] == "failed"
    ]
    # The hostile file name stayed text: the browser built no script element from it.
    assert not [tag for tag, _, _ in els if tag == "script"]

    shot = Path(os.environ.get("KMIGRATE_KEEP_SCREENSHOT") or tmp_path / "report.png")
    taken = _run(chromium, tmp_path, "--window-size=1300,2400", f"--screenshot={shot}", page.as_uri())
    assert taken.returncode == 0, taken.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000

"""The report page's compiled-template cache: a second process renders the same page from it,
and a damaged or unusable cache is compiled around, never an error."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

from jinja2 import Environment, FileSystemBytecodeCache, FileSystemLoader, StrictUndefined

from migration.audit import html as report_html
from migration.audit.model import RunReport

_RENDER = (
    "import sys; from migration.audit.html import render_html; from migration.audit.model import RunReport; "
    "sys.stdout.write(render_html(RunReport.model_validate_json(open(sys.argv[1]).read())))"
)


def _render_in_process(tmpdir: Path, report_json: Path) -> str:
    env = {**os.environ, "TMPDIR": str(tmpdir)}
    return subprocess.run([sys.executable, "-c", _RENDER, str(report_json)], env=env, check=True,
                          capture_output=True, text=True).stdout


def test_second_process_renders_the_same_page_from_the_cache(report: RunReport, tmp_path: Path) -> None:
    doc = tmp_path / "report.json"
    doc.write_text(report.to_json())
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    first = _render_in_process(tmpdir, doc)
    (cache_dir,) = tmpdir.glob("_jinja2-cache-*")
    assert oct(cache_dir.stat().st_mode & 0o777) == "0o700"
    (entry,) = cache_dir.glob("__jinja2_*.cache")
    entry.touch()
    before = entry.stat().st_mtime_ns
    second = _render_in_process(tmpdir, doc)
    assert second == first == report_html.render_html(report)
    assert entry.stat().st_mtime_ns == before  # read, not written again


def _env(cache: report_html._CompiledTemplateCache) -> Environment:
    return Environment(loader=FileSystemLoader(Path(report_html.__file__).with_name("templates")), autoescape=True,
                       undefined=StrictUndefined, keep_trailing_newline=True, bytecode_cache=cache)


def test_a_damaged_cache_entry_is_compiled_around(report: RunReport, tmp_path: Path, monkeypatch) -> None:
    cache = report_html._CompiledTemplateCache(str(tmp_path))
    expected = report_html.render_html(report)
    _env(cache).get_template("report.html.j2")
    (entry,) = tmp_path.glob("__jinja2_*.cache")
    data = entry.read_bytes()
    # the entry's header (jinja2's magic and the source checksum) kept, the marshalled code cut
    entry.write_bytes(data[: len(data) // 2])
    monkeypatch.setattr(report_html, "_PAGE", _env(cache).get_template("report.html.j2"))
    assert report_html.render_html(report) == expected


def test_a_cache_that_cannot_be_written_is_no_cache(report: RunReport, tmp_path: Path, monkeypatch) -> None:
    expected = report_html.render_html(report)
    cache = report_html._CompiledTemplateCache(str(tmp_path / "not-a-directory" / "x"))
    monkeypatch.setattr(report_html, "_PAGE", _env(cache).get_template("report.html.j2"))
    assert report_html.render_html(report) == expected
    assert not (tmp_path / "not-a-directory").exists()


def test_a_cache_that_cannot_be_read_is_no_cache(report: RunReport, tmp_path: Path, monkeypatch) -> None:
    """An I/O error reading an entry (jinja2 itself passes only a missing file or a refused open)."""
    expected = report_html.render_html(report)
    cache = report_html._CompiledTemplateCache(str(tmp_path))
    _env(cache).get_template("report.html.j2")  # an entry is written

    def unreadable(self, bucket) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(FileSystemBytecodeCache, "load_bytecode", unreadable)
    monkeypatch.setattr(report_html, "_PAGE", _env(cache).get_template("report.html.j2"))
    assert report_html.render_html(report) == expected

"""The HTML page: renders, its data-* figures equal the JSON, failures listed, hostile text escaped."""

from __future__ import annotations

import json
from html.parser import HTMLParser

import pytest

from migration.audit.html import render_html
from migration.audit.model import RunReport


class _Elements(HTMLParser):
    """Collects (tag, attrs, path-of-ids) for every start tag; tracks which section we are in."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str | None], tuple[str, ...]]] = []
        self._stack: list[tuple[str, str]] = []
        self.text_by_section: dict[str, list[str]] = {}
        self.scripts = 0

    _VOID = {"meta", "br", "img", "input", "link", "hr"}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "script":
            self.scripts += 1
        ids = tuple(i for _, i in self._stack if i)
        self.elements.append((tag, a, ids))
        if tag not in self._VOID:
            self._stack.append((tag, a.get("id") or ""))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, dict(attrs), tuple(i for _, i in self._stack if i)))

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self._stack) - 1, -1, -1):
            if self._stack[i][0] == tag:
                del self._stack[i:]
                break

    def handle_data(self, data: str) -> None:
        for _, i in self._stack:
            if i:
                self.text_by_section.setdefault(i, []).append(data)

    def find(self, tag: str | None = None, **match: str) -> list[dict[str, str | None]]:
        return [
            a
            for t, a, _ in self.elements
            if (tag is None or t == tag) and all(a.get(k.replace("_", "-")) == v for k, v in match.items())
        ]

    def within(self, section_id: str, tag: str | None = None) -> list[dict[str, str | None]]:
        return [a for t, a, ids in self.elements if section_id in ids and (tag is None or t == tag)]


def _parse(html_text: str) -> _Elements:
    p = _Elements()
    p.feed(html_text)
    p.close()
    return p


@pytest.fixture
def page(report: RunReport) -> tuple[_Elements, dict, str]:
    text = render_html(report)
    return _parse(text), json.loads(report.to_json()), text


def test_summary_numbers_equal_json(page) -> None:
    doc, data, _ = page
    (summary,) = doc.find("header", id="summary")
    t = data["totals"]
    assert summary["data-run-id"] == data["run_id"]
    assert summary["data-kind"] == data["kind"] == "upgrade"
    assert summary["data-status"] == data["status"] == "failed"
    assert int(summary["data-exit-code"]) == data["exit_code"] == 1
    assert int(summary["data-total-bytes-before"]) == t["bytes_before"]
    assert int(summary["data-total-bytes-after"]) == t["bytes_after"]
    assert int(summary["data-total-records-before"]) == t["records_before"]
    assert int(summary["data-total-records-after"]) == t["records_after"]
    assert int(summary["data-units-failed"]) == t["units_failed"] == 1
    assert int(summary["data-units-ok"]) == t["units_ok"]
    assert int(summary["data-units-total"]) == t["units"]
    assert float(summary["data-duration-s"]) == data["duration_s"]
    assert summary["data-dag-run-id"] == data["dag_run_id"]
    assert int(summary["data-brokers"]) == len(data["brokers"])


def test_broker_figures_equal_json(page) -> None:
    doc, data, _ = page
    for b in data["brokers"]:
        (section,) = doc.find("section", data_broker_id=str(b["broker_id"]))
        for key in ("units_failed", "bytes_before", "bytes_after", "records_before", "records_after"):
            attr = "data-" + key.replace("_", "-")
            assert int(section[attr]) == b["totals"][key], (b["broker_id"], key)
        # Charts: bytes per broker bars and the stacked format mix segments.
        for side in ("before", "after"):
            (bar,) = [
                a
                for a in doc.within("chart-bytes-per-broker", "rect")
                if a.get("data-broker-id") == str(b["broker_id"]) and a.get("data-side") == side
            ]
            assert int(bar["data-bytes"]) == b["totals"][f"bytes_{side}"]
            segs = {
                a["data-format"]: int(a["data-bytes"])
                for a in doc.within("chart-format-mix", "rect")
                if a.get("data-broker-id") == str(b["broker_id"]) and a.get("data-side") == side
            }
            assert segs == b["format_mix"][side]
    # v0/v1 before, all v2 after for the migrated units (the skipped v2 unit counts on both sides).
    assert set(data["brokers"][0]["format_mix"]["before"]) == {"v0", "v1"}
    assert set(data["brokers"][0]["format_mix"]["after"]) == {"v2"}


def test_progress_chart_equals_timeline(page) -> None:
    doc, data, _ = page
    points = doc.within("chart-progress", "circle")
    assert [(p["data-at"], int(p["data-units-done"]), int(p["data-bytes-done"])) for p in points] == [
        (p["at"], p["units_done"], p["bytes_done"]) for p in data["timeline"]
    ]
    (svg,) = doc.find("svg", id="chart-progress")
    assert int(svg["data-final-bytes-done"]) == data["timeline"][-1]["bytes_done"]
    assert doc.within("chart-progress", "polyline")


def test_failed_units_listed_in_failures_section(page, hostile: str) -> None:
    doc, data, _ = page
    (section,) = doc.find("section", id="failures")
    assert "failures" in (section["class"] or "").split()
    assert int(section["data-units-failed"]) == data["totals"]["units_failed"]
    failed = [
        (b["broker_id"], p["topic"], p["partition"], u["unit"])
        for b in data["brokers"]
        for p in b["partitions"]
        for u in p["units"]
        if u["status"] == "failed"
    ]
    listed = [
        (int(a["data-broker-id"]), a["data-topic"], int(a["data-partition"]), a["data-unit"])
        for a in doc.within("failures", "li")
        if "failure" in (a.get("class") or "").split()
    ]
    assert listed == failed == [(3, "payments", 0, hostile)]
    (err,) = [a for a in doc.within("failures", "li") if a.get("class") == "unit-error"]
    assert err["data-position"] == "1234"
    assert err["data-file"].endswith(hostile)
    text = "".join(doc.text_by_section["failures"])
    assert "CRC mismatch" in text and "1234" in text and hostile in text


def test_no_failures_section_when_clean(make_report) -> None:
    r = make_report(failed=False)
    doc = _parse(render_html(r))
    (section,) = doc.find("section", id="failures")
    assert "no-failures" in section["class"].split()
    assert section["data-units-failed"] == "0"
    assert not [a for a in doc.within("failures", "li")]


def test_refusal_shown(make_report) -> None:
    r = make_report(refused=True)
    html_text = render_html(r)
    doc = _parse(html_text)
    (summary,) = doc.find("header", id="summary")
    assert summary["data-exit-code"] == "3" and summary["data-status"] == "refused"
    assert "broker 3 is running" in "".join(doc.text_by_section["failures"])


def test_hostile_strings_are_escaped(page, hostile: str) -> None:
    doc, _, text = page
    assert "<script" not in text.lower()
    assert doc.scripts == 0
    assert "&lt;script&gt;" in text
    # The parser sees the original string as text / attribute value, never as markup.
    assert doc.find(data_unit=hostile)


def test_hostile_params_and_ids_escaped() -> None:
    r = RunReport.start(
        "inspect",
        {'"><img src=x onerror=alert(1)>': "</td><script>alert(2)</script>"},
        dag_id="d",
        dag_run_id='x"><script>alert(3)</script>',
    )
    r.warn("<b>bold</b>", file="<i>.log", position=1)
    r.finish()
    text = render_html(r)
    doc = _parse(text)
    assert doc.scripts == 0 and not doc.find("img") and not doc.find("b") and not doc.find("i")
    (summary,) = doc.find("header", id="summary")
    assert summary["data-dag-run-id"] == 'x"><script>alert(3)</script>'


def test_self_contained(page) -> None:
    _, _, text = page
    lowered = text.lower()
    for needle in ("<script", "http://", "https://", "<link", "@import", "url("):
        if needle in ("http://",):
            # The only allowed URL is the SVG namespace identifier, which is never fetched.
            assert lowered.replace("http://www.w3.org/2000/svg", "").count(needle) == 0
        elif needle == "https://":
            assert needle not in lowered
        else:
            assert needle not in lowered, needle


def test_empty_report_renders() -> None:
    r = RunReport.start("plan")
    doc = _parse(render_html(r))
    (summary,) = doc.find("header", id="summary")
    assert summary["data-status"] == "running" and summary["data-units-total"] == "0"
    assert doc.find(data_chart_empty="format-mix")


def test_record_digest_shown_with_the_run_details(page) -> None:
    doc, data, _ = page
    (summary,) = doc.find("header", id="summary")
    assert (summary["data-digest-algorithm"], summary["data-digest-version"]) == ("blake3-256", "1")
    assert data["digest"] == {"algorithm": "blake3-256", "version": 1}
    details = "".join(doc.text_by_section["run-details"])
    assert "Record digest" in details and "blake3-256, canonical records v1" in details


def test_an_old_report_page_says_blake2b(report: RunReport) -> None:
    data = json.loads(report.to_json())
    del data["digest"]
    doc = _parse(render_html(RunReport.model_validate(data)))
    (summary,) = doc.find("header", id="summary")
    assert summary["data-digest-algorithm"] == "blake2b-256"
    assert "blake2b-256, canonical records v1" in "".join(doc.text_by_section["run-details"])

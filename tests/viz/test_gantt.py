"""The HTML Gantt chart: its data (rows, bars, waits, colours), self-containment, bad input, and a real
headless-browser load (skipped only when no Chromium-family browser is installed)."""

from __future__ import annotations

import json
import re

import pytest

import moeopt as m
from moeopt.errors import InputError
from moeopt.viz import GanttTrack, gantt_data, gantt_page, write_gantt
from moeopt.viz.browser import find_browser, load_page
from moeopt.viz.gantt import PALETTE


def hand_graph() -> m.EventGraph:
    g = m.EventGraph()
    g.add(m.Event("a", resources=["c0.AIC"], duration_us=2.0, labels={"stage": "load"}))
    g.add(m.Event("b", resources=["c1.AIV0"], duration_us=1.0, labels={"stage": "vec"}))
    # ready at end(b) + λ = 1.5, but c0.AIC is held by a until 2.0: 0.5 µs of resource wait
    g.add(m.Event("c", resources=["c0.AIC"], deps={"b": 0.5}, duration_us=1.0, labels={"stage": "mm"}))
    # two resources: one bar on each row; ready at end(a) = 2.0, both free then
    g.add(
        m.Event(
            "d", resources=["c1.AIV0", "c0.AIV1"], deps={"a": 0.0}, duration_us=1.0, labels={"stage": "vec"}
        )
    )
    g.add(m.Event("e", resources=["c10.AIC"], duration_us=1.0, labels={"stage": "load"}))
    g.add(m.Event("h", resources=["c2.AIC"], duration_us=1.0, labels={"stage": "load"}))
    g.add(m.Event("f", deps={"c": 0.0, "d": 0.0}))  # a flag without resources: not drawn
    return g


def _events_by_name(doc: dict, track: int = 0) -> dict[str, list]:
    t = doc["tracks"][track]
    return {doc["strings"][e[0]]: e for e in t["events"]}


def test_rows_bars_and_waits() -> None:
    g = hand_graph()
    s = m.schedule(g)
    doc = gantt_data([GanttTrack("greedy", s, g)], color_by="stage", row_order="role")
    t = doc["tracks"][0]
    # by role, then site in natural order (c2 before c10)
    assert t["rows"] == ["c0.AIC", "c2.AIC", "c10.AIC", "c1.AIV0", "c0.AIV1"]
    assert t["hidden"] == 1  # the flag f
    assert len(t["events"]) == 6
    bars = list(zip(t["bars"][::2], t["bars"][1::2]))
    assert len(bars) == 7  # six events, d on two rows
    evs = _events_by_name(doc)
    rows_of_d = sorted(t["rows"][r] for r, e in bars if doc["strings"][t["events"][e][0]] == "d")
    assert rows_of_d == ["c0.AIV1", "c1.AIV0"]
    _name, start, end, _lab, ready, pred, res, rwait, sem, swait, kind, binding = evs["c"]
    assert (start, end, ready) == (2.0, 3.0, 1.5)
    assert doc["strings"][pred] == "b"
    assert doc["strings"][res] == "c0.AIC"
    assert rwait == 0.5
    assert sem == -1
    assert swait == 0.0
    assert doc["kinds"][kind] == "resource"
    assert doc["strings"][binding] == "c0.AIC"
    assert doc["kinds"][evs["a"][10]] == "none"
    assert evs["a"][5] == -1
    # colours follow first appearance in time: load and vec at 0 (a before b by name), mm at 2
    colour = dict(zip(doc["labels"], doc["colors"]))
    assert colour == {"load": PALETTE[0], "vec": PALETTE[1], "mm": PALETTE[2]}


def test_row_order_by_site_and_colour_by_role() -> None:
    g = hand_graph()
    s = m.schedule(g)
    doc = gantt_data([GanttTrack("x", s, g)], color_by=None, row_order="site")
    assert doc["tracks"][0]["rows"] == ["c0.AIC", "c0.AIV1", "c1.AIV0", "c2.AIC", "c10.AIC"]
    assert set(doc["labels"]) == {"AIC", "AIV0"}  # role of each event's first resource


def test_stacked_tracks_share_labels_and_a_callable_label() -> None:
    g = hand_graph()
    s1 = m.schedule(g, policy="earliest_start")
    s2 = m.schedule(g, policy="critical_path_first")
    doc = gantt_data(
        [GanttTrack("one", s1, g), GanttTrack("two", s2, g)],
        color_by=lambda name, ev: "first" if name < "d" else "second",
    )
    assert [t["title"] for t in doc["tracks"]] == ["one", "two"]
    assert sorted(doc["labels"]) == ["first", "second"]
    assert doc["tracks"][1]["makespan"] == pytest.approx(s2.makespan_us)


def no_waits(s: m.Schedule, shift: dict[str, float]) -> m.Schedule:
    """``s`` as a schedule from elsewhere (no waits recorded, like CP-SAT's), some events moved later."""
    start = {e: t + shift.get(e, 0.0) for e, t in s.start_us.items()}
    end = {e: t + shift.get(e, 0.0) for e, t in s.end_us.items()}
    return m.Schedule(start_us=start, end_us=end, resources=s.resources, policy="elsewhere")


def test_schedule_without_waits_gets_readiness_from_the_graph() -> None:
    g = hand_graph()
    s = no_waits(m.schedule(g), {"c": 1.0, "f": 1.0})
    doc = gantt_data([GanttTrack("x", s, g)])
    evs = _events_by_name(doc)
    # c now starts at 3.0; its only predecessor b ends at 1.0, λ 0.5: ready 1.5 after b
    assert (evs["c"][1], evs["c"][4], doc["strings"][evs["c"][5]]) == (3.0, 1.5, "b")
    assert doc["kinds"][evs["c"][10]] == "not recorded"
    assert (evs["a"][4], evs["a"][5]) == (0.0, -1)  # a source: ready at 0
    # without the graph nothing can be derived: the ready time is the start, no predecessor
    bare = _events_by_name(gantt_data([GanttTrack("x", s)], color_by=None))
    assert (bare["c"][4], bare["c"][5]) == (3.0, -1)


def test_page_has_no_network_reference() -> None:
    g = hand_graph()
    page = gantt_page([GanttTrack("x", m.schedule(g), g)])
    # no resource of any kind from the network, not even a scheme-relative one
    assert not re.search(r"https?://", page)
    assert not re.search(r"""(src|href)\s*=\s*["']?//""", page)
    assert "@import" not in page
    assert "url(" not in page


def test_page_escapes_its_data() -> None:
    g = m.EventGraph()
    evil = "x</script><img src=https://example.com/a.png>"
    g.add(m.Event(evil, resources=["c0.AIC"], duration_us=1.0, labels={"stage": "<b>&"}))
    s = m.schedule(g)
    page = gantt_page([GanttTrack("t </script>", s, g)], title="a <title>")
    assert "<img" not in page
    assert "<b>" not in page
    # the data survives the trip through the <script> element
    m_ = re.search(r'<script type="application/json" id="gantt-data">(.*?)</script>', page, re.S)
    assert m_ is not None
    doc = json.loads(m_.group(1))
    assert doc["strings"][doc["tracks"][0]["events"][0][0]] == evil
    assert doc["tracks"][0]["title"] == "t </script>"
    assert page.count("</script>") == 2  # the data element and the page script, nothing injected


def test_bad_input_is_one_clear_error() -> None:
    g = hand_graph()
    s = m.schedule(g)
    with pytest.raises(InputError, match="at least one schedule"):
        gantt_data([])
    with pytest.raises(InputError, match="row_order must be one of role, site, got 'core'"):
        gantt_data([GanttTrack("x", s, g)], row_order="core")
    with pytest.raises(InputError, match="color_by must be"):
        gantt_data([GanttTrack("x", s, g)], color_by=3)  # type: ignore[arg-type]
    other = m.EventGraph()
    other.add(m.Event("a", resources=["c0.AIC"], duration_us=1.0))
    with pytest.raises(InputError, match=r"7 scheduled event\(s\) are not in its graph"):
        gantt_data([GanttTrack("x", s, m.EventGraph())])
    with pytest.raises(InputError, match="must be a GanttTrack"):
        gantt_data([s])  # type: ignore[list-item]


@pytest.mark.skipif(
    find_browser() is None, reason="no Chromium-family browser found (chromium, google-chrome)"
)
def test_page_draws_in_headless_chromium(tmp_path) -> None:
    g = hand_graph()
    s = m.schedule(g)
    page = write_gantt(tmp_path / "g.html", [GanttTrack("one", s, g), GanttTrack("two", s, g)])
    dom = load_page(page)
    assert dom.console == [], dom.console
    # the script ran to the end: 7 bars per track drawn, the legend filled in
    assert 'data-drawn="14"' in dom.dom
    assert "load (6)" in dom.dom  # a, e, h in each of the two tracks
    shot = load_page(page, screenshot=tmp_path / "g.png")
    assert shot.console == []
    assert shot.screenshot is not None
    assert shot.screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.skipif(
    find_browser() is None, reason="no Chromium-family browser found (chromium, google-chrome)"
)
def test_hover_text_in_the_browser(tmp_path) -> None:
    g = hand_graph()
    page = write_gantt(tmp_path / "g.html", [GanttTrack("one", m.schedule(g), g)])
    # the page's own link to an event shows the same text a hover would
    dom = load_page(page, fragment="event=c")
    elsewhere = write_gantt(
        tmp_path / "e.html", [GanttTrack("cp", no_waits(m.schedule(g), {"c": 1.0, "f": 1.0}), g)]
    )
    other = load_page(elsewhere, fragment="event=c")
    assert other.console == []
    assert "ready 1.500 µs after b" in other.dom
    assert "started 1.500 µs after ready (cause not recorded by this schedule)" in other.dom
    assert dom.console == [], dom.console
    assert 'data-shown="c"' in dom.dom
    # c: ready 1.5 after b (end 1.0 + λ 0.5); c0.AIC held by a until 2.0 -> 0.5 µs resource wait
    for line in (
        "stage: mm   on c0.AIC",
        "start 2.000  end 3.000  duration 1.000 µs",
        "ready 1.500 µs after b",
        "waited 0.500 µs for resource c0.AIC",
        "start decided by: resource",
    ):
        assert line in dom.dom

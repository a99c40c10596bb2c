"""Self-contained HTML views of schedules (no network at view time)."""

from moeopt.viz.gantt import (
    GANTT_SCRIPT,
    GanttTrack,
    gantt_data,
    gantt_fragment,
    gantt_page,
    page_head,
    page_tail,
    tracks_from,
    write_gantt,
)

__all__ = [
    "GANTT_SCRIPT",
    "GanttTrack",
    "gantt_data",
    "gantt_fragment",
    "gantt_page",
    "page_head",
    "page_tail",
    "tracks_from",
    "write_gantt",
]

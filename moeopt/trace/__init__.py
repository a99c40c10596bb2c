"""Chrome-trace export and reading, and the structural comparison of a prediction with a trace.

Generic: works on any :class:`~moeopt.core.schedule.Schedule` and event labels; the label key
(``"stage"`` for MegaMoE graphs) is the caller's choice.
"""

from moeopt.trace.chrome import (
    Trace,
    TraceEvent,
    TraceTruncatedWarning,
    chrome_trace,
    dumps_chrome_trace,
    parse_chrome_trace,
    read_chrome_trace,
    trace_from_schedule,
    write_chrome_trace,
)
from moeopt.trace.compare import (
    StageComparison,
    TraceComparison,
    compare_schedule_to_trace,
    compare_traces,
)

__all__ = [
    "StageComparison",
    "Trace",
    "TraceComparison",
    "TraceEvent",
    "TraceTruncatedWarning",
    "chrome_trace",
    "compare_schedule_to_trace",
    "compare_traces",
    "dumps_chrome_trace",
    "parse_chrome_trace",
    "read_chrome_trace",
    "trace_from_schedule",
    "write_chrome_trace",
]

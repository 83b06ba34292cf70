"""Where the time went: how long each model call and each tool call of a turn took.

Every model call adds a ``CallUsage`` to ``agent.usage.calls``; besides its tokens it holds
when it was sent (``started``, seconds since the epoch, ``time.time()``), its time to first
token (``ttft``), its duration (``seconds``) and its ``tokens_per_second``. Every tool call
that ran (its function was called: it returned or raised) adds a ``ToolTiming`` to
``agent.usage.tools``. Durations are measured with ``time.perf_counter()``; only the starts
are wall-clock times, so a timeline can be drawn from them after a session is loaded again.

``Timeline.of(usage)`` lays the calls of a ``Usage`` (a turn's: ``agent.usage.since(before)``)
out as a waterfall, the data the panel's "timeline" draws::

    >>> timeline = Timeline.of(agent.usage.since(before))      # doctest: +SKIP
    >>> timeline.model_seconds, timeline.tool_seconds           # doctest: +SKIP
    (1.42, 0.61)
    >>> timeline.bars[0].kind, timeline.bars[0].offset          # doctest: +SKIP
    ('model', 0.0)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fragola_nb.core.usage import CallUsage, Usage

__all__ = ["TIMING_FIELDS", "Bar", "Timeline", "ToolTiming", "tool_read_back", "valid_time"]

TIMING_FIELDS = ("started", "ttft", "seconds")
"""A model call's timing fields, each a number or None (older files have none)."""


@dataclass(frozen=True)
class ToolTiming:
    """One tool call that ran: the tool's ``name``, the ``call_id`` the model gave it, when
    its function was called (``started``, seconds since the epoch) and how long it took
    (``seconds``, until it returned or raised). A call that did not run (refused arguments,
    rejected, answered by hand, a dynamic tool answered from outside) has none: no time was
    spent in it."""

    name: str
    call_id: str
    started: float
    seconds: float


def valid_time(value: Any) -> bool:
    """Whether ``value`` may be a timing field: None, or a finite number >= 0 (not a bool).
    A file can be edited by hand; a negative or infinite time would draw nonsense."""
    if value is None:
        return True
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and value >= 0)


def tool_read_back(fields: Any) -> ToolTiming:
    """One ``ToolTiming`` as a file holds it (``dataclasses.asdict``), checked; a
    ``ValueError`` saying what is wrong otherwise."""
    names = ("name", "call_id", "started", "seconds")
    if not isinstance(fields, Mapping) or set(fields) != set(names):
        raise ValueError(f"a tool call's timing must have the fields {', '.join(names)}")
    if not isinstance(fields["name"], str) or not isinstance(fields["call_id"], str):
        raise ValueError("a tool call's timing 'name' and 'call_id' must be strings")
    if not all(fields[n] is not None and valid_time(fields[n]) for n in ("started", "seconds")):
        raise ValueError("a tool call's timing 'started' and 'seconds' must be numbers >= 0")
    return ToolTiming(fields["name"], fields["call_id"], float(fields["started"]),
                      float(fields["seconds"]))


@dataclass(frozen=True)
class Bar:
    """One bar of the waterfall: ``kind`` ("model" or "tool"), ``label`` (the tool's name,
    or the model's), ``offset`` (seconds from the turn's first call), ``seconds``, and for a
    model call its ``ttft`` and ``tokens_per_second`` (None when unknown); ``call_id`` ties a
    tool bar to its call in the conversation."""

    kind: str
    label: str
    offset: float
    seconds: float
    ttft: float | None = None
    tokens_per_second: float | None = None
    call_id: str = ""


@dataclass(frozen=True)
class Timeline:
    """The timed calls of a ``Usage`` in the order they started, and the totals: the time
    spent waiting on the model and running tools, and the output rate over all model calls
    whose server reported usage (``Usage.tokens_per_second``). Calls without timing (made
    before fragola_nb recorded it, in an older session file) are left out of the bars."""

    bars: tuple[Bar, ...]
    model_seconds: float
    tool_seconds: float
    tokens_per_second: float | None

    @classmethod
    def of(cls, usage: Usage) -> Timeline:
        timed: list[tuple[float, Bar]] = []
        for call in usage.calls:
            if call.started is not None and call.seconds is not None:
                timed.append((call.started, Bar("model", call.model, 0.0, call.seconds,
                                                call.ttft, call.tokens_per_second)))
        for tool in usage.tools:
            timed.append((tool.started, Bar("tool", tool.name, 0.0, tool.seconds,
                                            call_id=tool.call_id)))
        timed.sort(key=lambda pair: pair[0])
        first = timed[0][0] if timed else 0.0
        bars = tuple(Bar(bar.kind, bar.label, start - first, bar.seconds, bar.ttft,
                         bar.tokens_per_second, bar.call_id) for start, bar in timed)
        return cls(bars, usage.model_seconds, usage.tool_seconds, usage.tokens_per_second)

    @property
    def span(self) -> float:
        """Seconds from the first call's start to the last one's end."""
        return max((bar.offset + bar.seconds for bar in self.bars), default=0.0)

    def summary(self) -> str:
        """``model 1.42 s · tools 0.61 s · 38 tokens/s`` (each part only when known); empty
        when nothing was timed."""
        if not self.bars:
            return ""
        parts = [f"model {duration(self.model_seconds)}", f"tools {duration(self.tool_seconds)}"]
        if self.tokens_per_second is not None:
            parts.append(f"{self.tokens_per_second:,.0f} tokens/s")
        return " · ".join(parts)


def duration(seconds: float) -> str:
    """``850 ms`` below a second, ``1.42 s`` from there (as the panel writes a duration)."""
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


def call_timing(call: CallUsage) -> dict[str, float]:
    """The timing fields of ``call`` that are known, for a file."""
    return {name: getattr(call, name) for name in TIMING_FIELDS
            if getattr(call, name) is not None}

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
    >>> timeline.parts()                                        # doctest: +SKIP
    Parts(model=1.42, tools=0.61, between=0.07)

``parts()`` splits the turn (``span``: from its first call's start to its last call's end) by
the wall clock: the time a model call ran, the time only tools ran, and the time between
calls, when neither ran (fragola_nb's own work, the listeners of its events, a panel's
included, and any wait for a person's approval); the three sum to ``span``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from fragola_nb.core.usage import CallUsage, Usage

__all__ = ["BETWEEN", "TIMING_FIELDS", "Bar", "Parts", "Timed", "Timeline", "ToolTiming",
           "lay_out", "percents", "timed", "tool_read_back", "valid_time"]

TIMING_FIELDS = ("started", "ttft", "seconds")
"""A model call's timing fields, each a number or None (older files have none)."""

BETWEEN = ("fragola_nb itself and your listeners (this panel's included), and any wait for "
           "an approval: no model or tool call was running")
"""What the time between calls is, as the waterfall's legend says it."""


@dataclass(frozen=True, slots=True)  # made once per tool call
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
    tool bar to its call in the conversation. ``gap``: the seconds before it when no call ran
    (from the end of the calls that started before it; 0 when one still ran)."""

    kind: str
    label: str
    offset: float
    seconds: float
    ttft: float | None = None
    tokens_per_second: float | None = None
    call_id: str = ""
    gap: float = 0.0


class Parts(NamedTuple):
    """A turn's ``span`` split by the wall clock: seconds a model call ran, seconds only
    tools ran, seconds no call ran; they sum to the span."""

    model: float
    tools: float
    between: float


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
        found = timed(usage.calls, usage.tools)
        bars, _ = lay_out(found, found[0][0] if found else 0.0)
        return cls(tuple(bars), usage.model_seconds, usage.tool_seconds,
                   usage.tokens_per_second)

    @property
    def span(self) -> float:
        """Seconds from the first call's start to the last one's end."""
        return max((bar.offset + bar.seconds for bar in self.bars), default=0.0)

    def parts(self) -> Parts:
        """The span split by the wall clock (``Parts``): a moment counts as the model's when
        a model call ran then, as the tools' when only tools ran, as between calls when none
        did. Tools that ran side by side count once, so ``tools`` can be less than
        ``tool_seconds`` (their durations summed)."""
        model = _covered((bar.offset, bar.offset + bar.seconds)
                         for bar in self.bars if bar.kind == "model")
        between = math.fsum(bar.gap for bar in self.bars)  # the span less what calls covered
        return Parts(model, max(0.0, self.span - between - model), between)

    def summary(self, parts: Parts | None = None) -> str:
        """``turn 2.10 s · model 1.42 s (68%) · tools 610 ms (29%) · between calls 70 ms (3%)
        · 38 tokens/s`` (the rate only when known; percents of the turn, rounded so they
        sum to 100); empty when nothing was timed. ``parts``: ``parts()``, when already
        made."""
        if not self.bars:
            return ""
        parts = self.parts() if parts is None else parts
        shares = percents(parts, self.span)
        texts = [f"turn {duration(self.span)}"]
        for name, seconds, share in zip(("model", "tools", "between calls"), parts, shares,
                                        strict=True):
            texts.append(f"{name} {duration(seconds)} ({share}%)")
        if self.tokens_per_second is not None:
            texts.append(f"{self.tokens_per_second:,.0f} tokens/s")
        return " · ".join(texts)


Timed = tuple[float, str, str, float, float | None, float | None, str]
"""A timed call as ``timed`` gives it: start, kind, label, seconds, ttft, tokens per second,
call id."""


def timed(calls: Sequence[CallUsage], tools: Sequence[ToolTiming]) -> list[Timed]:
    """The timed ones of ``calls`` (model calls) and ``tools``, in the order they started."""
    found: list[Timed] = [
        (call.started, "model", call.model, call.seconds, call.ttft, call.tokens_per_second, "")
        for call in calls if call.started is not None and call.seconds is not None]
    found += [(tool.started, "tool", tool.name, tool.seconds, None, None, tool.call_id)
              for tool in tools]
    found.sort(key=lambda fields: fields[0])
    return found


def lay_out(found: Iterable[Timed], first: float, reached: float = 0.0,
            ) -> tuple[list[Bar], float]:
    """The bars of ``found`` (``timed``'s), their offsets from ``first`` (the turn's first
    start), and where they have all ended (an offset): ``reached``, where the calls laid out
    before them had (a waterfall that grows lays out its new calls only)."""
    bars = []
    for start, kind, label, seconds, ttft, rate, call_id in found:
        offset = start - first
        bars.append(Bar(kind, label, offset, seconds, ttft, rate, call_id,
                        max(0.0, offset - reached)))
        reached = max(reached, offset + seconds)
    return bars, reached


def _covered(intervals: Iterable[tuple[float, float]]) -> float:
    """Seconds covered by the union of ``intervals`` (start, end), given by their starts."""
    total, reached = 0.0, -math.inf
    for start, end in intervals:
        if end > reached:
            total += end - max(start, reached)
            reached = end
    return total


def percents(seconds: Sequence[float], whole: float) -> list[int]:
    """Each of ``seconds`` as a whole percent of ``whole``, rounded by the largest remainders
    so that they sum to 100 (as shown beside each other); zeros when ``whole`` is 0."""
    if whole <= 0:
        return [0] * len(seconds)
    exact = [100 * part / whole for part in seconds]
    shares = [math.floor(share) for share in exact]
    by_remainder = sorted(range(len(exact)), key=lambda i: shares[i] - exact[i])
    for i in by_remainder[:max(0, 100 - sum(shares))]:
        shares[i] += 1
    return shares


def duration(seconds: float) -> str:
    """``850 ms`` below a second, ``1.42 s`` from there (as the panel writes a duration)."""
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


def call_timing(call: CallUsage) -> dict[str, float]:
    """The timing fields of ``call`` that are known, for a file."""
    return {name: getattr(call, name) for name in TIMING_FIELDS
            if getattr(call, name) is not None}

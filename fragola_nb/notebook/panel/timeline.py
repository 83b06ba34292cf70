"""The data a turn panel's "timeline" draws: ``fragola_nb.core.timing.Timeline`` as plain values.

The panel sends it as its ``timeline`` trait; ``panel.js`` draws the waterfall only while the
"timeline" toggle is open (a long panel pays nothing for it), every text with
``textContent``: the turn's length split into model, tools and the time between calls, then
at most 30 bars, in order or slowest first, the rest folded behind one line that opens them,
in a box of bounded height. Names and arguments pass through ``visible`` (invisible controls
written out), as the rest of the panel's text does.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fragola_nb.base.render import visible
from fragola_nb.core.timing import (
    BETWEEN,
    Bar,
    Parts,
    Timeline,
    duration,
    lay_out,
    percents,
    timed,
)

if TYPE_CHECKING:
    from fragola_nb.core.usage import Usage

__all__ = ["ARGS_SHOWN", "PART_NAMES", "Made", "timeline_shown"]

ARGS_SHOWN = 120
"""Characters of a tool call's arguments its bar's tooltip shows."""

PART_NAMES = {"model": "model", "tool": "tools", "between": "between calls"}
"""The parts of a turn, by kind, as the summary and the legend name them."""


@dataclass
class Laid:
    """The bars laid out so far (``lay_out``), of the first ``calls`` model calls and
    ``tools`` tool calls of a usage (the last of each, to tell that a later usage goes on from
    them), where they all ended (``reached``), the first one's start and the last one's."""

    calls: int
    tools: int
    ends: tuple[Any, ...]
    bars: list[Bar]
    first: float
    reached: float
    last: float

    @classmethod
    def of(cls, usage: Usage) -> Laid:
        """Every call of ``usage`` laid out."""
        found = timed(usage.calls, usage.tools)
        first = found[0][0] if found else 0.0
        bars, reached = lay_out(found, first)
        return cls(len(usage.calls), len(usage.tools), (*usage.calls[-1:], *usage.tools[-1:]),
                   bars, first, reached, found[-1][0] if found else -math.inf)

    def grown(self, usage: Usage) -> bool:
        """Lay out the calls ``usage`` added to the ones laid out; False (nothing done) when
        it does not go on from them, or one of its new calls started before the last one laid
        out, or as it did (a tie: ``Timeline.of`` orders it among them)."""
        calls, tools = usage.calls, usage.tools
        if len(calls) < self.calls or len(tools) < self.tools:
            return False
        ends = (*calls[self.calls - 1:self.calls], *tools[self.tools - 1:self.tools])
        if len(ends) != len(self.ends) or any(
                a is not b for a, b in zip(ends, self.ends, strict=True)):
            return False
        found = timed(calls[self.calls:], tools[self.tools:])
        if found and self.bars and found[0][0] <= self.last:
            return False
        if found:
            self.first = self.first if self.bars else found[0][0]
            bars, self.reached = lay_out(found, self.first, self.reached)
            self.bars += bars
            self.last = found[-1][0]
        self.calls, self.tools, self.ends = len(calls), len(tools), (*calls[-1:], *tools[-1:])
        return True


@dataclass
class Made:
    """What the makes of one turn's waterfall made so far, each made once: the bars laid out
    (``laid``), the bars as shown (by place: the bar and its call's arguments, and what it
    shows) and the arguments (by call id, from the messages read so far: a make reads the
    ones added since). A running turn's waterfall is made again as it grows
    (``TimelineFeed``); with these, each make lays out and shows its new calls and reads its
    new messages rather than every call's again (issue 34: a make of a 200-step turn took
    about 2 ms, most of it laying out every call again). ``last``: the waterfall made last,
    and what it was made of (its calls' and messages' counts and the last of each): made
    again only when one was added."""

    laid: Laid | None = None
    bars: list[tuple[Bar, str, dict[str, Any]]] = field(default_factory=list)
    arguments: dict[str, str] = field(default_factory=dict)
    """Each tool call's arguments as shown, by call id, from the messages read so far."""
    read: list[dict[str, Any]] = field(default_factory=list)
    """The messages read so far (the same objects): a make reads the ones after them."""
    last: tuple[tuple[Any, ...], dict[str, Any]] | None = None


def timeline_shown(usage: Usage, messages: Sequence[dict[str, Any]] = (),
                   made: Made | None = None) -> dict[str, Any]:
    """``bars`` (kind, label, ``n``: its place in time from 1, start and seconds from the
    first call, ``gap``: the seconds before it when no call ran, ``text`` and ``gap_text``:
    both as written, ``title``: the tooltip), ``span`` (the turn: seconds from its first
    call's start to its last call's end), ``turn`` (the span as written), ``parts`` (model,
    tools and between calls: kind, label, seconds, share of the turn in percent, text,
    ``what`` it is, title; they sum to the span) and ``summary`` (the line that holds them:
    "turn 2.10 s · model 1.42 s (68%) · ..."); ``{}`` when nothing was timed.
    ``messages``: the turn's, for the arguments of each tool call's tooltip; ``made``: what
    the makes before made of them (the same values, made once)."""
    made = Made() if made is None else made
    of = (len(usage.calls), len(usage.tools), len(messages), *usage.calls[-1:],
          *usage.tools[-1:], *messages[-1:])
    if made.last is not None and len(of) == len(made.last[0]) and all(
            a is b or a == b for a, b in zip(of, made.last[0], strict=True)):
        return made.last[1]  # nothing added since: the same waterfall
    made.last = (of, _shown(usage, messages, made))
    return made.last[1]


def _shown(usage: Usage, messages: Sequence[dict[str, Any]], made: Made) -> dict[str, Any]:
    timeline = _timeline(usage, made)
    if not timeline.bars:
        return {}
    arguments = _arguments(messages, made)
    bars: list[dict[str, Any]] = []
    shown = made.bars
    for n, bar in enumerate(timeline.bars):
        called = arguments.get(bar.call_id, "") if bar.kind == "tool" else ""
        if n < len(shown) and shown[n][0] is bar and shown[n][1] == called:
            bars.append(shown[n][2])
            continue
        del shown[n:]  # laid out again, or its arguments read since: shown again from here
        shown.append((bar, called, _bar(bar, n + 1, called)))
        bars.append(shown[n][2])
    parts = timeline.parts()
    return {"bars": bars, "span": timeline.span, "turn": duration(timeline.span),
            "parts": _parts(timeline, parts), "summary": timeline.summary(parts)}


def _timeline(usage: Usage, made: Made) -> Timeline:
    """``Timeline.of(usage)``, laying out only the calls added since the last make when they
    started after the ones laid out then (as a running turn's do); all of them otherwise."""
    if made.laid is None or not made.laid.grown(usage):
        made.laid = Laid.of(usage)
    return Timeline(tuple(made.laid.bars), usage.model_seconds, usage.tool_seconds,
                    usage.tokens_per_second)


def _bar(bar: Bar, n: int, called: str) -> dict[str, Any]:
    """One bar as the view draws it: its place ``n`` in time, and for a tool call the
    arguments it was ``called`` with."""
    text = duration(bar.seconds)
    if bar.kind == "model":
        label = "model"
        facts = [f"{visible(bar.label)}: {text}"]
        if bar.ttft is not None:
            facts.append(f"first token after {duration(bar.ttft)}")
        if bar.tokens_per_second is not None:
            facts.append(f"{bar.tokens_per_second:,.0f} tokens/s")
    else:
        label = visible(bar.label)
        facts = [f"{label}({called}): {text}"]
    facts.append(f"from +{duration(bar.offset)}")
    gap_text = duration(bar.gap) if bar.gap >= 0.0005 else ""
    if gap_text:
        facts.append(f"{gap_text} between calls before it")
    return {"kind": bar.kind, "label": label, "n": n,
            "start": bar.offset, "seconds": bar.seconds, "gap": bar.gap,
            "ttft": bar.ttft if bar.kind == "model" else None,
            "text": text, "gap_text": gap_text, "title": " · ".join(facts)}


def _parts(timeline: Timeline, parts: Parts) -> list[dict[str, Any]]:
    """The turn's model, tools and between-calls parts, each with its share and tooltip."""
    titles = {"model": "a model call was running",
              "tool": "only tools were running" + (
                  f" ({duration(timeline.tool_seconds)} of tool time summed: some ran side "
                  "by side)" if timeline.tool_seconds - parts.tools >= 0.0005 else ""),
              "between": BETWEEN}
    found = []
    for kind, seconds, share in zip(("model", "tool", "between"), parts,
                                    percents(parts, timeline.span), strict=True):
        text = f"{duration(seconds)} ({share}%)"
        found.append({"kind": kind, "label": PART_NAMES[kind], "seconds": seconds,
                      "share": share, "text": text, "what": titles[kind],
                      "title": f"{PART_NAMES[kind]}: {text} of the turn: {titles[kind]}"})
    return found


def _arguments(messages: Sequence[dict[str, Any]], made: Made) -> dict[str, str]:
    """Each tool call's arguments, by call id, shortened to ``ARGS_SHOWN`` characters: those
    ``made`` has, and those of the messages after the ones it read (all of them again when
    ``messages`` does not go on from those)."""
    read = made.read
    if len(messages) < len(read) or (read and messages[len(read) - 1] is not read[-1]):
        read.clear()
        made.arguments.clear()
    for message in messages[len(read):]:
        read.append(message)
        if message.get("role") != "assistant":
            continue
        for call in message.get("tool_calls") or ():
            try:
                call_id, raw = str(call["id"]), visible(str(call["function"]["arguments"]))
            except (KeyError, TypeError):
                continue
            # redacted before it is cut
            made.arguments[call_id] = raw if len(raw) <= ARGS_SHOWN else raw[:ARGS_SHOWN - 1] + "…"
    return made.arguments

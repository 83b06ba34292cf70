"""The data a turn panel's "timeline" draws: ``fragola_nb.core.timing.Timeline`` as plain values.

The panel sends it as its ``timeline`` trait; ``panel.js`` draws the waterfall only while the
"timeline" toggle is open (a long panel pays nothing for it), every text with
``textContent``. Names and arguments pass through ``visible`` (invisible controls written
out), as the rest of the panel's text does.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from fragola_nb.base.render import visible
from fragola_nb.core.timing import Timeline, duration

if TYPE_CHECKING:
    from fragola_nb.core.usage import Usage

__all__ = ["ARGS_SHOWN", "timeline_shown"]

ARGS_SHOWN = 120
"""Characters of a tool call's arguments its bar's tooltip shows."""


def timeline_shown(usage: Usage, messages: Iterable[dict[str, Any]] = ()) -> dict[str, Any]:
    """``bars`` (kind, label, start and seconds from the first call, ``text``: the duration
    as written, ``title``: the tooltip), ``span`` (seconds the bars cover) and ``summary``
    (the footer's totals: "model 1.42 s · tools 0.61 s · 38 tokens/s"); ``{}`` when nothing
    was timed. ``messages``: the turn's, for the arguments of each tool call's tooltip."""
    timeline = Timeline.of(usage)
    if not timeline.bars:
        return {}
    arguments = _arguments(messages)
    bars = []
    for bar in timeline.bars:
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
            called = arguments.get(bar.call_id, "")
            facts = [f"{label}({called}): {text}"]
        facts.append(f"from +{duration(bar.offset)}")
        bars.append({"kind": bar.kind, "label": label, "start": bar.offset,
                     "seconds": bar.seconds,
                     "ttft": bar.ttft if bar.kind == "model" else None,
                     "text": text, "title": " · ".join(facts)})
    return {"bars": bars, "span": timeline.span, "summary": timeline.summary()}


def _arguments(messages: Iterable[dict[str, Any]]) -> dict[str, str]:
    """Each tool call's arguments, by call id, shortened to ``ARGS_SHOWN`` characters."""
    found: dict[str, str] = {}
    for message in messages:
        if message.get("role") != "assistant":
            continue
        for call in message.get("tool_calls") or ():
            try:
                raw = visible(str(call["function"]["arguments"]))  # redacted before it is cut
                found[str(call["id"])] = (raw if len(raw) <= ARGS_SHOWN
                                          else raw[:ARGS_SHOWN - 1] + "…")
            except (KeyError, TypeError):
                continue
    return found

"""What the server reported beside the answer: its token usage, read so that it is never
wrong. A server that sends none, or sends counts that are not counts, gives ``usage`` None
(unknown), never a made-up zero."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

__all__ = ["CACHE_HEADER", "Exchange", "ModelReply", "usage_of"]

CACHE_HEADER = "x-fragola-cache"
"""Set to ``hit`` on a response that ``Fragola.cached`` answered from its file."""


@dataclass(frozen=True)
class ModelReply:
    """One answer of the model: the assistant message that is stored, and the usage the
    server reported for the request (``usage_of``), None when it reported none."""

    message: dict[str, Any]
    usage: dict[str, int] | None


@dataclass
class Exchange:
    """What is known of one request while it runs, kept when it fails: whether the server
    began to answer (200 and headers: from then on it spends tokens), and the usage it has
    reported so far. A stream cut or stopped half-way, or an answer that cannot be stored, is
    still a call that cost something (``runloop.call_model`` counts it)."""

    answered: bool = False
    usage: dict[str, int] | None = None
    model: str | None = None
    """The model the server says answered (a body's or a chunk's ``model``), for tracing."""
    id: str | None = None
    """The completion's ``id``, when the server gave one."""
    first_at: float | None = None
    """``time.perf_counter()`` when the first body or chunk arrived (the time to first token
    of ``fragola_nb.core.timing``)."""
    pieces: int = 0
    """How many bodies or chunks arrived: 1 for an answer that came in one piece."""
    cached: bool = False
    """Whether ``Fragola.cached``'s file answered (its transport says so in the response's
    ``CACHE_HEADER``): nothing was paid for this call."""

    def saw(self, data: Any) -> None:
        """Keep the usage of a body or a chunk, when it reads as counts, and its model and
        id, when they are strings; note when the first one came."""
        self.pieces += 1
        if self.first_at is None:
            self.first_at = time.perf_counter()
        if isinstance(data, dict):
            self.usage = usage_of(data.get("usage")) or self.usage
            model, id_ = data.get("model"), data.get("id")
            self.model = model if isinstance(model, str) and model else self.model
            self.id = id_ if isinstance(id_, str) and id_ else self.id


def usage_of(usage: Any) -> dict[str, int] | None:
    """``prompt_tokens``, ``completion_tokens``, ``total_tokens`` and ``cached_tokens`` (of
    the prompt, 0 when not said) of a reported ``usage`` object; None when it is missing or
    its counts are not whole numbers >= 0 (a broken server: unknown rather than wrong)."""
    if not isinstance(usage, dict):
        return None
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    total, details = usage.get("total_tokens"), usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    if (type(prompt) is int and type(completion) is int and type(total) is int  # JSON's
            and (cached is None or type(cached) is int)
            and prompt >= 0 and completion >= 0 and total >= 0):
        return {"prompt_tokens": prompt, "completion_tokens": completion,
                "total_tokens": total,
                "cached_tokens": cached if cached is not None and cached >= 0 else 0}
    prompt, completion = _count(prompt), _count(completion)
    if prompt is None or completion is None:
        return None
    total_count = prompt + completion if total is None else _count(total)
    if total_count is None:
        return None
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": total_count, "cached_tokens": _count(cached) or 0}


def _count(value: Any) -> int | None:
    """``value`` when it is a whole number >= 0 (not a bool), else None."""
    if type(value) is int:  # what JSON gives: told at once
        return value if value >= 0 else None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None

"""Rate limits: how fast a ``Fragola``'s requests go out, and how a 429 is waited out.

>>> fragola = Fragola(rate_limit=RateLimit(rpm=60, tpm=40_000))     # doctest: +SKIP

One ``Limiter`` per ``ModelClient`` (so per ``Fragola``) is shared by every agent, fork,
compare and batch of it, on any thread's event loop. Each request waits for its turn:

- ``rpm``: request starts are spaced ``60 / rpm`` seconds apart (never a burst a server
  would refuse, and never more than ``rpm`` in any minute);
- ``tpm``: a bucket of ``tpm`` tokens refilled at ``tpm / 60`` a second; a request takes its
  estimated tokens (its text's characters / 4, plus ``max_tokens`` when set) before it is sent,
  and the difference is given back or taken once its usage is reported; a request not sent
  (its check before sending refused it, or its transport raised ``NotSent``) gives it all back.

Turns are given in the order requests ask (a reservation), so a request never starves.
A retry is a request too: it waits for its turn like the first try.

429 and the other failures ``openai`` retries (408, 409, 5xx, a lost connection, a timeout)
are retried here instead, ``max_retries`` times (the client's), so that a 429 can be heard:
``retry_delay`` honours ``retry-after-ms`` and ``Retry-After`` (seconds or an HTTP date) up
to a minute, else backs off exponentially (0.5 s doubling to 8 s, with jitter), as ``openai``
does: a longer wait, a date in the past or one no clock can hold (year 99999), or a value
that is not a number is backed off the same way, never a failure. Only when the retries are
spent does the request fail.
"""

from __future__ import annotations

import email.utils
import json
import math
import random
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fragola_nb.base.errors import BadUsage

__all__ = ["Limiter", "NotSent", "RateLimit", "check_rate_limit", "estimate_tokens",
           "retry_delay"]

MAX_RETRY_AFTER = 60.0
"""The longest ``Retry-After`` honoured (as ``openai`` does): a longer one is backed off."""


@dataclass(frozen=True)
class RateLimit:
    """At most ``rpm`` requests and ``tpm`` tokens a minute, for every request a ``Fragola``
    sends (``Fragola(rate_limit=RateLimit(rpm=60))``). Either or both, positive numbers.

    >>> RateLimit(rpm=500, tpm=200_000).split(4)     # each of 4 Ray workers
    RateLimit(rpm=125.0, tpm=50000.0)
    """

    rpm: float | None = None
    tpm: float | None = None

    def __post_init__(self) -> None:
        for name in ("rpm", "tpm"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool)
                                      or not isinstance(value, (int, float))
                                      or not math.isfinite(value) or value <= 0):
                raise BadUsage(f"RateLimit({name}=...) must be a number > 0, got {value!r}")
        if self.rpm is None and self.tpm is None:
            raise BadUsage("RateLimit() needs rpm= or tpm= (or pass rate_limit=None)")

    def split(self, parts: int) -> RateLimit:
        """The share of one of ``parts`` clients sending at once (Ray workers)."""
        parts = max(1, parts)
        return RateLimit(None if self.rpm is None else self.rpm / parts,
                         None if self.tpm is None else self.tpm / parts)


class NotSent(BaseException):  # not an error: what raises it says why
    """Raised by a transport for a request it did not send (``Fragola.cached``'s miss once a
    budget is spent): the request's turn is given back, its tokens returned to the bucket."""


def check_rate_limit(value: Any) -> RateLimit | None:
    if value is None or isinstance(value, RateLimit):
        return value
    raise BadUsage(f"rate_limit must be a RateLimit(rpm=, tpm=) or None, got "
                   f"{type(value).__name__}")


def estimate_tokens(body: Mapping[str, Any]) -> int:
    """A request's tokens before it is sent: its messages and tools at four characters a
    token, plus the completion it may ask for (``max_tokens``/``max_completion_tokens``)."""
    text = json.dumps([body.get("messages"), body.get("tools")], default=str)
    most = body.get("max_completion_tokens") or body.get("max_tokens") or 0
    return len(text) // 4 + (most if isinstance(most, int) else 0)


class Limiter:
    """The pacing of one ``RateLimit``, shared by threads and event loops."""

    def __init__(self, limit: RateLimit) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._next_start = 0.0  # monotonic time the next request may start
        self._level = float(limit.tpm or 0)  # tokens in the bucket at ``_stamp``
        self._stamp = time.monotonic()

    def reserve(self, tokens: int) -> float:
        """Take a turn for a request of about ``tokens`` tokens; return the seconds to wait
        before sending it."""
        now = time.monotonic()
        with self._lock:
            at = max(now, self._next_start)
            tpm = self.limit.tpm
            if tpm is not None:
                rate = tpm / 60.0
                need = min(float(tokens), tpm)  # a request bigger than a minute still goes
                at = max(at, self._stamp)
                level = min(tpm, self._level + rate * (at - self._stamp))
                if level < need:
                    at += (need - level) / rate
                    level = need
                self._level, self._stamp = level - tokens, at
            if self.limit.rpm is not None:
                self._next_start = at + 60.0 / self.limit.rpm
        return max(0.0, at - now)

    def settle(self, estimated: int, reported: int | None) -> None:
        """A request's usage came back: give back (or take) the difference."""
        tpm = self.limit.tpm
        if tpm is None or reported is None:
            return
        with self._lock:
            self._level = min(float(tpm), self._level + estimated - reported)


def retry_delay(status: int | None, headers: Mapping[str, str] | None, attempt: int
                ) -> float | None:
    """Seconds to wait before retry ``attempt`` (0 first) of a request that failed with
    HTTP ``status`` (None: no answer, a lost connection or a timeout), or None when such a
    failure is not retried. The server's ``x-should-retry`` wins, as with ``openai``."""
    headers = {k.lower(): v for k, v in (headers or {}).items()}
    should = headers.get("x-should-retry")
    if should == "false":
        return None
    if status is not None and should != "true" and status not in (408, 409, 429) \
            and status < 500:
        return None
    after = _retry_after(headers)
    if after is not None and 0 <= after <= MAX_RETRY_AFTER:
        return after
    return min(0.5 * 2.0 ** attempt, 8.0) * (1 - 0.25 * random.random())


def _retry_after(headers: Mapping[str, str]) -> float | None:
    try:
        return float(headers["retry-after-ms"]) / 1000
    except (KeyError, ValueError):
        pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        parsed = email.utils.parsedate_tz(value)
        if parsed is None:
            return None
        try:
            return email.utils.mktime_tz(parsed) - time.time()
        except (ValueError, OverflowError):  # a date no clock can hold (year 99999)
            return None

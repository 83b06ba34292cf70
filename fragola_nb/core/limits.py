"""Budgets: a cap on the money, tokens or time a piece of work may spend on model calls.

>>> with spending(Budget(tokens=1_000), fragola=fragola, models=[agent.model]) as meter:
...     state = await agent.user_message("Go on.")                   # doctest: +SKIP
>>> meter.spent                                                      # doctest: +SKIP
'budget spent: 1,204 of 1,000 tokens'

A ``Meter`` counts one budget. The meters in force are those pushed by ``spending`` in this
context (a ``ContextVar``, so asyncio tasks made inside it, which copy the context, are
metered too; the turns of ``user_message``, ``compare`` and ``batch`` are such tasks) and the
one of the ``Fragola`` (``Fragola(budget=...)``, for its lifetime). The run loop asks
``spent_reason`` before each model call and sends nothing once a meter is spent: the turn
ends with outcome ``"budget"``. It asks again (``check_send``) just before each try of the
request goes out, after every wait (a ``RateLimit``'s turn, a retry's backoff or
``Retry-After``): a budget spent by other calls meanwhile sends nothing either. A call
already in flight finishes, and ``count`` adds it to every meter in force, so a budget can
be passed by at most the calls that were in flight.

A ``usd`` budget holds only if every call can be priced: ``spending`` refuses a model
without a known price (``Fragola(prices=...)`` or genai-prices) with a ``BadUsage`` before
anything is sent, and ``check_send`` refuses the model the request names when it goes out
(one a listener switched to, ``before_model_invocation``), nothing sent.
A call whose server reported no usage cannot be counted in tokens or money; it still counts
in time.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from fragola_nb.base.errors import BadUsage
from fragola_nb.core.usage import ModelPrice, Usage, price_known

if TYPE_CHECKING:
    from fragola_nb.core.fragola import Fragola

__all__ = ["Budget", "BudgetSpent", "Meter", "check_budget", "check_send", "count", "priced",
           "spending", "spent_reason"]


@dataclass(frozen=True)
class Budget:
    """How much a piece of work may spend on model calls: ``usd`` (dollars, priced as
    ``agent.usage.cost`` is), ``tokens`` (reported total tokens) and ``seconds`` (wall-clock
    time since it began). Any of them, at least one; the first one spent ends the work.

    >>> await agent.user_message("Summarize.", budget=Budget(tokens=2_000))  # doctest: +SKIP
    >>> fragola = Fragola(budget=Budget(usd=0.50))     # everything it makes   # doctest: +SKIP
    """

    usd: float | None = None
    tokens: int | None = None
    seconds: float | None = None

    def __post_init__(self) -> None:
        for name in ("usd", "tokens", "seconds"):
            value = getattr(self, name)
            if value is None:
                continue
            whole = name == "tokens"
            if (isinstance(value, bool) or not isinstance(value, (int, float))
                    or (whole and not isinstance(value, int)) or not math.isfinite(value)
                    or value < 0):
                kind = "a whole number" if whole else "a number"
                raise BadUsage(f"Budget({name}=...) must be {kind} >= 0, got {value!r}")
        if self.usd is None and self.tokens is None and self.seconds is None:
            raise BadUsage("Budget() needs usd=, tokens= or seconds= (or pass budget=None)")


class Meter:
    """What has been spent against one ``Budget`` since the meter began."""

    def __init__(self, budget: Budget | None, prices: Mapping[str, ModelPrice] | None = None
                 ) -> None:
        self.budget = budget
        self._prices = dict(prices or {})
        self._began = time.monotonic()
        self._lock = threading.Lock()  # a Fragola's meter is shared by threads' loops
        self.tokens = 0
        self.usd = Decimal(0)

    @property
    def seconds(self) -> float:
        return time.monotonic() - self._began

    def add(self, usage: Usage) -> None:
        """Count the calls of ``usage`` (those that reported usage) against the budget; a
        call ``Fragola.cached``'s file answered spent nothing, neither tokens nor money."""
        with self._lock:
            for call in usage.calls:
                if not call.reported or call.cached:
                    continue
                self.tokens += call.total_tokens
                # An offline call (the scripted model, a replay) counts at its price: a
                # usd budget can be tried out offline, though nothing is paid.
                cost = Usage((replace(call, offline=False),), self._prices).cost
                if cost is not None:
                    self.usd += Decimal(str(cost))

    @property
    def spent(self) -> str | None:
        """None while money, tokens and time remain; else one line saying which ran out."""
        budget = self.budget
        if budget is None:
            return None
        if budget.tokens is not None and self.tokens >= budget.tokens:
            return f"budget spent: {self.tokens:,} of {budget.tokens:,} tokens"
        if budget.usd is not None and self.usd >= Decimal(str(budget.usd)):
            return f"budget spent: ${float(self.usd):.4f} of ${budget.usd:.4f}"
        if budget.seconds is not None and self.seconds >= budget.seconds:
            return f"budget spent: {self.seconds:.1f} of {budget.seconds:g} seconds"
        return None

    def __repr__(self) -> str:
        return f"Meter({self.budget!r}, tokens={self.tokens}, spent={self.spent!r})"


_ACTIVE: contextvars.ContextVar[tuple[Meter, ...]] = contextvars.ContextVar(
    "fragola_nb_meters", default=())


def check_budget(budget: Any, what: str = "budget") -> Budget | None:
    """``budget`` when it is a ``Budget`` or None, else a ``BadUsage``."""
    if budget is None or isinstance(budget, Budget):
        return budget
    raise BadUsage(f"{what} must be a Budget(usd=, tokens=, seconds=) or None, "
                   f"got {type(budget).__name__}")


def in_force(fragola: Fragola) -> tuple[Meter, ...]:
    """The meters a call of ``fragola`` is checked against: this context's, and its own."""
    own = fragola.meter
    return (*_ACTIVE.get(), own) if own is not None else _ACTIVE.get()


def priced(prices: Mapping[str, ModelPrice], models: Iterable[str], why: str) -> None:
    """A ``BadUsage`` naming the first of ``models`` without a known price."""
    for model in models:
        if not price_known(model, prices):
            raise BadUsage(f"{why}, but model {model!r} has no known price: give it with "
                           f"Fragola(prices={{{model!r}: {{'input': ..., 'output': ...}}}}) "
                           "or use a tokens= budget")


@contextlib.contextmanager
def spending(budget: Budget | None, *, fragola: Fragola, models: Iterable[str]
             ) -> Iterator[Meter]:
    """Meter every model call made in this context (and the tasks made inside it) against
    ``budget``; ``budget=None`` meters nothing but still checks, for a ``usd`` budget in
    force (the Fragola's, an outer one), that ``models`` all have a known price.

    >>> with spending(Budget(usd=0.10), fragola=fragola, models=["gpt-4o-mini"]) as meter:
    ...     ...                                                      # doctest: +SKIP
    """
    budget = check_budget(budget)
    models = list(models)
    meter = Meter(budget, fragola.prices)
    for each in (*in_force(fragola), meter):
        if each.budget is not None and each.budget.usd is not None:
            priced(fragola.prices, models, "a usd budget is set")
    if budget is None:
        yield meter
        return
    token = _ACTIVE.set((*_ACTIVE.get(), meter))
    try:
        yield meter
    finally:
        _ACTIVE.reset(token)


def spent_reason(fragola: Fragola, model: str) -> str | None:
    """Before a call to ``model``: the reason of the first meter in force that is spent, or
    None. A ``BadUsage`` when a usd budget is in force and ``model`` has no known price."""
    meters = in_force(fragola)
    if not meters:  # the usual case: nothing metered
        return None
    if any(m.budget is not None and m.budget.usd is not None for m in meters):
        priced(fragola.prices, [model], "a usd budget is set")
    for meter in meters:
        reason = meter.spent
        if reason is not None:
            return reason
    return None


class BudgetSpent(Exception):  # not an error: the turn's outcome "budget"
    """Raised by ``check_send`` to send nothing: a meter in force was spent (``reason``)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def check_send(fragola: Fragola, model: str) -> None:
    """Just before a request to ``model`` goes out (after its waits): ``BudgetSpent`` when a
    meter in force is spent, ``BadUsage`` when a usd budget is in force and ``model`` has no
    known price."""
    reason = spent_reason(fragola, model)
    if reason is not None:
        raise BudgetSpent(reason)


def count(fragola: Fragola, usage: Usage) -> None:
    """After a call: add its usage to every meter in force."""
    for meter in in_force(fragola):
        meter.add(usage)

"""Token usage and cost of model calls.

Every model call an agent makes adds a ``CallUsage`` (what the server reported for it, or
that it reported nothing) to ``agent.usage``, a ``Usage``: the sums over those calls.

>>> agent.usage.total_tokens, agent.usage.requests          # doctest: +SKIP
(1234, 3)
>>> agent.usage.cost                                        # doctest: +SKIP
0.000415
>>> tree_usage(agent)          # the agent and all its forks   # doctest: +SKIP

A fork starts at zero: it counts its own calls, not its parent's. Counts are never guessed:
a call whose server sent no usage adds to ``requests`` and ``unreported``, not to the tokens,
and makes ``cost`` None. ``cost`` (USD) comes from the prices given to ``Fragola(prices=...)``
for a model, else from the ``genai-prices`` package (a dependency of fragola_nb, so a plain
install prices its calls), imported only when a cost is asked for; a model neither knows is None.
Each call is priced on its own (some models cost more per token above a prompt length), then
summed.

Each call also says where the time went (``fragola_nb.core.timing``): when it was sent, its time to
first token, its duration and its output rate; ``usage.tools`` holds the tool calls that ran,
with their durations, so ``agent.usage.since(before)`` is a turn's timeline too.
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from fragola_nb.base.errors import BadUsage
from fragola_nb.core.timing import TIMING_FIELDS, ToolTiming, valid_time

if TYPE_CHECKING:
    from fragola_nb.core.agent import Agent

__all__ = ["MAX_COUNT", "CallUsage", "ModelPrice", "Usage", "call_read_back", "check_prices",
           "price_known", "tree_usage"]

MILLION = Decimal(1_000_000)
COUNTS = ("prompt_tokens", "completion_tokens", "total_tokens", "cached_tokens")
"""The counts a call reports (``cached_tokens``: the part of the prompt read from cache)."""
MAX_COUNT = 2**53 - 1
"""The largest count a file may hold: the largest integer every JSON reader keeps exactly."""


@dataclass(frozen=True)
class ModelPrice:
    """A model's price in USD per million tokens. Cached prompt tokens cost
    ``cached_input`` when given, else ``input`` (no discount is assumed)."""

    input: float
    output: float
    cached_input: float | None = None

    def of(self, call: CallUsage) -> Decimal:
        cached = min(call.cached_tokens, call.prompt_tokens)
        cached_price = self.input if self.cached_input is None else self.cached_input
        return (Decimal(call.prompt_tokens - cached) * Decimal(str(self.input))
                + Decimal(cached) * Decimal(str(cached_price))
                + Decimal(call.completion_tokens) * Decimal(str(self.output))) / MILLION


@dataclass(frozen=True, slots=True)  # made once per call: slots make it quicker to build
class CallUsage:
    """One model call: the model asked for, and what the server reported (``reported`` is
    False when it sent no usage; the counts are then 0, meaning unknown).

    Its timing (None when unknown: a call loaded from a file older than these fields):
    ``started``, when the request was sent, in seconds since the epoch (``time.time()``);
    ``ttft``, seconds from then to the first piece of the answer (the first streamed chunk;
    for a call that is not streamed, the whole response, so ``ttft == seconds``);
    ``seconds``, until the answer was complete (or the call failed). They are not compared:
    two calls with the same counts are equal however long they took.

    ``cached`` is True when ``Fragola.cached`` answered the call from its file: the counts
    are those of the call that was paid for once, and ``Usage.cost`` leaves it out.
    ``offline`` is True when the scripted model or a replay answered it (``Fragola.scripted``,
    ``Fragola.from_env`` without a key, ``Fragola.replay``): nothing was paid, and
    ``Usage.cost`` leaves it out too (``Usage.unpaid`` is what it is priced at)."""

    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cached_tokens: int = 0
    reported: bool = True
    started: float | None = field(default=None, compare=False)
    ttft: float | None = field(default=None, compare=False)
    seconds: float | None = field(default=None, compare=False)
    cached: bool = False
    offline: bool = False

    @property
    def tokens_per_second(self) -> float | None:
        """The output rate: ``completion_tokens / (seconds - ttft)``, the tokens over the time
        they streamed in after the first one; for a call answered in one piece (not
        streamed: ``ttft == seconds``) ``completion_tokens / seconds``. None when the
        server reported no usage or the call has no timing."""
        if not self.reported or self.seconds is None:
            return None
        generating = self.seconds - self.ttft if self.ttft is not None else self.seconds
        span = generating if generating > 0 else self.seconds
        return self.completion_tokens / span if span > 0 else None


def call_read_back(fields: Any) -> CallUsage:
    """One call's usage as a file holds it (``dataclasses.asdict`` of a ``CallUsage``: a batch
    resume row's), checked; ``ValueError`` saying what is wrong otherwise.

    A file can be edited by hand: a negative count would be summed into a negative total
    (and a negative cost), a huge one into a total no JSON reader keeps, so each count must
    be a whole number from 0 to ``MAX_COUNT``."""
    if not isinstance(fields, Mapping):
        raise ValueError("a call's usage is not an object")
    names = ("model", *COUNTS, "reported")
    # Rows written before the timing fields have none; a row has them all or none. Rows
    # written before ``cached`` have none either: their calls were paid for.
    # Nor ``offline``: their calls were made on a model API.
    cached, offline = fields.get("cached", False), fields.get("offline", False)
    for name, flag in (("cached", cached), ("offline", offline)):
        if not isinstance(flag, bool):
            raise ValueError(f"a call's {name!r} must be true or false")
    flags = {"cached", "offline"}
    timed = set(fields) - set(names) - flags
    if set(fields) - timed - flags != set(names) or timed not in (set(), set(TIMING_FIELDS)):
        raise ValueError(f"a call's usage must have the fields {', '.join(names)} "
                         f"(and {', '.join(TIMING_FIELDS)})")
    for name in timed:
        if not valid_time(fields[name]):
            raise ValueError(f"a call's {name!r} must be a number >= 0 or null")
    if not isinstance(fields["model"], str) or not isinstance(fields["reported"], bool):
        raise ValueError("a call's 'model' must be a string and 'reported' true or false")
    for name in COUNTS:
        count = fields[name]
        if type(count) is not int or not 0 <= count <= MAX_COUNT:
            shown = repr(count) if len(repr(count)) <= 30 else repr(count)[:29] + "…"
            raise ValueError(f"a call's {name!r} must be a whole number from 0 to "
                             f"{MAX_COUNT}, not {shown}")
    return CallUsage(fields["model"], fields["prompt_tokens"], fields["completion_tokens"],
                     fields["total_tokens"], fields["cached_tokens"], fields["reported"],
                     fields.get("started"), fields.get("ttft"), fields.get("seconds"), cached,
                     offline)


@dataclass(frozen=True, init=False)
class Usage:
    """Tokens, requests and cost of a sequence of model calls (``calls``, oldest first).

    ``prompt_tokens``, ``completion_tokens``, ``total_tokens``, ``cached_tokens``: sums over
    the calls whose usage was reported; ``requests``: every call the server began to answer,
    a stream cut or stopped half-way included (an HTTP error or a failed connection costs
    nothing); ``unreported``: the calls without usage;
    ``cost``: USD paid, or None when a paid call is unreported or a model's price is unknown
    (a call answered by ``Fragola.cached``'s file costs nothing: ``cached_calls`` counts
    them, ``saved`` is what they cost when they were made; so does a call the scripted model
    or a replay answered: ``offline_calls`` counts them, ``unpaid`` is their price);
    ``cost_text()`` says it in one short phrase;
    ``by_model``: the same per model. ``a + b`` adds two, ``sum(usages)`` many.

    ``tools``: the tool calls that ran, oldest first, with their durations (``ToolTiming``);
    ``model_seconds``, ``tool_seconds`` and ``tokens_per_second`` sum the time (see
    ``fragola_nb.core.timing``). Times are not compared: equal usages have the same counts.
    """

    calls: tuple[CallUsage, ...] = ()
    prices: Mapping[str, ModelPrice] = field(default_factory=dict, compare=False, repr=False)
    """The prices given to ``Fragola(prices=...)``, which win over genai-prices."""
    tools: tuple[ToolTiming, ...] = field(default=(), compare=False, repr=False)
    """The tool calls that ran, with when they started and how long they took."""

    def __init__(self, calls: tuple[CallUsage, ...] = (),
                 prices: Mapping[str, ModelPrice] | None = None,
                 tools: tuple[ToolTiming, ...] = ()) -> None:
        # Made twice a model call and twice a tool call: the fields set at once, not one
        # frozen ``object.__setattr__`` each as the generated ``__init__`` does.
        self.__dict__.update(calls=calls, prices={} if prices is None else prices, tools=tools)

    @functools.cached_property
    def model_seconds(self) -> float:
        """Seconds spent in model calls (those with timing), summed."""
        return sum(call.seconds for call in self.calls if call.seconds is not None)

    @functools.cached_property
    def tool_seconds(self) -> float:
        """Seconds spent running tools, summed."""
        return sum(tool.seconds for tool in self.tools)

    @functools.cached_property
    def tokens_per_second(self) -> float | None:
        """The output rate over the timed calls whose server reported usage: their output
        tokens over the time those tokens took (each call's span as in
        ``CallUsage.tokens_per_second``); None when there is none."""
        tokens, span = 0, 0.0
        for call in self.calls:
            rate = call.tokens_per_second
            if rate is not None and rate > 0:
                tokens += call.completion_tokens
                span += call.completion_tokens / rate
        return tokens / span if span > 0 else None

    def _sum(self, name: str) -> int:
        return sum(getattr(call, name) for call in self.calls)

    @functools.cached_property
    def prompt_tokens(self) -> int:
        return self._sum("prompt_tokens")

    @functools.cached_property
    def completion_tokens(self) -> int:
        return self._sum("completion_tokens")

    @functools.cached_property
    def total_tokens(self) -> int:
        return self._sum("total_tokens")

    @functools.cached_property
    def cached_tokens(self) -> int:
        return self._sum("cached_tokens")

    @property
    def requests(self) -> int:
        return len(self.calls)

    @functools.cached_property
    def unreported(self) -> int:
        return sum(1 for call in self.calls if not call.reported)

    @functools.cached_property
    def by_model(self) -> dict[str, Usage]:
        """The usage of each model called, by model name, in order of first call."""
        groups: dict[str, list[CallUsage]] = {}
        for call in self.calls:
            groups.setdefault(call.model, []).append(call)
        return {model: Usage(tuple(calls), self.prices) for model, calls in groups.items()}

    @functools.cached_property
    def cost(self) -> float | None:
        """USD paid, summed over the calls each priced on its own (a cached call and an
        offline one are free); None when any paid call's price is unknown."""
        return _priced([call for call in self.calls if not call.cached and not call.offline],
                       self.prices)

    @functools.cached_property
    def offline_calls(self) -> int:
        """How many calls the scripted model or a replay answered, at no cost."""
        return sum(1 for call in self.calls if call.offline and not call.cached)

    @functools.cached_property
    def unpaid(self) -> float | None:
        """USD the offline calls would cost at their model's price (0.0 when there is none;
        None when a price is unknown): what a lesson run offline is "priced as"."""
        return _priced([call for call in self.calls if call.offline and not call.cached],
                       self.prices)

    def cost_text(self) -> str:
        """The cost as every view shows it: ``"$0.0012"`` paid; for offline calls (no key, no
        cost) no dollar figure, unless their model was given a price (``prices=``), then
        ``"priced as $0.000011, not paid"``; ``""`` when unknown or nothing to say."""
        offline = [call for call in self.calls if call.offline and not call.cached]
        shown = []
        if len(offline) < self.requests and self.cost is not None:
            shown.append(format_cost(self.cost))
        unpaid = self.unpaid
        if offline and unpaid is not None and all(c.model in self.prices for c in offline):
            shown.append(f"priced as {format_cost(unpaid)}, not paid")
        return " + ".join(shown)

    @functools.cached_property
    def cached_calls(self) -> int:
        """How many calls ``Fragola.cached`` answered from its file, at no cost."""
        return sum(1 for call in self.calls if call.cached)

    @property
    def cached_note(self) -> str:
        """``"cached"`` when ``Fragola.cached``'s file answered every call, ``"2 of 3
        cached"`` when it answered some, else "": what a table shows beside the tokens."""
        if not self.cached_calls:
            return ""
        if self.cached_calls == self.requests:
            return "cached"
        return f"{self.cached_calls} of {self.requests} cached"

    @functools.cached_property
    def saved(self) -> float | None:
        """USD the cached calls would have cost (0.0 when there is none); None when a cached
        call's price is unknown.

        >>> agent.usage.cost, agent.usage.saved, agent.usage.cached_calls  # doctest: +SKIP
        (0.0, 0.000415, 3)
        """
        return _priced([call for call in self.calls if call.cached], self.prices)

    def since(self, earlier: Usage) -> Usage:
        """The calls made after ``earlier`` was read from the same agent (a turn's usage)."""
        return Usage(self.calls[len(earlier.calls):], self.prices,
                     self.tools[len(earlier.tools):])

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        prices = self.prices  # the same dict, or none on one side, in the usual case
        if other.prices and other.prices is not prices:
            prices = {**other.prices, **prices}
        return Usage(self.calls + other.calls, prices, self.tools + other.tools)

    def __radd__(self, other: object) -> Usage:
        if other == 0:  # sum() starts from 0
            return self
        return NotImplemented

    def as_dict(self) -> dict[str, Any]:
        """The counts and the cost, as plain data (a table row, a widget)."""
        return {"prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens,
                "total_tokens": self.total_tokens, "cached_tokens": self.cached_tokens,
                "requests": self.requests, "unreported": self.unreported, "cost": self.cost,
                "cached_calls": self.cached_calls}

    def summary(self) -> str:
        """A short line: ``1,234 tokens · $0.0012`` (the cost only when known), how many
        calls reported no usage (only that, when none did), and how many were answered from
        ``Fragola.cached``'s file (``cached``, ``2 of 3 calls cached``). Empty when no call
        was made."""
        if not self.calls:
            return ""
        if self.unreported == self.requests:  # no count known: "0 tokens" would be made up
            return f"{self.requests} call{'s' if self.requests > 1 else ''} without usage"
        parts = [f"{self.total_tokens:,} tokens"]
        cost = self.cost_text()
        if cost:
            parts.append(cost)
        if self.unreported:
            parts.append(f"{self.unreported} of {self.requests} calls without usage")
        if self.cached_calls:  # free: the cost above leaves them out
            parts.append(_cached_note(self.cached_calls, self.requests))
        return " · ".join(parts)

    def __repr__(self) -> str:
        return (f"Usage(prompt_tokens={self.prompt_tokens}, "
                f"completion_tokens={self.completion_tokens}, "
                f"total_tokens={self.total_tokens}, requests={self.requests}, "
                f"cost={self.cost!r})")


def _cached_note(cached: int, calls: int) -> str:
    if cached == calls:
        return "cached" if calls == 1 else f"{calls} calls cached"
    return f"{cached} of {calls} calls cached"


def format_cost(cost: float) -> str:
    """A dollar figure as short as it stays readable: whole dollars from $1,000 (``$1,234``),
    cents from a dollar (``$12.34``), below that two significant digits (``$0.0001``,
    ``$0.00044``, ``$0.05``, ``$0.50``), ``<$0.000001`` for less, ``$0.00`` for nothing."""
    if cost >= 999.995:
        return f"${cost:,.0f}"
    if cost >= 0.995 or cost == 0:
        return f"${cost:,.2f}"
    if cost < 0.000001:
        return "<$0.000001"
    text = f"{float(f'{cost:.2g}'):.8f}".rstrip("0")
    return "$" + (text if len(text.split(".")[1]) >= 2 else f"{cost:.2f}")


def tree_usage(agent: Agent) -> Usage:
    """The usage of ``agent`` and all its forks, recursively (each call counted once)."""
    total = Usage()
    stack = [agent]
    while stack:
        node = stack.pop()
        total += node.usage
        stack.extend(node.forks)
    return total


def check_prices(prices: Any) -> dict[str, ModelPrice]:
    """``Fragola(prices=...)`` as ``ModelPrice`` values: a dict mapping a model name to
    ``{"input": usd, "output": usd}`` per million tokens (``"cached_input"`` optional), or
    to a ``ModelPrice``; a ``BadUsage`` naming what is wrong otherwise."""
    if prices is None:
        return {}
    if not isinstance(prices, Mapping):
        raise BadUsage(f"prices must be a dict of model name to prices, not "
                       f"{type(prices).__name__}")
    checked: dict[str, ModelPrice] = {}
    for model, price in prices.items():
        if not isinstance(model, str) or not model:
            raise BadUsage(f"prices: a model name must be a non-empty string, not {model!r}")
        if isinstance(price, ModelPrice):
            price = {"input": price.input, "output": price.output,
                     "cached_input": price.cached_input}
        if not isinstance(price, Mapping):
            raise BadUsage(f"prices[{model!r}] must be a dict like "
                           '{"input": 0.15, "output": 0.6} (USD per million tokens)')
        unknown = set(price) - {"input", "output", "cached_input"}
        if unknown or "input" not in price or "output" not in price:
            raise BadUsage(f"prices[{model!r}] takes input, output and cached_input (USD per "
                           f"million tokens), got {sorted(map(str, price))}")
        usd: dict[str, float | None] = {"cached_input": None}
        for key, value in price.items():
            if key == "cached_input" and value is None:
                continue
            usd[key] = _usd(value)
            if usd[key] is None:
                shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:39] + "…"
                raise BadUsage(f"prices[{model!r}][{key!r}] must be a number >= 0, "
                               f"not {shown}")
        checked[model] = ModelPrice(usd["input"] or 0.0, usd["output"] or 0.0,
                                    usd["cached_input"])
    return checked


def _usd(value: Any) -> float | None:
    """``value`` as a price: any real number >= 0 (a numpy scalar, a ``Decimal``), not a
    bool, a string or NaN; None otherwise."""
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, Decimal)):
        return None
    try:
        usd = float(value)
    except (ValueError, OverflowError):  # Decimal("sNaN"), a huge Decimal
        return None
    return usd + 0.0 if math.isfinite(usd) and usd >= 0 else None  # -0.0 is 0.0


def _priced(calls: list[CallUsage], prices: Mapping[str, ModelPrice]) -> float | None:
    total = Decimal(0)
    for call in calls:
        price = _call_cost(call, prices)
        if price is None:
            return None
        total += price
    return float(total)


def _call_cost(call: CallUsage, prices: Mapping[str, ModelPrice]) -> Decimal | None:
    if not call.reported:
        return None
    price = prices.get(call.model)
    if price is not None:
        return price.of(call)
    return _listed_cost(call.model, call.prompt_tokens, min(call.cached_tokens,
                                                            call.prompt_tokens),
                        call.completion_tokens)


def price_known(model: str, prices: Mapping[str, ModelPrice]) -> bool:
    """Whether a call to ``model`` can be priced: by ``prices``, else by genai-prices."""
    return model in prices or _listed_cost(model, 1000, 0, 1000) is not None


@functools.lru_cache(maxsize=4096)
def _listed_cost(model: str, prompt: int, cached: int, completion: int) -> Decimal | None:
    """The price genai-prices gives for one call, or None (model unknown; or genai-prices,
    a dependency, removed from the environment: a cost is then unknown, never an error)."""
    try:
        import genai_prices
    except ImportError:
        return None
    usage = genai_prices.Usage(input_tokens=prompt, output_tokens=completion,
                               cache_read_tokens=cached or None)
    for name, provider in _price_refs(model):
        try:
            return genai_prices.calc_price(usage, name, provider_id=provider).total_price
        except Exception:  # LookupError for an unknown model; what it cannot price is unknown
            continue
    return None


def _price_refs(model: str) -> list[tuple[str, str | None]]:
    """The names to look ``model`` up under: as it is, then, for a name under a provider
    prefix (``openai/gpt-4o-mini``, as LiteLLM and OpenRouter spell them), the rest under
    that provider only: ``ollama/llama3.2`` is not priced as another provider's llama."""
    provider, _, rest = model.partition("/")
    return [(model, None), (rest, provider)] if provider and rest else [(model, None)]

"""OpenTelemetry traces of every agent's turns, following the GenAI semantic conventions.

Off by default; ``instrument()`` turns it on for every agent, ``uninstrument()`` off::

    from opentelemetry.sdk.trace import TracerProvider
    from fragola_nb.presets.tracing import instrument

    instrument(TracerProvider())          # or instrument(): the global tracer provider
    await agent.user_message("What is 2 + 3?")

For one agent only, put it on as a hook (upstream Fragola's way of adding a behaviour to
one agent): ``agent.use(tracing_hook(provider), name="trace")`` traces that agent's turns
and its forks' (forks inherit hooks), with the same settings as ``instrument()``;
``agent.remove_hook("trace")`` stops it (on a fork, for that fork alone). It adds to
``instrument()``, if that is on too: each turn is then traced twice, once per provider.

Each ``user_message``/``step``/``json`` call is one span ``invoke_agent NAME``; inside it,
each model call is a span ``chat MODEL`` and each tool handler that runs is a span
``execute_tool NAME`` (a call that does not run, being unknown, invalid, rejected, answered
by hand or left pending, has none: the model call before it shows what was asked). A span
made inside a tool (another agent's turn, an HTTP client's) is the tool span's child, and a
turn started inside a span of yours is that span's child: each turn runs in a task of its
own, so concurrent agents never share a parent. An ``agent.json`` call that falls back to
another strategy after a refusal is one span per strategy tried (the refused one an ERROR).

Attributes (``gen_ai.*``): ``operation.name`` (``invoke_agent``, ``chat``,
``execute_tool``), ``provider.name`` and ``system`` (``openai``: the Chat Completions API,
whatever server serves it), ``request.model``, the request's settings (``temperature``,
``max_tokens``...), ``response.model``, ``response.id``, ``usage.input_tokens`` and
``usage.output_tokens`` (the turn's: the sums over its calls, when every call reported),
``agent.name``, ``agent.id``, ``tool.name``, ``tool.call.id``; ``server.address`` and
``server.port`` (the host only: never a path, query or credential). ``fragola.outcome`` says
how a turn ended (``finished``, ``paused``, ``step_limit``, ``stopped``). A failure sets the
span's status to ERROR with ``error.type`` (the exception's class: ``ModelHTTPError``, a
tool's ``ValueError``, ``CancelledError`` when a handler was cut by ``stop_sync()``); a
stopped or paused turn is not an error.

Message contents are recorded only with ``capture_content=True``: ``gen_ai.input.messages``,
``gen_ai.output.messages`` and ``gen_ai.system_instructions`` on chat spans,
``gen_ai.tool.call.arguments`` and ``gen_ai.tool.call.result`` on tool spans (JSON text, as
the conventions' opt-in attributes). Without it, a failing tool's error says its class only
(``ValueError``), on its span's status and exception event alike: an error's text often
quotes the arguments (``boom: <argument>``).

No credential reaches a span: every attribute, status description, exception message and
stack trace (with its chained exceptions: an ``openai`` error quoting the body a server sent
back) goes through ``fragola_nb.base.redact``'s rule, with the values in use as known ones (the
client's key, credential headers, query values and body fields of the settings), so a key a
server echoes is hidden whatever its shape. The exception event is the conventions'
(``exception.type``, ``.message``, ``.stacktrace``), built here rather than by the SDK's
``record_exception`` (which formats the raw chain).

Metrics: each model call records the conventions' client metrics through the
OpenTelemetry metrics API: ``gen_ai.client.operation.duration`` (histogram, ``s``; with
``error.type`` when the call failed) and, when the server reported usage,
``gen_ai.client.token.usage`` (histogram, ``{token}``, one record per
``gen_ai.token.type``: ``input``, ``output``), with ``gen_ai.operation.name`` (``chat``),
``gen_ai.provider.name``/``gen_ai.system``, ``gen_ai.request.model``,
``gen_ai.response.model``, ``server.address`` and ``server.port``. Written here with the API
directly, not with ``opentelemetry-util-genai`` (a beta, 1.3b0 when this was written, that
brings its own spans, ``opentelemetry-instrumentation`` and ``wrapt``: it would duplicate the
spans made here and tie the ``otel`` extra to a pre-release).

Needs ``opentelemetry-api`` (``pip install "fragola_nb[otel]"``), imported when
``instrument()`` is called; send the spans anywhere with the SDK and an exporter (OTLP:
Jaeger, Phoenix, Langfuse, Logfire...).
"""

from __future__ import annotations

import contextlib
import json
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from fragola_nb.base.errors import BadUsage
from fragola_nb.base.redact import redact_text, redacted
from fragola_nb.core import probes
from fragola_nb.core.tools import serialize_result

if TYPE_CHECKING:
    from opentelemetry.metrics import Histogram, MeterProvider
    from opentelemetry.trace import Span, Tracer, TracerProvider

    from fragola_nb.core.agent import Agent
    from fragola_nb.core.hooks import Hook

__all__ = ["instrument", "tracing_hook", "uninstrument"]

PROVIDER = "openai"
"""``gen_ai.provider.name``: the API spoken (Chat Completions), whatever server answers."""
INSTALL_HINT = 'pip install "fragola_nb[otel]"'
SETTINGS = {
    "temperature": "gen_ai.request.temperature",
    "top_p": "gen_ai.request.top_p",
    "max_tokens": "gen_ai.request.max_tokens",
    "max_completion_tokens": "gen_ai.request.max_tokens",
    "frequency_penalty": "gen_ai.request.frequency_penalty",
    "presence_penalty": "gen_ai.request.presence_penalty",
    "seed": "gen_ai.request.seed",
    "n": "gen_ai.request.choice.count",
}
"""Request settings recorded on a chat span, by their attribute."""
DURATION_BUCKETS = [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48,
                    40.96, 81.92]
"""``gen_ai.client.operation.duration``'s bucket boundaries (s), as the conventions advise."""
TOKEN_BUCKETS = [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304,
                 16777216, 67108864]
"""``gen_ai.client.token.usage``'s bucket boundaries, as the conventions advise."""


def instrument(tracer_provider: TracerProvider | None = None, *,
               meter_provider: MeterProvider | None = None,
               capture_content: bool = False) -> None:
    """Trace every agent's turns, and measure its model calls, from now on (see the
    module's docstring).

    ``tracer_provider``: where the spans go; ``meter_provider``: where the metrics go (each
    by default OpenTelemetry's global provider, as ``trace.set_tracer_provider`` and
    ``metrics.set_meter_provider`` set it, now or later). ``capture_content``: record the
    messages, tool arguments and results too. Called again, it replaces the settings.
    """
    probes.install(_tracing(tracer_provider, meter_provider, capture_content))


def tracing_hook(tracer_provider: TracerProvider | None = None, *,
                 meter_provider: MeterProvider | None = None,
                 capture_content: bool = False) -> Hook:
    """``instrument()`` for one agent, as a hook: ``agent.use(tracing_hook(provider),
    name="trace")`` traces that agent's turns (and its forks'), ``remove_hook("trace")``
    stops it. The arguments are ``instrument()``'s, checked now (a wrong one is a
    ``BadUsage`` here, not when the hook is put on)."""
    tracing = _tracing(tracer_provider, meter_provider, capture_content)

    def hook(agent: Agent) -> Callable[[], Any]:
        probes.attach(agent.deps, tracing)
        return lambda: probes.detach(agent.deps, tracing)

    hook.__qualname__ = "tracing_hook"
    return hook


def _tracing(tracer_provider: TracerProvider | None, meter_provider: MeterProvider | None,
             capture_content: bool) -> _Tracing:
    """The probe for these settings, each checked."""
    try:
        from opentelemetry import metrics, trace
    except ImportError as exc:
        raise BadUsage(f"tracing needs opentelemetry-api: {INSTALL_HINT}") from exc
    if not isinstance(capture_content, bool):
        raise BadUsage(f"capture_content must be True or False, got {capture_content!r}")
    if tracer_provider is not None and not hasattr(tracer_provider, "get_tracer"):
        raise BadUsage("tracer_provider must be an OpenTelemetry TracerProvider, got "
                       f"{type(tracer_provider).__name__}")
    if meter_provider is not None and not hasattr(meter_provider, "get_meter"):
        raise BadUsage("meter_provider must be an OpenTelemetry MeterProvider, got "
                       f"{type(meter_provider).__name__}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        ours: str | None = version("fragola_nb")
    except PackageNotFoundError:  # pragma: no cover - a checkout that is not installed
        ours = None
    tracer = trace.get_tracer("fragola_nb", ours, tracer_provider)
    meter = metrics.get_meter("fragola_nb", ours or "", meter_provider)
    # The conventions' names, units and advised bucket boundaries (gen_ai client metrics).
    duration = meter.create_histogram(
        "gen_ai.client.operation.duration", unit="s",
        description="GenAI operation duration",
        explicit_bucket_boundaries_advisory=DURATION_BUCKETS)
    tokens = meter.create_histogram(
        "gen_ai.client.token.usage", unit="{token}",
        description="Number of input and output tokens used",
        explicit_bucket_boundaries_advisory=TOKEN_BUCKETS)
    return _Tracing(tracer, capture_content, duration=duration, tokens=tokens)


def uninstrument() -> None:
    """Stop tracing (a turn in flight finishes its spans). Does nothing when not on."""
    if isinstance(probes.installed(), _Tracing):
        probes.install(None)


class _Tracing:
    """The probe ``instrument()`` installs: one span per seam. Whatever it puts in a span
    passes ``fragola_nb.base.redact``'s rule first, with the credentials in use as known values."""

    def __init__(self, tracer: Tracer, capture_content: bool, *, duration: Histogram,
                 tokens: Histogram) -> None:
        self.tracer = tracer
        self.capture_content = capture_content
        self.duration = duration
        self.tokens = tokens

    @contextlib.contextmanager
    def turn(self, agent: Agent) -> Iterator[object]:
        known = _known(agent)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            **_provider(agent),
            "gen_ai.agent.name": agent.name,
            "gen_ai.agent.id": agent.id,
            "gen_ai.request.model": agent.model,
        }
        if agent.description:
            attributes["gen_ai.agent.description"] = agent.description
        before = len(agent.usage.calls)
        with self._span(f"invoke_agent {agent.name}", "INTERNAL", attributes, known) as span:
            try:
                yield span
            finally:
                if agent.outcome is not None:
                    span.set_attribute("fragola.outcome", agent.outcome)
                _usage(span, agent.usage.calls[before:])

    @contextlib.contextmanager
    def model_call(self, agent: Agent, call: probes.ModelCall) -> Iterator[object]:
        request = call.request
        known = _known(agent, request)
        model = str(request.get("model") or "")
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            **_provider(agent),
            "gen_ai.request.model": model,
        }
        for key, name in SETTINGS.items():
            value = request.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                attributes[name] = value
        stop = request.get("stop")
        if isinstance(stop, str):
            stop = [stop]
        if isinstance(stop, list) and stop:
            attributes["gen_ai.request.stop_sequences"] = [str(s) for s in stop]
        if isinstance(request.get("response_format"), dict):
            attributes["gen_ai.output.type"] = "json"
        if self.capture_content:
            system, messages = _input_messages(request.get("messages") or [])
            if system:
                attributes["gen_ai.system_instructions"] = _json(system, known)
            attributes["gen_ai.input.messages"] = _json(messages, known)
        started = time.perf_counter()
        error: str | None = None
        with self._span(f"chat {model}".strip(), "CLIENT", attributes, known) as span:
            try:
                yield span
            except BaseException as exc:
                error = type(exc).__qualname__
                raise
            finally:
                self._measure(agent, call, model, time.perf_counter() - started, error, known)
                exchange = call.exchange
                if exchange.model:
                    _set(span, "gen_ai.response.model", exchange.model, known)
                if exchange.id:
                    _set(span, "gen_ai.response.id", exchange.id, known)
                reported = call.reply.usage if call.reply is not None else exchange.usage
                if reported is not None:
                    span.set_attribute("gen_ai.usage.input_tokens", reported["prompt_tokens"])
                    span.set_attribute("gen_ai.usage.output_tokens",
                                       reported["completion_tokens"])
                    if reported["cached_tokens"]:
                        span.set_attribute("gen_ai.usage.cache_read.input_tokens",
                                           reported["cached_tokens"])
                if call.reply is not None:
                    message = call.reply.message
                    calls = bool(message.get("tool_calls"))
                    span.set_attribute("gen_ai.response.finish_reasons",
                                       ["tool_calls" if calls else "stop"])
                    if self.capture_content:
                        reason = "tool_call" if calls else "stop"
                        out = {**_message(message), "finish_reason": reason}
                        span.set_attribute("gen_ai.output.messages", _json([out], known))

    def _measure(self, agent: Agent, call: probes.ModelCall, model: str, seconds: float,
                 error: str | None, known: set[str]) -> None:
        """The conventions' client metrics of one model call: its duration (with
        ``error.type`` when it failed) and, when the server reported usage, its input and
        output tokens. Attributes of low cardinality only, through the credential rule like
        a span's (a model name or a host could quote a key)."""
        attributes: dict[str, Any] = {"gen_ai.operation.name": "chat", **_provider(agent)}
        if model:
            attributes["gen_ai.request.model"] = model
        if call.exchange.model:
            attributes["gen_ai.response.model"] = call.exchange.model
        if error is not None:
            attributes["error.type"] = error
        attributes = {key: _clean(value, known) for key, value in attributes.items()}
        with contextlib.suppress(Exception):  # a metrics SDK that fails never fails a call
            self.duration.record(seconds, attributes)
        reported = call.reply.usage if call.reply is not None else call.exchange.usage
        if reported is None:
            return
        for kind, count in (("input", reported["prompt_tokens"]),
                            ("output", reported["completion_tokens"])):
            with contextlib.suppress(Exception):
                self.tokens.record(count, {**attributes, "gen_ai.token.type": kind})

    @contextlib.contextmanager
    def tool_run(self, agent: Agent, run: probes.ToolRun) -> Iterator[object]:
        known = _known(agent, run.arguments)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": run.name,
            "gen_ai.tool.call.id": run.id,
            "gen_ai.tool.type": "function",
        }
        tool = agent.tool_named(run.name)
        if tool is not None and tool.description:
            attributes["gen_ai.tool.description"] = tool.description
        if self.capture_content:
            attributes["gen_ai.tool.call.arguments"] = _json(run.arguments, known)
        with self._span(f"execute_tool {run.name}", "INTERNAL", attributes, known,
                        tool=True) as span:
            yield span
            if self.capture_content:
                try:
                    result = serialize_result(run.result)
                except Exception:  # the run loop stores its own error text for this result
                    result = redact_text(repr(run.result), known)[:2000]
                _set(span, "gen_ai.tool.call.result", result, known)

    @contextlib.contextmanager
    def _span(self, name: str, kind: str, attributes: dict[str, Any], known: set[str], *,
              tool: bool = False) -> Iterator[Span]:
        from opentelemetry.trace import SpanKind, Status, StatusCode

        with self.tracer.start_as_current_span(
            redact_text(name, known), kind=SpanKind[kind],
            attributes={key: _clean(value, known) for key, value in attributes.items()},
            record_exception=False, set_status_on_exception=False,
        ) as span:
            try:
                yield span
            except BaseException as exc:
                if tool:
                    _mark_tool_error(exc)
                # Without capture_content, a tool's error text (and that of anything it
                # chained) stays out: it often quotes the arguments.
                quiet = not self.capture_content
                span.set_attribute("error.type", type(exc).__qualname__)
                span.set_status(Status(StatusCode.ERROR,
                                       redact_text(_one_line(exc, quiet), known)))
                if isinstance(exc, Exception):
                    span.record_exception(exc, attributes=_exception_event(exc, known, quiet))
                raise


def _known(agent: Agent, *sent: Any) -> set[str]:
    """The credentials ``agent`` sends (its client's key, credential headers, query values
    and body fields of its settings, and of ``sent``): hidden by value in its spans."""
    try:
        return agent.fragola.credentials(agent.options.model_settings, *sent)
    except Exception:  # a client made by hand that says nothing of its key: shapes only
        return set()


def _clean(value: Any, known: Iterable[str]) -> Any:
    """An attribute's value as a span may hold it: strings through the credential rule."""
    if isinstance(value, str):
        return redact_text(value, known)
    if isinstance(value, (list, tuple)):
        return [redact_text(item, known) if isinstance(item, str) else item for item in value]
    return value


def _set(span: Span, name: str, value: Any, known: Iterable[str]) -> None:
    span.set_attribute(name, _clean(value, known))


_TOOL_ERROR = "_fragola_nb_tool_error"


def _mark_tool_error(exc: BaseException) -> None:
    """Remember that ``exc`` came out of a tool handler: its text stays out of every span
    (the turn's too) unless contents are captured."""
    with contextlib.suppress(AttributeError, TypeError):
        setattr(exc, _TOOL_ERROR, True)


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and the exceptions it chains (cause or context), outermost first."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not seen for seen in chain):
        chain.append(current)
        current = current.__cause__ or (None if current.__suppress_context__
                                         else current.__context__)
    return chain


def _silenced(exc: BaseException, quiet: bool) -> bool:
    return quiet and any(getattr(link, _TOOL_ERROR, False) for link in _chain(exc))


def _exception_event(exc: BaseException, known: Iterable[str], quiet: bool) -> dict[str, str]:
    """The conventions' exception event, every text through the credential rule; for a
    tool's error without captured contents, class names and frames only."""
    kind = type(exc)
    module = kind.__module__
    name = f"{module}.{kind.__qualname__}" if module and module != "builtins" else kind.__qualname__
    if _silenced(exc, quiet):
        message = ""
        blocks = ["Traceback (most recent call last):\n"
                  + "".join(traceback.format_tb(link.__traceback__))
                  + type(link).__qualname__ + "\n" for link in reversed(_chain(exc))]
        stacktrace = "\nThe above exception led to the following one:\n\n".join(blocks)
    else:
        message = str(exc)
        stacktrace = "".join(traceback.format_exception(exc))
    return {"exception.type": name, "exception.message": redact_text(message, known),
            "exception.stacktrace": redact_text(stacktrace, known),
            "exception.escaped": "False"}


def _provider(agent: Agent) -> dict[str, Any]:
    attributes: dict[str, Any] = {"gen_ai.provider.name": PROVIDER, "gen_ai.system": PROVIDER}
    try:
        where = urlsplit(agent.fragola.base_url)
        host, port = where.hostname, where.port
    except ValueError:  # a base URL the client took but urllib cannot read: say nothing
        return attributes
    if host:
        attributes["server.address"] = host
        if port:
            attributes["server.port"] = port
    return attributes


def _usage(span: Span, calls: Any) -> None:
    """The turn's tokens, when every call of it reported its usage (a partial sum would be
    read as the whole)."""
    if calls and all(call.reported for call in calls):
        span.set_attribute("gen_ai.usage.input_tokens", sum(c.prompt_tokens for c in calls))
        span.set_attribute("gen_ai.usage.output_tokens",
                           sum(c.completion_tokens for c in calls))


def _input_messages(messages: list[dict[str, Any]]) -> tuple[list[Any], list[Any]]:
    """A request's messages in the conventions' form: the system instructions apart."""
    system: list[Any] = []
    rest: list[Any] = []
    for message in messages:
        if message.get("role") in ("system", "developer") and not rest:
            system += _parts(message.get("content"))
        else:
            rest.append(_message(message))
    return system, rest


def _message(message: dict[str, Any]) -> dict[str, Any]:
    role = message.get("role")
    if role == "tool":
        parts: list[Any] = [{"type": "tool_call_response", "id": message.get("tool_call_id"),
                             "response": message.get("content")}]
        return {"role": "tool", "parts": parts}
    parts = _parts(message.get("content"))
    if message.get("refusal"):
        parts.append({"type": "text", "content": message["refusal"]})
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        arguments = function.get("arguments")
        try:
            arguments = json.loads(arguments) if isinstance(arguments, str) else arguments
        except ValueError:
            pass  # kept as the text the model sent
        parts.append({"type": "tool_call", "id": call.get("id"), "name": function.get("name"),
                      "arguments": arguments})
    return {"role": "system" if role == "developer" else role, "parts": parts}


def _parts(content: Any) -> list[Any]:
    if content is None or content == "":
        return []
    if isinstance(content, str):
        return [{"type": "text", "content": content}]
    parts: list[Any] = []
    for part in content if isinstance(content, list) else [content]:
        if isinstance(part, dict) and part.get("type") == "text":
            parts.append({"type": "text", "content": part.get("text")})
        else:
            parts.append(part)  # an image or audio part, as sent
    return parts


def _json(value: Any, known: Iterable[str]) -> str:
    """Contents as a span holds them: JSON text, every credential redacted (by name, such as
    a tool's ``api_key`` argument, by shape, and the ``known`` values in use)."""
    return json.dumps(redacted(value, known), ensure_ascii=False, default=repr)


def _one_line(exc: BaseException, quiet: bool) -> str:
    text = "" if _silenced(exc, quiet) else " ".join(str(exc).split())
    return f"{type(exc).__qualname__}: {text}"[:500] if text else type(exc).__qualname__

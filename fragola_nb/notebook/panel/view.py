"""``AgentPanel``: a live view of one agent, and the controls that steer it.

One anywidget (``panel.js``/``panel.css``) draws everything: the header, a status strip, the
conversation in a scrolling, windowed list, the reply as it streams, approval cards, the
controls and a message box. The panel is a view: it subscribes to the agent's events and
every control goes through the agent's public API (``approve``, ``reject``, ``inject``,
``step``, ``stop_sync``, ``reset``, ``fork``, ``user_message``). What a click asks for arrives
as a message handled by :meth:`AgentPanel.do`, which code and tests may call too.

Messages reach the browser as *rows* (see :mod:`.message_rows`), sent when they arrive: the new rows
and the rows a tool result changed, never the history. The browser keeps them, and copies
them into the widget's saved state (``saved_rows``) so a notebook saved with its widget state
still shows the conversation without a kernel.

    panel = AgentPanel(agent)            # the whole history
    panel = AgentPanel(agent, since=4)   # a turn panel: messages from index 4 on
    panel.do("approve", id="call_1")     # what a click on Approve does

A turn panel shows one turn for good: the run that starts first after it is shown (its
``%%fragola`` cell's), the runs that go on from a pause (approvals, decided anywhere), and
the runs started by its own controls (Step, the message box). A run started elsewhere from
idle (a later cell's ``user_message`` or ``step``, another panel) is a later turn: the turn
panel detaches before that run's first message, keeping its turn, status and step count as
they ended; ``%fragola_panel`` is the view that follows the agent.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, MutableMapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anywidget
import traitlets

from fragola_nb.base.render import conversation_html, escape, visible
from fragola_nb.core.events import transient
from fragola_nb.notebook.panel import view_data
from fragola_nb.notebook.panel.actions import Actions, clicked, error_text
from fragola_nb.notebook.panel.message_rows import CallFacts, Rows
from fragola_nb.notebook.panel.outbox import PACED, Outbox
from fragola_nb.notebook.panel.timeline import Made, timeline_shown
from fragola_nb.notebook.panel.timeline_feed import EVERY, SHARE, TimelineFeed
from fragola_nb.notebook.runner import started_by
from fragola_nb.notebook.static.copy import live_text
from fragola_nb.notebook.stream import Stream

if TYPE_CHECKING:
    from fragola_nb.core.agent import Agent
    from fragola_nb.core.events import Subscription
    from fragola_nb.core.usage import Usage

__all__ = ["AgentPanel", "error_text"]

_log = logging.getLogger("fragola_nb")
_HERE = Path(__file__).parent

Handler = Callable[["AgentPanel", Any], None]

STATIC_OUTCOME_NOTES = {"stopped": "stopped", "step_limit": "step budget used",
                        "budget": "budget spent"}
"""What the static HTML copy (nbconvert, GitHub) says of how the last run ended."""
EAGER = 300
"""Of a long history shown at once, the last messages rendered before a view asks."""
RENDER_MAX = 400
"""Rows rendered per request of a view."""
HELLO_CHUNK = 2_000
"""Rows per message when a view asks for all of them."""
RUN_REASONS = frozenset({"user_message", "ai_message", "tool_result", "cancelled"})
"""The state updates a run makes, a few a step: their rows and counts go paced
(``outbox``); the others (a decision, a fork, an edit...) show at once."""
STATIC_LIMIT = 500
"""Messages in the static HTML copy: the last ones (the whole history is in a session
file or ``export_html``)."""


def _observer(method: Handler) -> Handler:
    """A panel's listener: transient (not copied to forks nor saved in sessions), only for
    this panel's agent, and never raising: a view must not break the run it shows."""

    @functools.wraps(method)
    def listener(self: AgentPanel, event: Any) -> None:
        if self._detached or event.context.agent is not self.agent:
            return
        try:
            with self._lock:
                method(self, event)
        except Exception:
            _log.exception("fragola_nb: the panel of %s failed to update", self.agent.name)

    return transient(listener)


class AgentPanel(anywidget.AnyWidget):
    """Header, status strip, messages, streaming reply, approval cards, controls, message box,
    tools and stores of one agent (or, with ``since``, of one turn)."""

    _esm = _HERE / "panel.js"
    _css = _HERE / "panel.css"

    head = traitlets.Dict().tag(sync=True)
    """name, id, model, fork_of, instructions, steps, max_step, status, usage, variable."""
    strip = traitlets.Dict().tag(sync=True)
    """What is happening and what needs the person: kind, text, t0 (seconds since the epoch
    when the wait began; the browser adds the seconds)."""
    cards = traitlets.List(traitlets.Dict()).tag(sync=True)
    tools = traitlets.List(traitlets.Dict()).tag(sync=True)
    stores = traitlets.List(traitlets.Dict()).tag(sync=True)
    notice = traitlets.Dict().tag(sync=True)
    """The last error or note of the panel: kind ("error" or "note") and text."""
    detached = traitlets.Unicode("").tag(sync=True)
    since = traitlets.Int(0).tag(sync=True)
    saved_rows: traitlets.List[Any] = traitlets.List().tag(sync=True)
    """Left empty by the kernel; the browser fills it (see the module's docstring)."""
    timeline = traitlets.Dict().tag(sync=True)
    """A turn panel's waterfall of model and tool calls, and their totals
    (``timeline.timeline_shown``); empty for a panel of the whole agent."""
    decisions = traitlets.List(traitlets.Dict()).tag(sync=True)
    """A turn panel's approval cards once their calls are answered: name, args, kind and
    how and by whom each was decided ("approved in code", "rejected by a click: why"), so
    the moment a person decides stays readable after Run All and in the saved notebook."""

    def __init__(self, agent: Agent, since: int | None = None, *, model: str | None = None,
                 namespace: MutableMapping[str, Any] | None = None) -> None:
        self._made = False  # the comm opens once the state is made (``open``)
        super().__init__(since=since or 0)
        self.agent = agent
        self.turn = since is not None
        self.turn_model = model
        self.namespace = namespace
        self.on_fork: Callable[[Agent], AgentPanel | None] | None = None
        """Called with a fork made by the Fork button (a ForkTree sets it to select it); it
        returns the panel that shows the fork now, if another one does."""
        self._lock = threading.RLock()
        self._detached = False
        self._rows = Rows(start=since or 0)
        self._shown: list[dict[str, Any]] = []  # the messages shown (shared, never changed)
        # the panel's lock: what the outbox sends may carry the streamed text
        # fed the chunks' events: a reply assembled so far is made when its text is sent (a
        # fast turn's calls streamed, each chunk's message made for nothing; issue 34)
        self._stream = Stream(self._send_stream,
                              lambda event: view_data.streamed_text(event.message),
                              lock=self._lock)
        # a turn's waterfall: its new bars, paced, while it runs; whole as the trait after
        made = Made()  # the bars made so far: each made once
        self._timeline = TimelineFeed(
            lambda: timeline_shown(self.usage, self._caught_up(), made), self.send, self._lock)
        # rows, header and strip: paced as the stream is, at once when the status changes
        self._outbox = Outbox(self.send, self.send_state, self._send_head, self._lock,
                              lambda: (self._stream.sent, self._stream.stopped),
                              lambda keys: dict(self.get_state(keys)), self._catch_up)
        self._unread = False  # a run's messages wait to be read as the outbox goes
        self._told = 0  # ... those its state updates told of (the history's length then)
        self._tools_of: tuple[Any, ...] | None = None  # the tools ``tools`` shows
        self._model_used: str | None = None
        # A turn panel shows the usage of its turn: the calls made after it was made.
        self._usage_before = agent.usage if since is not None else None
        # the header's usage as made last: until when it stands, of how many calls (_head_usage)
        self._usage_made: tuple[float, tuple[Any, ...], dict[str, Any]] | None = None
        self._calling_since = time.time()
        self._running: tuple[str, float] | None = None  # the tool running, since when
        self._error = ""
        self._retry_at: float | None = None  # a 429 is waited out until then
        self._ran = False  # a turn panel: has its turn's first run started?
        self._decided: dict[str, dict[str, Any]] = {}  # pending calls decided, as recorded
        self._static: str | None = None  # the static copy, kept as it was when detached
        self._quiet = True  # no view yet: what the first look finds goes with "hello"
        self.shown_at = time.monotonic()
        """When it was made (shown); ``seen`` is whether a front end has drawn it since (its
        view's hello): a person can click it (``wait_for_decisions``)."""
        self.seen = False
        self.actions = Actions(self)
        self.on_msg(self._on_browser)
        self._subscriptions: list[Subscription] = [
            agent.on_after_state_update(self._on_state_update),
            agent.on_status_change(self._on_status_change),
            agent.on_model_chunk(self._on_model_chunk),
            agent.on_after_model_invocation(self._on_model_reply),
            agent.on_before_step(self._on_before_step),
            agent.on_before_tool_call(self._on_tool_start),
            agent.on_after_tool_call(self._on_tool_end),
            agent.on_after_step(self._on_after_step),
            agent.on_throttled(self._on_throttled),
        ]
        self._store_unsubscribes = [
            store.on_change(self._on_store_change) for store in agent.stores.values()
        ]
        self.sync_now()
        self._quiet = False
        self._made = True
        self.open()

    def open(self) -> None:
        """Open the comm to the front ends, with the state as ``__init__`` made it: the
        header, strip, tools and cards ride in the opening message. (ipywidgets opens it
        at the start of ``__init__``, with the traits' defaults: what was made after went as
        three updates of their own, at every panel.)"""
        if getattr(self, "_made", True):
            super().open()

    # -- what the magics, the tree and tests use ---------------------------------------------

    @property
    def rows(self) -> list[dict[str, Any]]:
        """The rows shown (a copy)."""
        with self._lock:
            self._catch_up()
            return [dict(row) for row in self._rows.rows]

    @property
    def stream_text(self) -> str:
        """The streamed text shown now ("" when no reply streams)."""
        return self._stream.text

    def do(self, action: str, **fields: Any) -> None:
        """Carry out what a control asks for (``approve``, ``edit``, ``reject``, ``inject``,
        ``step``, ``stop``, ``reset``, ``fork``, ``send``, ``bind``); see :class:`Actions`."""
        self.actions.do(action, fields)

    def detach(self, why: str = "this panel no longer follows the agent") -> None:
        """Stop following the agent; the view keeps what it shows, its controls disabled, and
        says ``detached: why``."""
        with self._lock:
            if self._detached:
                return
            self._catch_up()  # the rows of its run that wait: it keeps them
            self._detached = True
            for subscription in self._subscriptions:
                subscription.unsubscribe()
            for unsubscribe in self._store_unsubscribes:
                unsubscribe()
            self._stream.flush()
            self._timeline.stop()  # the waterfall as the views have it, not made again
            if self.turn and self._timeline.shown:
                self.timeline = self._timeline.shown
            self._outbox.flush()  # the turn's rows that wait (not the agent's header now)
            self._outbox.cancel()
            if self.strip.get("kind") == "step_limit":  # its Step is off now
                self.strip = {**self.strip, "text": "step budget used"}
            self._static = self.html()  # nbconvert's copy keeps the turn as it ended too
            self.detached = visible(why)  # the view turns every control off

    def close(self) -> None:
        """Detach and close the widget (for a view that is replaced)."""
        try:
            self.detach()
        finally:
            super().close()

    def show_error(self, exc: BaseException) -> None:
        """Show ``exc`` in one readable block (class, message, cause), as text."""
        with self._lock:
            self._error = error_text(exc)
            self.notice = {"kind": "error", "text": visible(self._error)}
            self._refresh_strip()

    def note(self, text: str) -> None:
        """Show a short note from a control (the panel's answer to a click)."""
        self.notice = {"kind": "note", "text": visible(text)}

    def sync_now(self) -> None:
        """Show everything as it is now, the streamed text included (a detached panel keeps
        what it showed)."""
        with self._lock:
            if self._detached:
                return
            self._stream.flush()
            self._refresh()
            self._outbox.flush()
            self._settle_timeline()

    # -- the browser ---------------------------------------------------------------------------

    def _on_browser(self, _: Any, content: Any, buffers: Any) -> None:
        if not isinstance(content, dict):
            return
        action = content.get("do")
        if action == "hello":  # a new view (or a reloaded page): everything, once
            self.seen = True
            with self._lock:
                self._outbox.flush()  # what waits goes before (the hello repeats it)
            self._send_all()
            return
        if action == "render":  # rows a view draws whose Markdown waits
            ks = content.get("ks")
            if isinstance(ks, list):
                with self._lock:
                    done = self._rows.render([k for k in ks[:RENDER_MAX] if isinstance(k, int)])
                if done:
                    self.send({"t": "rows", "rows": done})
            return
        fields = {k: v for k, v in content.items() if k != "do"}
        try:
            self.do(str(action), **fields)
        except Exception as exc:  # never into the kernel's log only: the person sees it
            self.show_error(exc)

    def _send_all(self) -> None:
        """Every row, in messages of ``HELLO_CHUNK`` rows (parsing one huge message would hold
        the browser's main thread), the newest first: the view shows the end of the
        conversation while the rest arrives."""
        with self._lock:
            self._catch_up()
            rows = self._rows.rows
            starts = list(range(0, len(rows), HELLO_CHUNK))[::-1] or [0]
            for n, start in enumerate(starts):
                message: dict[str, Any] = {"t": "rows", "rows": rows[start:start + HELLO_CHUNK]}
                if n:
                    self.send(message)
                    continue
                # The streamed text as the other views have it, sent before any later add
                # (text received but not yet sent would come again in the next add).
                with self._stream.held() as (text, stopped):
                    message.update(reset=True, total=len(rows), stream=text, stopped=stopped)
                    self.send(message)
            if self.turn and self._timeline.shown:  # the waterfall as made last, whole
                self.send(self._timeline.hello())

    def _send_stream(self, message: dict[str, Any]) -> None:
        # While rows or the header wait for the pace, the stream waits with them: their
        # message carries it (issue 34: a fast turn streamed each step's call on its own);
        # so does what streams just after rows went, in a run whose steps come fast.
        if self._outbox.waiting or self._outbox.burst():
            self._outbox.stream()
        else:
            self.send({"t": "stream", **message})

    # -- events --------------------------------------------------------------------------------

    @_observer
    def _on_state_update(self, event: Any) -> None:
        if event.reason == "ai_message":
            # The last text first, in a small message: the stored reply's rows (a large
            # message, and its Markdown to draw) come after it. In a fast run's burst of
            # steps the outbox waits, and the last text waits with it (its row replaces it).
            self._stream.finish()
            if self._stream.cleared():  # the stored message replaces the streamed text,
                self._outbox.stream(due=False)  # in the message that brings its row
        run = event.reason in RUN_REASONS
        if run and self._outbox.waiting:
            # Its rows, counts and cards would wait for the outbox: they are made as it goes,
            # the burst's messages in one go (issue 34: a fast turn read its history, made its
            # rows and counted its cards twice a step, each in an event of its own). Only the
            # messages told so far: a stored reply's last text (``finish`` above) may make the
            # outbox go before its clear, and its row must not go with that text.
            self._unread, self._told = True, self.agent.message_count
            return
        self._refresh(run=run)
        if not run:
            # what a person did (decided a call, forked, edited, an experiment began)
            self._outbox.flush()

    @_observer
    def _on_status_change(self, event: Any) -> None:
        if self.turn and event.status == "generating" and event.previous == "idle":
            mine = not self._ran or started_by() is self
            self._ran = True
            if not mine:
                self.detach(f"its turn ended; a later run of {self.agent.name} is not shown "
                            "here (%fragola_panel follows the agent)")
                return
        if event.status == "generating":
            if event.previous == "idle":
                self._stream.clear()  # a new run: the stopped text and the last error go
                self._error = ""
                self._model_used = None  # until this run's first reply says which
            self.notice = {}  # what a control said is old news once the agent goes on
            self._calling_since = time.time()
        elif event.status == "idle" and self.agent.outcome == "stopped":
            self._stream.stop()  # the partial reply stays, marked as not saved
        else:
            self._stream.clear()
        if event.status == "idle":
            # A %%fragola --model override lasts for its turn (approvals included); a run
            # started later (Step, the message box) uses the agent's model.
            self.turn_model = None
        self._running = None
        self._refresh()
        if not self._detached:
            self._outbox.flush()  # the status is the header's: at once
        if event.status != "generating":  # the run ended or paused: the whole waterfall
            self._settle_timeline()

    @_observer
    def _on_model_chunk(self, event: Any) -> None:
        self._stream.feed(event)  # made text when it is sent, not per chunk

    @_observer
    def _on_throttled(self, event: Any) -> None:
        self._retry_at = time.time() + event.seconds
        self._refresh_strip()

    @_observer
    def _on_model_reply(self, event: Any) -> None:
        retried, self._retry_at = self._retry_at is not None, None
        model = event.config.get("model") if isinstance(event.config, dict) else None
        named = self._model()
        if isinstance(model, str) and model:
            self._model_used = model
        self._refresh_head(strip=retried or self._model() != named)

    @_observer
    def _on_before_step(self, event: Any) -> None:
        shown = self._retry_at is None and self._running is None and not self._error
        self._retry_at = None
        self._calling_since = time.time()
        self._running = None
        if not (shown and self.strip.get("kind") == "model"):
            # (a step after a tool's: the strip says "calling" since the tool ended, already)
            self._refresh_strip()

    @_observer
    def _on_tool_start(self, event: Any) -> None:
        config = event.config
        self._running = (config.tool.name, time.time())
        self._rows.facts.setdefault(config.id, CallFacts()).started = time.time()
        self._refresh_strip()

    @_observer
    def _on_tool_end(self, event: Any) -> None:
        facts = self._rows.facts.setdefault(event.id, CallFacts())
        facts.error = event.error
        if facts.started is not None:
            facts.ms = round((time.time() - facts.started) * 1000)
        position = self._rows.refresh_call(event.id)
        if position is not None:
            self._outbox.rows([self._rows.rows[position]])
        self._running = None
        self._calling_since = time.time()
        self._refresh_strip()
        self._refresh_timeline()

    @_observer
    def _on_after_step(self, event: Any) -> None:
        self._outbox.head()  # the step count; the strip and the waterfall have their events

    def _on_store_change(self, value: Any) -> None:
        try:
            self.stores = view_data.stores(self.agent)
        except Exception:  # a store's set() must not fail because of its view
            _log.exception("fragola_nb: the panel of %s failed to show a store", self.agent.name)

    # -- what is sent ----------------------------------------------------------------------------

    def _refresh(self, *, run: bool = False, upto: int | None = None) -> None:
        # On every state update: it reads the agent's cheap views (counts, status, pending,
        # the new messages), never agent.state, whose copy of the history grows with it.
        # ``run``: an update a run makes a few times a step (``RUN_REASONS``): the strip and
        # the waterfall change on their own events, not on these.
        self._unread = False
        if not self._read_messages(upto):
            return
        self._refresh_cards()
        if run:
            self._outbox.head()
        else:
            self._refresh_head()
        tools = tuple(self.agent.options.tools)
        if self._tools_of is None or len(tools) != len(self._tools_of) or any(
                a is not b for a, b in zip(tools, self._tools_of, strict=True)):
            self._tools_of = tools  # the tools change rarely: shown again when they do
            self.tools = view_data.tools(self.agent)
        if self.agent.stores or self.stores:
            self.stores = view_data.stores(self.agent)

    def _catch_up(self) -> None:
        """Read the messages a run added while the outbox waited (``_on_state_update``)."""
        if self._unread and not self._detached:
            self._refresh(run=True, upto=self._told)

    def _caught_up(self) -> list[dict[str, Any]]:
        """The messages shown, those that wait read first."""
        with self._lock:
            self._catch_up()
            return self._shown

    def _read_messages(self, upto: int | None = None) -> bool:
        """Send the rows of the messages added since the last look (those before index
        ``upto`` when given); False when the history was replaced under a turn panel (which
        then keeps showing its turn, detached)."""
        agent, rows = self.agent, self._rows
        read = rows.start + rows.count  # the index of the next message to read
        if agent.message_count < read or (self._shown and (
                fresh := agent.messages_since(read - 1)) and fresh[0] is not self._shown[-1]):
            if self.turn:
                self.detach("the agent's history was reset or replaced; this panel keeps "
                            "the turn as it was")
                return False
            rows.clear()
            self._shown = []
            self._outbox.drop_rows()
            if not self._quiet:
                self.send({"t": "rows", "reset": True, "rows": []})
            read = rows.start
        fresh = agent.messages_since(read)
        if upto is not None:
            fresh = fresh[:max(0, upto - read)]
        if not fresh:
            return True
        for message in fresh:  # decisions made by hand are not in the history
            if message.get("role") == "tool":
                self._mark_injected(str(message.get("tool_call_id", "")))
        # A long history shown at once: the Markdown of all but its last messages waits
        # until a view draws them (a panel of 20,000 messages would render them all first).
        lazy = read + len(fresh) - EAGER if self._quiet and len(fresh) > EAGER else 0
        added, patched = rows.add(fresh, lazy_before=lazy)
        self._shown += fresh
        changed = [rows.rows[p] for p in patched] + added
        if changed and not self._quiet:
            self._outbox.rows(changed)
        return True

    def _mark_injected(self, call_id: str) -> None:
        for card in self.cards:
            if card["id"] == call_id and card.get("decided") == "injected":
                self._rows.facts.setdefault(call_id, CallFacts()).decision = "inject"

    def _refresh_cards(self) -> None:
        pending = self.agent.pending
        if not (pending or self.cards or self._decided):
            return  # a run's steps: no card to show, none to keep
        errors = {card["raw_id"]: card["error"] for card in self.cards}
        self.cards = [view_data.card(call, errors.get(call.id, "")) for call in pending]
        if not self.turn:
            return
        # A decided call leaves ``pending`` when the run goes on: its card stays, as decided.
        now = {call.id for call in pending}
        answered = [self._decided.pop(raw) for raw in list(self._decided) if raw not in now]
        if answered:
            self.decisions = [*self.decisions, *answered]
        for call in pending:
            if call.decision is not None and call.id not in self._decided:
                self._decided[call.id] = view_data.decision(
                    call, clicked=clicked(self.agent, call.id))

    def set_card_error(self, call_id: str, text: str) -> None:
        self.cards = [{**card, "error": visible(text)} if card["raw_id"] == call_id else card
                      for card in self.cards]

    def _model(self) -> str:
        return self._model_used or self.turn_model or self.agent.model

    @property
    def usage(self) -> Usage:
        """What the header counts: the agent's usage, or for a turn panel its turn's."""
        usage = self.agent.usage
        return usage if self._usage_before is None else usage.since(self._usage_before)

    def _refresh_head(self, *, strip: bool = True) -> None:
        self._outbox.head()
        if strip:
            self._refresh_strip()
        self._refresh_timeline()

    def _send_head(self) -> None:
        if not self._detached:
            self.head = view_data.head(self.agent, model=self._model(), usage=self._head_usage(),
                                   turn=self.turn)

    def _head_usage(self) -> dict[str, Any]:
        """The header's usage (``view_data.usage_shown``), which sums every call of the turn: while
        a run goes on, made again at most as often as the waterfall is (``timeline_feed``:
        four times a second, less when making it costs more), so a long fast turn does not
        sum its calls again at every paced update; exact once the run ends or pauses."""
        usage, made = self.usage, self._usage_made
        calls = (len(usage.calls), *usage.calls[-1:])  # the same calls: the same counts
        if made is not None and (made[1] == calls or (
                self.agent.status == "generating" and time.monotonic() < made[0])):
            return made[2]
        began = time.perf_counter()
        value = view_data.usage_shown(usage)
        spent = time.perf_counter() - began
        self._usage_made = (time.monotonic() + max(EVERY, SHARE * spent), calls, value)
        return value

    def _should_send_property(self, key: str, value: Any) -> bool:
        # The header and the strip go with the outbox, paced (their values are current here).
        outbox = getattr(self, "_outbox", None)  # None while the widget is being made
        if key in PACED and outbox is not None and not self._detached:
            outbox.trait(key)
            return False
        return bool(super()._should_send_property(key, value))

    def _refresh_timeline(self) -> None:
        # A turn's calls only: the whole agent's could be thousands of bars. Its new bars go
        # when the pace allows (``TimelineFeed``), not the whole waterfall at every event.
        if self.turn:
            self._timeline.due()

    def _settle_timeline(self) -> None:
        if self.turn:
            self.timeline = self._timeline.settle()

    def _refresh_strip(self) -> None:
        self.strip = view_data.strip(self.agent, model=self._model(), running=self._running,
                                 since=self._calling_since, error=self._error,
                                 retry_at=self._retry_at)

    # -- outside a live notebook -------------------------------------------------------------

    def html(self) -> str:
        """The shown messages as standalone escaped HTML (nbconvert, GitHub)."""
        if self._static is not None:
            return self._static
        shown = self._caught_up()
        # What the header and strip show (a detached turn panel: as its turn ended), not the
        # agent as it is now.
        agent, head, outcome = self.agent, self.head, self.strip.get("kind")
        status = head.get("status", agent.status)
        note = ""
        if status != "generating" and outcome in STATIC_OUTCOME_NOTES:
            note = f" · {STATIC_OUTCOME_NOTES[outcome]}"
        summary = head.get("usage", {}).get("text", "")
        tokens = f" · {'this turn: ' if self.turn else ''}{summary}" if summary else ""
        last = shown[-STATIC_LIMIT:]
        body = conversation_html(
            last, start=self._rows.start + len(shown) - len(last),
            title=agent.name, status=status,
            subtitle=f"id {agent.id} · model {self._model()}"
            f" · steps {head.get('steps', 0)}/{head.get('max_step', 0)}{tokens}{note}",
        )
        if len(shown) > len(last):
            left = len(shown) - len(last)
            body = (f"<p><i>{left:,} earlier messages are not in this static copy; "
                    "export_html() or a saved session has them all.</i></p>" + body)
        if timed := self._timeline_text():  # where the turn's time went, as the panel says it
            body += f'<p class="fragola-timeline"><small>{escape(timed)}</small></p>'
        if self._error:
            body += f'<div class="fragola-error">{escape(self._error)}</div>'
        return body

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        # Beside the live view, text and HTML forms (nbconvert, GitHub, a terminal, and an
        # untrusted notebook in JupyterLab, which shows the text: it says what to do).
        bundle: Any = super()._repr_mimebundle_(**kwargs)
        data, metadata = bundle if isinstance(bundle, tuple) else (bundle, {})
        data = {**(data or {}), "text/plain": self.text(), "text/html": self.html()}
        return (data, metadata) if metadata else data

    def text(self) -> str:
        """What this view is, and how to see it live: its ``text/plain``, as a notebook shows
        it where the panel cannot draw ("fragola_nb panel of 'calc', 8 messages: run the
        cell, or trust the notebook"; a turn panel names its messages by number), then for a
        timed turn a line saying where its time went ("timeline · turn 2.10 s · ...")."""
        name, count = self.agent.name, len(self._caught_up())
        if not self.turn:
            return live_text(f"panel of {name!r}, {count} message{'s' if count != 1 else ''}")
        first = self._rows.start
        shown = f"messages #{first} to #{first + count - 1}" if count > 1 else (
            f"message #{first}" if count else "no message yet")
        timed = self._timeline_text()
        return live_text(f"turn panel of {name!r}, {shown}") + (f"\n{timed}" if timed else "")

    def _timeline_text(self) -> str:
        """The timeline's line ("timeline · turn 2.10 s · model 1.42 s (68%) · ..."), for the
        text forms; empty when nothing was timed."""
        summary = self.timeline.get("summary", "") if self.turn else ""
        return f"timeline · {summary}" if summary else ""

    def __repr__(self) -> str:
        since = f", since={self.since}" if self.turn else ""
        return f"AgentPanel({self.agent!r}{since})"

"""The scripted model: a real HTTP server speaking the Chat Completions API on loopback.

Tests drive it with the real ``openai.AsyncOpenAI`` client, so everything between the SDK and
the socket (retries, timeouts, SSE parsing, connection pooling) is exercised for real::

    with ScriptedModel([reply("Hello!")]) as model:
        client = model.client()
        ...  # await client.chat.completions.create(model="m", messages=[...])
        assert model.requests[0]["messages"][-1]["content"] == "Hi"
"""

from __future__ import annotations

import itertools
import select
import socket
import socketserver
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from http.server import ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from fragola_nb.base.redact import hidden, is_secret_name, redact_text
from fragola_nb.models.scripted import wire
from fragola_nb.models.scripted.items import (
    Drop,
    Fail,
    Hang,
    Item,
    Raw,
    Recorded,
    Reply,
    ScriptEntry,
    ToolCalls,
    fail,
    resolve,
)
from fragola_nb.models.scripted.refusals import check_refuse, refusal
from fragola_nb.models.scripted.scripts import SCRIPT_HEADER, AgentScript, run_out

if TYPE_CHECKING:
    import openai

__all__ = ["ScriptedModel"]


Brain = Callable[[dict[str, Any]], Item]


def _shutdown(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # stop() joins the handler threads itself, with a timeout, after closing their sockets.
    block_on_close = False
    # Hundreds of agents connect at once; the default backlog of 5 drops SYNs (1 s retries).
    request_queue_size = 1024

    def __init__(self, model: ScriptedModel) -> None:
        self.model = model
        super().__init__(("127.0.0.1", 0), wire.Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind does a reverse DNS lookup (getfqdn), slow without a resolver.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = "127.0.0.1", self.server_address[1]

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client hanging up mid-response is routine here (timeouts, drops, cancellation).
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


class ScriptedModel:
    """An OpenAI-compatible Chat Completions endpoint answering from a script.

    Each ``POST /v1/chat/completions`` consumes the next script entry (an item from
    :mod:`fragola_nb.testing`, or a callable ``(request) -> item``). When the script is
    empty, ``brain(request)`` answers if a brain was given; otherwise the request fails with
    HTTP 409 and one line: ``"the scripted model used all N scripted answers: re-run the cell
    that builds the script, or pass brain=demo_brain to ScriptedModel(...) ..."`` (``"... has
    no scripted answer ..."`` when none was given; ``Fragola.scripted(...)`` where that made
    it). A request whose ``x-fragola-script`` header names a script added with
    :meth:`add_script` is answered from that script instead (see
    :mod:`fragola_nb.models.scripted.scripts`).

    Everything exchanged is recorded: :attr:`requests` (parsed bodies, in arrival order),
    :attr:`targets` (each request's path and query string, in the same order),
    :attr:`headers` (each request's headers, names in lower case, in the same order),
    :attr:`arrived` (when each request arrived, ``time.monotonic()``, in the same order).
    Credentials are not kept (``fragola_nb.base.redact``): a header whose name is one
    (``Authorization``, ``x-goog-api-key``...) keeps only its scheme and ``[redacted]``, and
    a credential in any other header or in the query string is ``[redacted]``.
    :attr:`responses` (non-stream completion bodies) and :attr:`chunks` (stream chunks).

    ``refuse`` (``{"json_schema"}``, ``"json_object"``, ``"tool_choice"``) makes it refuse
    those as some servers do (``fragola_nb.models.scripted.refusals``), to show ``json_mode``.
    """

    def __init__(
        self,
        script: Iterable[ScriptEntry] = (),
        *,
        brain: Brain | None = None,
        chunk_size: int = 4,
        chunk_delay: float = 0.0,
        model_name: str = "scripted",
        refuse: Iterable[str] = (),
    ) -> None:
        self.brain = brain
        self.refuse = check_refuse(refuse)
        """What this model refuses as some servers do (``fragola_nb.models.scripted.refusals``)."""
        self.chunk_size = chunk_size
        self.chunk_delay = chunk_delay
        self.model_name = model_name
        self.requests: list[dict[str, Any]] = []
        self.targets: list[str] = []
        self.headers: list[dict[str, str]] = []
        self.arrived: list[float] = []
        self.responses: list[dict[str, Any]] = []
        self.chunks: list[dict[str, Any]] = []
        self._script: deque[ScriptEntry] = deque(script)
        self._taken = 0  # entries of the shared script answered so far (for the run-out line)
        # What the run-out line names as the call to give brain= to: the call the user made
        # (Fragola.scripted sets its own name).
        self._made_by = "ScriptedModel(...)"
        self._agent_scripts: dict[str, AgentScript] = {}  # by SCRIPT_HEADER value
        # One lock for the script, the records and the hang bookkeeping: all cheap sections.
        self._cond = threading.Condition()
        self._call_ids = itertools.count(1)
        self._completion_ids = itertools.count(1)
        self._release_gen = 0
        self._waiters: set[socket.socket] = set()
        self._connections: dict[socket.socket, threading.Thread] = {}
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> ScriptedModel:
        """Start serving on a free loopback port (idempotent); returns ``self``."""
        with self._cond:
            if self._stopping.is_set():
                raise RuntimeError("a stopped ScriptedModel cannot be restarted; make a new one")
            if self._server is None:
                self._server = _Server(self)
                serve = self._server.serve_forever  # polls 20x/s so stop() returns quickly
                self._thread = threading.Thread(target=serve, args=(0.05,), daemon=True)
                self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving: hanging requests are closed unanswered, open connections are closed."""
        with self._cond:
            server, self._server = self._server, None
            self._stopping.set()
        if server is None:
            return
        server.shutdown()
        self.release()
        with self._cond:
            connections = list(self._connections.items())
        for sock, _ in connections:  # wakes handlers blocked reading idle keep-alive sockets
            _shutdown(sock)
        server.server_close()
        if self._thread is not None:
            self._thread.join()
        for _, thread in connections:
            thread.join(timeout=5.0)

    def __enter__(self) -> ScriptedModel:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``; starts the server if needed."""
        self.start()
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_port}/v1"

    def client(self, **kwargs: Any) -> openai.AsyncOpenAI:
        """An ``openai.AsyncOpenAI`` pointed at this model (``max_retries=0`` unless given)."""
        import openai  # only this convenience needs the SDK

        kwargs.setdefault("base_url", self.base_url)
        kwargs.setdefault("api_key", "scripted-key")
        kwargs.setdefault("max_retries", 0)
        return openai.AsyncOpenAI(**kwargs)

    def push(self, *items: ScriptEntry) -> None:
        """Append entries to the script."""
        with self._cond:
            self._script.extend(items)

    @property
    def pending(self) -> int:
        """How many script entries have not been consumed yet."""
        with self._cond:
            return len(self._script)

    @property
    def agent_scripts(self) -> int:
        """How many scripts were added with ``add_script`` (each answers one agent's requests
        in order, from this process)."""
        with self._cond:
            return len(self._agent_scripts)

    def release(self) -> None:
        """Release every request that is hanging (or about to hang) on a ``hang()`` item."""
        with self._cond:
            self._release_gen += 1
            for waker in self._waiters:  # still open: _hang closes it only after discarding
                waker.send(b"x")
            self._waiters.clear()

    def wait_for_requests(self, n: int, timeout: float = 5.0) -> bool:
        """Block until ``n`` chat requests have arrived (False on timeout). From async code use
        ``await asyncio.to_thread(model.wait_for_requests, n)`` so the event loop keeps going."""
        with self._cond:
            return self._cond.wait_for(lambda: len(self.requests) >= n, timeout)

    def _track(self, sock: socket.socket, add: bool) -> None:
        with self._cond:
            if not add:
                self._connections.pop(sock, None)
            elif self._stopping.is_set():  # accepted while stopping: let the handler see EOF
                _shutdown(sock)
            else:
                self._connections[sock] = threading.current_thread()

    def _next(self, handler: wire.Handler, request: dict[str, Any]) -> tuple[ScriptEntry, int]:
        entry: ScriptEntry | None
        with self._cond:
            self.requests.append(request)
            self.arrived.append(time.monotonic())
            self.targets.append(redact_text(handler.path))
            self.headers.append({name.lower(): _recorded(name, value)
                                 for name, value in handler.headers.items()})
            gen = self._release_gen
            own = self._agent_scripts.get(handler.headers.get(SCRIPT_HEADER) or "")
            entry = refusal(request, self.refuse) if self.refuse else None
            if entry is None and own is None and self._script:
                entry = self._script.popleft()
                self._taken += 1
            taken = self._taken
            self._cond.notify_all()
        if entry is None and own is not None:
            entry = own.next_entry()
        elif entry is None and self.brain is not None:
            entry = self.brain
        elif entry is None:
            entry = run_out("the scripted model", taken, self._made_by)
        return entry, gen

    def add_script(
        self, key: str, agent_name: str, entries: Iterable[ScriptEntry], *,
        brain: Brain | None = None,
    ) -> AgentScript:
        """Answer the requests whose ``x-fragola-script`` header is ``key`` from ``entries``
        (then ``brain``, if given); a script already under ``key`` is replaced."""
        script = AgentScript(agent_name, entries, brain=brain)
        with self._cond:
            self._agent_scripts[key] = script
        return script

    def _chat(self, handler: wire.Handler, request: dict[str, Any]) -> None:
        entry, gen = self._next(handler, request)
        self._answer(handler, request, resolve(entry, request), gen)

    def _answer(self, handler: wire.Handler, request: dict[str, Any], item: Item, gen: int) -> None:
        if isinstance(item, (Reply, ToolCalls)):
            self._complete(handler, request, item)
        elif isinstance(item, Fail):
            body = wire.error_body(item.message, item.type, item.code)
            handler.send(item.status, wire.dumps(body), item.headers)
        elif isinstance(item, Raw):
            handler.send(item.status, item.body, item.headers)
        elif isinstance(item, Drop):
            handler.close_connection = True
        elif isinstance(item, Recorded):
            self._replay(handler, item)
        else:
            outcome = self._hang(handler, item, gen)
            if outcome in ("stopped", "gone"):
                handler.close_connection = True
                return
            then = item.then or fail(504, f"scripted model: hang {outcome}", type="timeout")
            with self._cond:  # a hang inside `then` waits for the next release()
                gen = self._release_gen
            self._answer(handler, request, resolve(then, request), gen)

    def _replay(self, handler: wire.Handler, item: Recorded) -> None:
        """Send a recorded response as it came: its body, or its chunks in order."""
        if item.chunks is None:
            headers = item.headers
            if item.text is not None:
                body = item.text.encode()
                if not any(name.lower() == "content-type" for name, _ in headers):
                    headers = (("Content-Type", "text/plain; charset=utf-8"), *headers)
            else:
                body = wire.dumps(item.body)
                if item.status == 200 and isinstance(item.body, dict):
                    with self._cond:
                        self.responses.append(item.body)
            handler.send(item.status, body, headers)
            return
        with self._cond:
            self.chunks.extend(item.chunks)
        if not item.done:
            handler.close_connection = True  # what the client saw: the stream cut off
        handler.stream(wire.sse_frames(item.chunks, done=item.done), self.chunk_delay,
                       self._stopping)

    def _hang(self, handler: wire.Handler, item: Hang, gen: int) -> str:
        """Wait for release/stop, the deadline or the client hanging up; say which."""
        deadline = None if item.seconds is None else time.monotonic() + item.seconds
        with self._cond:
            if self._release_gen != gen:  # release() ran after this request arrived
                return "stopped" if self._stopping.is_set() else "released"
            wake_r, wake_w = socket.socketpair()
            self._waiters.add(wake_w)
        try:
            poller = select.poll()  # poll, not select: no FD_SETSIZE limit with many sockets
            poller.register(wake_r, select.POLLIN)
            poller.register(handler.connection, select.POLLIN)
            while True:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                events = dict(poller.poll(None if left is None else left * 1000))
                if not events:
                    return "timed out"
                if wake_r.fileno() in events:
                    return "stopped" if self._stopping.is_set() else "released"
                try:  # the connection turned readable: EOF means the client went away
                    if not handler.connection.recv(1, socket.MSG_PEEK):
                        return "gone"
                except OSError:
                    return "gone"
                poller.unregister(handler.connection)
        finally:
            with self._cond:
                self._waiters.discard(wake_w)
            wake_r.close()
            wake_w.close()

    def _complete(
        self, handler: wire.Handler, request: dict[str, Any], item: Reply | ToolCalls
    ) -> None:
        if isinstance(item, Reply):
            answer = wire.Answer(item.text)
        else:
            calls = tuple(
                (c.id or f"call_{next(self._call_ids)}", c.name, c.arguments) for c in item.calls
            )
            answer = wire.Answer(item.content, calls)
        model = request.get("model")
        meta: dict[str, Any] = {
            "id": f"chatcmpl-{next(self._completion_ids)}",
            "created": int(time.time()),
            "model": model if isinstance(model, str) and model else self.model_name,
        }
        usage = wire.usage(request, answer)
        if request.get("stream") is not True or item.ignore_stream:
            body = wire.completion(answer, usage=usage, **meta)
            self.responses.append(body)
            handler.send(200, wire.dumps(body))
            return
        options = request.get("stream_options")
        include_usage = isinstance(options, dict) and options.get("include_usage") is True
        chunks = wire.stream_chunks(
            answer, chunk_size=self.chunk_size, usage=usage if include_usage else None, **meta
        )
        if item.stream_cut_after is not None:
            chunks = chunks[: item.stream_cut_after]
        with self._cond:
            self.chunks.extend(chunks)
        frames = [wire.chunk_frame(b"data: %s\n\n" % wire.dumps(c)) for c in chunks]
        if item.stream_cut_after is None:
            frames[-1] += wire.chunk_frame(wire.DONE) + wire.LAST_CHUNK
        else:
            # Closing without the terminating chunk is what a network cut looks like.
            handler.close_connection = True
        handler.stream(frames, self.chunk_delay, self._stopping)


def _recorded(name: str, value: str) -> str:
    # An API key sent here, by mistake or not, is not kept: fragola_nb's one rule decides.
    return hidden(value) if is_secret_name(name) else redact_text(value)

"""MCP tools: the tools of an MCP server as fragola_nb tools, with the official ``mcp`` SDK.

>>> server = await mcp_tools(["python", "weather_server.py"])         # doctest: +SKIP
>>> agent = fragola.agent(name="forecaster", tools=server.tools)       # doctest: +SKIP
>>> await agent.user_message("Weather in Lyon?")                      # doctest: +SKIP
>>> server.remove_from(agent)      # exactly those tools leave the agent  # doctest: +SKIP
>>> await server.aclose()          # or server.close(), or `async with`  # doctest: +SKIP

``server`` is a stdio command (a list of strings, or ``mcp.StdioServerParameters``) or a
Streamable HTTP URL (``headers=`` are sent with every request). The tools are listed page by
page (``nextCursor``); each keeps the remote name (after ``prefix``), description (a default
when empty) and ``inputSchema``, which checks the model's arguments before the call is sent.
A result's text is the tool's result; images, audio and resources are summarised in words.

A tool that answers ``isError``, a server that dies mid-call or does not answer within
``timeout`` seconds: the model reads what happened as the tool's result (an ``MCPToolError``
raised by the handler, turned into ``"Error: the tool 'x' raised MCPToolError: ..."`` by the
run loop) and the run goes on. Connecting fails with one line: ``MCPConnectionError``; a
remote tool the model cannot be offered (a broken schema, a name OpenAI refuses) fails with
``InvalidToolDefinition`` naming it (``filter=`` can leave it out).

Where the connection lives: the ``mcp`` SDK's connection is made of anyio tasks that must
be entered, used and closed on one event loop, from one task. It is held by one task on
fragola_nb's own background loop (the loop ``run_sync`` and ``%%fragola`` run turns on,
always running in its thread), and every call is handed to that loop from whichever loop the
agent's turn runs on: a kernel's loop (top-level ``await``), ``asyncio.run`` in a script, or
the background loop itself. A kernel's loop would not do: it does not run while a cell waits
in ``run_sync``, so a call made from there would wait for ever.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import os
import shlex
import sys
import weakref
from collections.abc import Awaitable, Callable, Collection, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

from fragola_nb.base.errors import BadUsage, FragolaError, InvalidToolDefinition, exception_text
from fragola_nb.base.redact import credentials_in, redact_exception, redact_text
from fragola_nb.base.sync import background_loop
from fragola_nb.core.tools import TOOL_NAME, Tool, tool

if TYPE_CHECKING:
    from mcp import Client
    from mcp.types import CallToolResult, ContentBlock
    from mcp.types import Tool as RemoteTool

    from fragola_nb.core.agent import Agent

__all__ = ["MCPConnection", "MCPConnectionError", "MCPToolError", "mcp_tools"]

T = TypeVar("T")

DEFAULT_DESCRIPTION = "A tool of the MCP server {server}."
CLOSE_SECONDS = 10.0
"""How long ``close()`` waits for the connection to end cleanly before cancelling it."""


class MCPConnectionError(FragolaError):
    """The MCP server could not be started, reached or listed; nothing is left open."""


class MCPToolError(FragolaError):
    """An MCP tool call failed: the tool answered ``isError``, or its server died, closed or
    did not answer in time. Raised by the tool's handler, so the model reads it as the
    tool's result and the run goes on."""


async def mcp_tools(
    server: str | Sequence[str] | Any,
    *,
    headers: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
    filter: Callable[[RemoteTool], bool] | None = None,
    prefix: str = "",
    require_approval: bool | Collection[str] = False,
    timeout: float | None = 60.0,
    connect_timeout: float = 30.0,
) -> MCPConnection:
    """Connect to an MCP server and return its tools, held by an ``MCPConnection``.

    - ``server``: ``["python", "server.py"]`` (or a ``StdioServerParameters``), or
      ``"http://127.0.0.1:8000/mcp"``; ``headers=`` go with an URL's requests, ``env=`` to a
      command (over the default environment).
    - ``filter(remote_tool) -> bool``: keep only the tools it accepts (it sees the ``mcp``
      ``Tool``: ``name``, ``description``, ``input_schema``); applied before anything is
      checked, so it can leave out a tool whose schema is broken.
    - ``prefix``: put before each name the model sees (``"files_"``); the server is called
      with its own name.
    - ``require_approval``: ``True`` for all, or the names (remote or prefixed) of those a
      person must approve; the panel shows them like any other tool's calls.
    - ``timeout``: seconds a call may take (None: no limit); ``connect_timeout``: for the
      connection and the listing.
    """
    target, label = _target(server, headers=headers, env=env)
    link = _Link(target, headers=dict(headers or {}), label=label, timeout=timeout)
    _hook_exit()
    await _on_home(link.open(connect_timeout))
    try:
        remote = await _on_home(link.list_tools(connect_timeout))
        kept = [item for item in remote if filter is None or filter(item)]
        tools = _build(kept, link, prefix=prefix, require_approval=require_approval)
    except BaseException:
        await _on_home(link.close())
        raise
    return MCPConnection(link, tools)


class MCPConnection:
    """The connection to one MCP server and the tools made from its tools.

    ``tools`` (a tuple; also ``iter(server)``) goes to ``fragola.agent(tools=...)`` or
    ``agent.context.update_tools``; ``remove_from(agent)`` takes exactly these out again;
    ``close()``/``await aclose()`` (or ``async with``) ends the connection (a stdio server's
    process with it). A call after the close is answered with an error the model reads.
    """

    def __init__(self, link: _Link, tools: Sequence[Tool]) -> None:
        self._link = link
        self.tools: tuple[Tool, ...] = tuple(tools)

    @property
    def names(self) -> list[str]:
        """The tools' names, as the model sees them."""
        return [item.name for item in self.tools]

    @property
    def closed(self) -> bool:
        return self._link.closed

    def __iter__(self) -> Iterator[Tool]:
        return iter(self.tools)

    def __len__(self) -> int:
        return len(self.tools)

    def add_to(self, *agents: Agent) -> None:
        """Offer these tools to each agent too (after its own; a name clash is an error)."""
        for agent in agents:
            kept = [t for t in agent.options.tools if t not in self.tools]
            agent.context.update_tools([*kept, *self.tools])

    def remove_from(self, *agents: Agent) -> None:
        """Take exactly these tools out of each agent's tools (a fork's list too: give it)."""
        for agent in agents:
            agent.context.update_tools(t for t in agent.options.tools if t not in self.tools)

    async def aclose(self) -> None:
        """End the connection; safe to call again."""
        await _on_home(self._link.close())

    def close(self) -> None:
        """``aclose()`` from synchronous code (a notebook cell, a script)."""
        from fragola_nb.base.sync import run_sync

        run_sync(self.aclose())

    async def __aenter__(self) -> MCPConnection:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        link = self._link
        return (f"MCPConnection(name={link.name!r}, server={link.where!r}, {state}, "
                f"tools={self.names!r})")

    @property
    def name(self) -> str | None:
        """The name the server gave itself (``serverInfo``), if any."""
        return self._link.name


class _Link:
    """The ``mcp`` client, entered and left by one task on fragola_nb's background loop.

    Every method runs on that loop (``_on_home``)."""

    def __init__(self, target: Any, *, headers: dict[str, str], label: str,
                 timeout: float | None) -> None:
        self.target = target
        self.headers = headers
        self.where = label
        """The command or URL, credentials redacted."""
        self.name: str | None = None
        """The name the server gave itself when it connected, if any."""
        self.timeout = timeout
        self.closed = False
        self._client: Client | None = None
        self._holder: asyncio.Task[None] | None = None
        self._closing: asyncio.Event | None = None
        self._lost: str | None = None

    @property
    def known(self) -> set[str]:
        """The credentials this link sends (headers, a command's environment under a
        credential's name): a server's error may quote them back."""
        return credentials_in(self.headers, getattr(self.target, "env", None) or {})

    def _hidden(self, exc: BaseException) -> str:
        """``exc`` redacted in place (it is chained into ours), as one line."""
        redact_exception(exc, self.known)
        return _reason(exc, self.known)

    @property
    def label(self) -> str:
        """How messages name the server: ``'notes'`` once it said its name, else where it
        is (``python notes_server.py``, an URL)."""
        return repr(self.name) if self.name else self.where

    async def open(self, connect_timeout: float) -> None:
        _OPEN.add(self)
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._closing = asyncio.Event()
        # Read once, whoever waits: an outcome that comes after open() gave up (a timeout)
        # is not reported as "never retrieved".
        ready.add_done_callback(lambda done: done.cancelled() or done.exception())
        self._holder = asyncio.get_running_loop().create_task(self._hold(ready))
        try:
            await asyncio.wait_for(asyncio.shield(ready), connect_timeout)
        except TimeoutError:
            await self.close()
            raise MCPConnectionError(
                f"the MCP server {self.label} did not answer within {connect_timeout} s"
            ) from None
        except BaseException as exc:
            await self.close()
            if isinstance(exc, Exception):
                raise MCPConnectionError(
                    f"could not connect to the MCP server {self.label}: {self._hidden(exc)}"
                ) from exc
            raise

    async def _hold(self, ready: asyncio.Future[None]) -> None:
        """Enter the client, wait for ``close()``, leave it: all in this one task, as anyio
        requires of the SDK's task groups."""
        from mcp import Client
        from mcp.client.stdio import stdio_client

        assert self._closing is not None
        try:
            async with contextlib.AsyncExitStack() as stack:
                transport = self.target
                if isinstance(transport, str):
                    transport = await stack.enter_async_context(_http_transport(
                        transport, self.headers))
                else:
                    transport = stdio_client(transport, errlog=_server_errlog(stack))
                client = Client(transport, cache=None, read_timeout_seconds=self.timeout)
                self._client = await stack.enter_async_context(client)
                info = self._client.server_info
                if info is not None and info.name:
                    self.name = redact_text(info.name)[:60]
                ready.set_result(None)
                await self._closing.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else
                                    MCPConnectionError(exception_text(exc)))
            elif isinstance(exc, Exception):
                self._lost = self._hidden(exc)  # e.g. the server died: calls say so
            if not isinstance(exc, Exception):
                raise
        finally:
            self._client = None

    async def list_tools(self, seconds: float) -> list[RemoteTool]:
        client = self._connected()
        found: list[RemoteTool] = []
        cursor: str | None = None
        seen: set[str] = set()
        try:
            async with asyncio.timeout(seconds):
                while True:
                    page = await client.list_tools(cursor=cursor)
                    found.extend(page.tools)
                    cursor = page.next_cursor
                    if cursor is None:
                        return found
                    if cursor in seen:  # a server that pages in a circle
                        raise MCPConnectionError(
                            f"the MCP server {self.label} repeated the cursor {cursor!r} "
                            "while listing its tools")
                    seen.add(cursor)
        except TimeoutError:
            raise MCPConnectionError(
                f"the MCP server {self.label} did not list its tools within {seconds} s"
            ) from None
        except MCPConnectionError:
            raise
        except Exception as exc:
            raise MCPConnectionError(
                f"the MCP server {self.label} could not list its tools: {self._hidden(exc)}"
            ) from exc

    async def call(self, name: str, arguments: dict[str, Any]) -> str:
        client = self._connected(calling=name)
        try:
            result = await client.call_tool(name, arguments)
        except Exception as exc:
            raise MCPToolError(self._failure(name, exc)) from exc
        text = result_text(result)
        if result.is_error:
            said = redact_text(text, self.known)  # a server may quote the headers it got
            raise MCPToolError(f"{name} failed on the MCP server {self.label}: {said}")
        return text

    def _failure(self, name: str, exc: Exception) -> str:
        said = self._hidden(exc)
        if "timed out" in said:
            return (f"the MCP server {self.label} did not answer {name} within "
                    f"{self.timeout} s (the call may still run there)")
        if "closed" in said.lower() or self._lost is not None:
            return (f"the connection to the MCP server {self.label} was lost during {name} "
                    f"({said}); the server may have stopped")
        return f"{name} could not be called on the MCP server {self.label}: {said}"

    def _connected(self, calling: str | None = None) -> Client:
        if self._client is not None:
            return self._client
        doing = f"{calling} cannot run: " if calling else ""
        if self.closed:
            error: type[FragolaError] = MCPToolError if calling else MCPConnectionError
            raise error(f"{doing}the connection to the MCP server {self.label} is closed")
        lost = f" ({self._lost})" if self._lost else ""
        raise (MCPToolError if calling else MCPConnectionError)(
            f"{doing}the connection to the MCP server {self.label} was lost{lost}")

    async def close(self) -> None:
        self.closed = True
        _OPEN.discard(self)
        holder = self._holder
        if holder is None or holder.done():
            return
        if self._client is None:
            holder.cancel()  # still connecting: nothing to leave cleanly
        elif self._closing is not None:
            self._closing.set()
        done, _ = await asyncio.wait([holder], timeout=CLOSE_SECONDS)
        if not done:  # a server that does not let go: cancel the leaving too
            holder.cancel()
            await asyncio.wait([holder])
        if not holder.cancelled():
            holder.exception()  # read: a failure while leaving is not reported later


_OPEN: weakref.WeakSet[_Link] = weakref.WeakSet()
"""The links not closed yet, closed at exit by ``_close_at_exit``."""
_exit_hook = False


def _close_at_exit() -> None:
    """Close what a script or kernel left open, each from its own task, before the
    background loop ends. Left to the loop's end, the SDK's ``stdio_client`` generator would
    be closed by ``shutdown_asyncgens`` from another task: anyio then prints some 25 lines
    of "Attempted to exit cancel scope in a different task", and the server may be left
    running. Registered after the background loop's own exit hook, so it runs first."""
    links = list(_OPEN)
    loop = background_loop()
    if not links or not loop.is_running():
        return
    closing = asyncio.run_coroutine_threadsafe(_close_all(links), loop)
    with contextlib.suppress(Exception):
        closing.result(CLOSE_SECONDS + 5)


async def _close_all(links: list[_Link]) -> None:
    await asyncio.gather(*(link.close() for link in links), return_exceptions=True)


def _hook_exit() -> None:
    global _exit_hook
    background_loop()  # its own exit hook first: atexit runs the last registered first
    if not _exit_hook:
        atexit.register(_close_at_exit)
        _exit_hook = True


@contextlib.asynccontextmanager
async def _http_transport(url: str, headers: dict[str, str]) -> Any:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    # The SDK's own defaults (30 s to connect, 300 s to read a stream), with the headers.
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http:
        yield streamable_http_client(url, http_client=http)


def _server_errlog(stack: contextlib.ExitStack | contextlib.AsyncExitStack) -> TextIO:
    """Where a stdio server's stderr goes: the process's own stderr. In a kernel,
    ``sys.stderr`` writes to the cell and has no file descriptor for a child process to
    inherit; ``sys.__stderr__`` is the terminal the kernel runs in (or nothing at all)."""
    for stream in (sys.stderr, sys.__stderr__):
        try:
            if stream is not None:
                stream.fileno()
                return stream
        except (OSError, ValueError, AttributeError):
            continue
    return stack.enter_context(open(os.devnull, "w"))  # closed by the stack


def _target(server: Any, *, headers: Mapping[str, str] | None,
            env: Mapping[str, str] | None) -> tuple[Any, str]:
    """What ``mcp.Client`` connects to, and how the server is named in messages (without
    what looks like a credential)."""
    try:
        from mcp import StdioServerParameters
    except ImportError as exc:
        raise BadUsage(
            "MCP tools need the mcp package: pip install 'fragola_nb[mcp]'") from exc
    if isinstance(server, str):
        if not server.startswith(("http://", "https://")):
            raise BadUsage(
                f"server must be a Streamable HTTP URL (http:// or https://) or a command as a "
                f"list of strings such as ['python', 'server.py'], got {redact_text(server)!r}")
        if env:
            raise BadUsage("env= is for a command the MCP server is started with, not an URL")
        return server, redact_text(server)
    if headers:
        raise BadUsage("headers= are for an MCP server reached by URL, not a command")
    if isinstance(server, StdioServerParameters):
        if env:
            server = server.model_copy(update={"env": {**(server.env or {}), **env}})
        return server, _command_label([server.command, *server.args])
    if (isinstance(server, Sequence) and server
            and all(isinstance(part, str) for part in server)):
        params = StdioServerParameters(command=server[0], args=list(server[1:]),
                                       env=dict(env) if env else None)
        return params, _command_label(list(server))
    raise BadUsage(
        "server must be a command (a non-empty list of strings, or mcp.StdioServerParameters) "
        f"or a Streamable HTTP URL, got {type(server).__name__}")


def _command_label(parts: list[str]) -> str:
    return redact_text(shlex.join(parts))


def _build(remote: list[RemoteTool], link: _Link, *, prefix: str,
           require_approval: bool | Collection[str]) -> list[Tool]:
    if isinstance(require_approval, bool):
        wanted = None
    elif isinstance(require_approval, Collection) and not isinstance(require_approval, str):
        wanted = set(require_approval)
        known = {item.name for item in remote} | {prefix + item.name for item in remote}
        unknown = sorted(wanted - known)
        if unknown:
            raise BadUsage(f"require_approval names tools the MCP server {link.label} does "
                           f"not offer: {', '.join(unknown)}")
    else:
        raise BadUsage("require_approval must be True/False or a collection of tool names")
    made: list[Tool] = []
    for item in remote:
        name = prefix + item.name
        where = f"the tool {item.name!r} of the MCP server {link.label}"
        if not TOOL_NAME.match(name):
            raise InvalidToolDefinition(
                f"{where} cannot be offered to the model as {name!r}: a name is 1 to 64 "
                "letters, digits, '_' or '-' (leave it out with filter=)")
        try:
            made.append(tool(
                name=name,
                description=item.description or DEFAULT_DESCRIPTION.format(server=link.label),
                schema=dict(item.input_schema),
                handler=_handler(link, item.name),
                require_approval=(bool(require_approval) if wanted is None
                                  else item.name in wanted or name in wanted),
                validate=True,
            ))
        except InvalidToolDefinition as exc:
            raise InvalidToolDefinition(
                f"{where}: {exc} (leave it out with filter=)") from exc
    return made


def _handler(link: _Link, remote_name: str) -> Callable[[dict[str, Any]], Awaitable[str]]:
    async def call(params: dict[str, Any]) -> str:
        return await _on_home(link.call(remote_name, params))

    return call


def result_text(result: CallToolResult) -> str:
    """A call's result as the model reads it: the text parts as they are, joined by blank
    lines; anything else in a few words. No content: the structured content as JSON."""
    parts = [_content_text(block) for block in result.content]
    if not parts and result.structured_content is not None:
        import json

        return json.dumps(result.structured_content, ensure_ascii=False, default=str)
    return "\n\n".join(parts) if parts else "(no content)"


def _content_text(block: ContentBlock) -> str:
    kind = block.type
    if kind == "text":
        return str(getattr(block, "text", ""))
    if kind in ("image", "audio"):
        data = str(getattr(block, "data", ""))
        size = len(data) * 3 // 4 - data[-2:].count("=")  # base64's length, decoded
        return f"[{kind}: {getattr(block, 'mime_type', '?')}, about {size} bytes, not shown]"
    if kind == "resource":
        resource = getattr(block, "resource", None)
        uri = getattr(resource, "uri", "?")
        text = getattr(resource, "text", None)
        if isinstance(text, str):
            return f"[resource {uri}]\n{text}"
        return f"[resource {uri}: {getattr(resource, 'mime_type', None) or 'binary'}, not shown]"
    if kind == "resource_link":
        return f"[resource link: {getattr(block, 'uri', '?')} ({getattr(block, 'name', '')})]"
    return f"[{kind} content, not shown]"


def _reason(exc: BaseException, known: set[str] | None = None) -> str:
    """One line for an exception, the first leaf of an exception group (anyio's)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return redact_text(exception_text(exc), known or ())


async def _on_home(awaitable: Awaitable[T]) -> T:
    """Run ``awaitable`` on fragola_nb's background loop, from whichever loop this is;
    cancelling the caller cancels it there."""
    home = background_loop()
    if asyncio.get_running_loop() is home:
        return await awaitable

    async def wrapped() -> T:
        return await awaitable

    future: concurrent.futures.Future[T] = asyncio.run_coroutine_threadsafe(wrapped(), home)
    return await asyncio.wrap_future(future)

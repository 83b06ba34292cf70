"""Presets as hooks (``from fragola_nb import preset, mcp_hook``):
``preset(guardrail | orchestrate, ...)`` (any function that puts something on an agent and
returns a handle with ``remove()``) and
``mcp_hook(server, ...)``, an MCP server's tools as a hook.

>>> agent.use(mcp_hook(["python", "server.py"]), name="files")     # doctest: +SKIP

The hook machinery itself (``agent.use``, ``remove_hook``, ``dispose``) is the core's
(``fragola_nb.core.hooks``); an MCP connection is this layer's (``fragola_nb.presets.mcptools``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from fragola_nb.core.hooks import Hook, hook_name, preset
from fragola_nb.presets.mcptools import mcp_tools

if TYPE_CHECKING:
    from fragola_nb.core.agent import Agent

__all__ = ["Hook", "hook_name", "mcp_hook", "preset"]


def mcp_hook(server: Any, **options: Any) -> Hook:
    """An MCP server's tools as a hook: ``agent.use(mcp_hook(["python", "server.py"]),
    name="files")`` connects (as a task: a turn waits for it), offers the tools, and on
    ``remove_hook`` (or ``dispose()``) takes them off at once and closes the connection
    (the server process it started ends). ``options`` are ``mcp_tools``'s."""

    async def hook(agent: Agent) -> Callable[[], Any]:
        connection = await mcp_tools(server, **options)
        connection.add_to(agent)

        def dispose() -> Awaitable[None]:
            # The tools go at once (a turn started right after remove_hook must not offer
            # them); closing the connection is awaited after, as a task.
            connection.remove_from(agent)
            return connection.aclose()

        return dispose

    hook.__qualname__ = "mcp_hook"
    return hook

"""fragola_nb: the Fragola agent SDK in Python, with a Jupyter layer to watch and steer agents.

The core (this package's top level) imports no Jupyter module; the notebook layer lives in
``fragola_nb.notebook`` and is loaded by ``%load_ext fragola_nb``.
"""

from __future__ import annotations

import importlib
import typing

from ._version import __version__ as __version__  # re-exported: the one version
from .agent import Agent
from .context import AgentContext, AgentOptions
from .errors import (
    BadUsage,
    FragolaError,
    InvalidArguments,
    InvalidListenerResult,
    InvalidToolDefinition,
    JsonModeError,
    ListenerError,
    ModelConnectionError,
    ModelError,
    ModelHTTPError,
    ModelResponseError,
    ModelTimeout,
    SessionError,
    TurnRefused,
)
from .events import EVENT_NAMES, Subscription, ToolCallConfig
from .fragola import Fragola
from .payloads import ToolCallPayload
from .state import AgentState, Decision, PendingCall
from .stores import Store, create_store
from .sync import run_sync
from .tools import Tool, tool

if typing.TYPE_CHECKING:
    from .branchdiff import BranchDiff, diff
    from .experiments import BatchResult, Comparison
    from .experiments.raybackend import RayBackend
    from .guardrails import Guardrail, GuardrailRejected, Rejection, guardrail
    from .jsonmode import JsonResult
    from .mcptools import MCPConnection, MCPConnectionError, MCPToolError, mcp_tools
    from .orchestration import (
        Orchestration,
        OrchestrationError,
        OrchestrationMessage,
        Veto,
        orchestrate,
    )
    from .sessions import (
        Session,
        export_html,
        export_markdown,
        export_tree_html,
        export_tree_markdown,
        load_session,
        save_session,
    )
    from .tracing import instrument, tracing_hook, uninstrument
    from .usage import Usage, tree_usage

# Imported on first use (module __getattr__, PEP 562): most programs never save a session,
# export or ask for JSON, and those modules made up a good part of what ``import fragola_nb``
# adds to ``import openai`` (bench/import_time.py; tests/test_surface.py keeps them lazy).
_LAZY = {
    "BatchResult": "experiments",
    "Comparison": "experiments",
    "JsonResult": "jsonmode",
    "Session": "sessions",
    "export_html": "sessions",
    "export_markdown": "sessions",
    "export_tree_html": "sessions",
    "export_tree_markdown": "sessions",
    "load_session": "sessions",
    "save_session": "sessions",
    "Usage": "usage",
    "tree_usage": "usage",
    "BranchDiff": "branchdiff",
    "diff": "branchdiff",
    # The rest of the Fragola system: optional modules (mcp_tools and instrument import their
    # extras, mcp and opentelemetry, only when called).
    "Guardrail": "guardrails",
    "GuardrailRejected": "guardrails",
    "Rejection": "guardrails",
    "guardrail": "guardrails",
    "MCPConnection": "mcptools",
    "MCPConnectionError": "mcptools",
    "MCPToolError": "mcptools",
    "mcp_tools": "mcptools",
    "Orchestration": "orchestration",
    "OrchestrationError": "orchestration",
    "OrchestrationMessage": "orchestration",
    "Veto": "orchestration",
    "orchestrate": "orchestration",
    "instrument": "tracing",
    "tracing_hook": "tracing",
    "uninstrument": "tracing",
    # agent.batch(..., backend=RayBackend(...)): imports ray only when a batch uses it.
    "RayBackend": "experiments.raybackend",
}

__all__ = [
    "EVENT_NAMES",
    "Agent",
    "AgentContext",
    "AgentOptions",
    "AgentState",
    "BadUsage",
    "BatchResult",
    "BranchDiff",
    "Comparison",
    "Decision",
    "Fragola",
    "FragolaError",
    "Guardrail",
    "GuardrailRejected",
    "InvalidArguments",
    "InvalidListenerResult",
    "InvalidToolDefinition",
    "JsonModeError",
    "JsonResult",
    "ListenerError",
    "MCPConnection",
    "MCPConnectionError",
    "MCPToolError",
    "ModelConnectionError",
    "ModelError",
    "ModelHTTPError",
    "ModelResponseError",
    "ModelTimeout",
    "Orchestration",
    "OrchestrationError",
    "OrchestrationMessage",
    "PendingCall",
    "RayBackend",
    "Rejection",
    "Session",
    "SessionError",
    "Store",
    "Subscription",
    "Tool",
    "ToolCallConfig",
    "ToolCallPayload",
    "TurnRefused",
    "Usage",
    "Veto",
    "create_store",
    "diff",
    "export_html",
    "export_markdown",
    "export_tree_html",
    "export_tree_markdown",
    "guardrail",
    "instrument",
    "load_session",
    "mcp_tools",
    "orchestrate",
    "run_sync",
    "save_session",
    "tool",
    "tracing_hook",
    "tree_usage",
    "uninstrument",
]


def __getattr__(name: str) -> typing.Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # once: later lookups do not come here
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


def load_ipython_extension(ipython: object) -> None:
    """``%load_ext fragola_nb``: the notebook layer, imported only here."""
    from .notebook import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython: object) -> None:
    from .notebook import unload_ipython_extension as unload

    unload(ipython)

"""fragola_nb: the Fragola agent SDK in Python, with a Jupyter layer to watch and steer agents.

The package is built in layers, each importing only the layers below it (docs/architecture.md;
``.importlinter`` checks it): ``base`` (errors, redaction, safe text) < ``models`` (the model
client, the scripted model, recording, the local model) < ``core`` (Fragola, Agent, the run loop)
< ``sessions`` and ``presets`` (guardrails, orchestration, MCP tools, tracing) < ``experiments``
(compare, batch, Ray) < ``notebook`` (the Jupyter layer, loaded by
``%load_ext fragola_nb``) < this face, which names every public name and imports each one
when it is first used.
"""

from __future__ import annotations

import importlib
import types
import typing

from fragola_nb._version import __version__ as __version__  # re-exported: the one version

if typing.TYPE_CHECKING:
    from fragola_nb.base.errors import (
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
    from fragola_nb.base.sync import run_sync
    from fragola_nb.core.agent import Agent
    from fragola_nb.core.branchdiff import BranchDiff, diff
    from fragola_nb.core.context import AgentContext, AgentOptions
    from fragola_nb.core.events import EVENT_NAMES, Subscription, ToolCallConfig
    from fragola_nb.core.fragola import Fragola
    from fragola_nb.core.jsonmode import JsonResult
    from fragola_nb.core.limits import Budget
    from fragola_nb.core.payloads import ToolCallPayload
    from fragola_nb.core.state import AgentState, Decision, PendingCall
    from fragola_nb.core.stores import Store, create_store
    from fragola_nb.core.tools import Tool, tool
    from fragola_nb.core.usage import Usage, tree_usage
    from fragola_nb.experiments import BatchResult, Comparison
    from fragola_nb.experiments.evaluate.evaluation import Evaluation
    from fragola_nb.experiments.evaluate.verdicts import Versus
    from fragola_nb.experiments.graders.base import Grade, GradedRow
    from fragola_nb.experiments.ray.backend import RayBackend
    from fragola_nb.experiments.simuser import SimulatedUser
    from fragola_nb.models.client.ratelimit import RateLimit
    from fragola_nb.presets.guardrails import Guardrail, GuardrailRejected, Rejection, guardrail
    from fragola_nb.presets.hooks import mcp_hook, preset
    from fragola_nb.presets.mcptools import (
        MCPConnection,
        MCPConnectionError,
        MCPToolError,
        mcp_tools,
    )
    from fragola_nb.presets.orchestration import (
        Orchestration,
        OrchestrationError,
        OrchestrationMessage,
        Veto,
        orchestrate,
    )
    from fragola_nb.presets.tracing import instrument, tracing_hook, uninstrument
    from fragola_nb.sessions import (
        Session,
        export_markdown,
        export_tree_html,
        export_tree_markdown,
        load_session,
        save_session,
    )
    from fragola_nb.sessions.htmlexport import export_html

# Every public name is imported on first use (module __getattr__, PEP 562): ``import
# fragola_nb.base.errors`` runs this file first, and must not load the core with it
# (tests/package/test_layers.py); most programs never save a session, export or ask for JSON,
# and those modules made up a good part of what ``import fragola_nb`` adds to ``import
# openai`` (bench/import_time.py; tests/package/test_surface.py keeps them lazy). The
# TYPE_CHECKING imports above tell type checkers and the docs what each name is.
_LAZY = {
    # The core and what it raises: what nearly every program uses.
    "BadUsage": "base.errors",
    "FragolaError": "base.errors",
    "InvalidArguments": "base.errors",
    "InvalidListenerResult": "base.errors",
    "InvalidToolDefinition": "base.errors",
    "JsonModeError": "base.errors",
    "ListenerError": "base.errors",
    "ModelConnectionError": "base.errors",
    "ModelError": "base.errors",
    "ModelHTTPError": "base.errors",
    "ModelResponseError": "base.errors",
    "ModelTimeout": "base.errors",
    "SessionError": "base.errors",
    "TurnRefused": "base.errors",
    "run_sync": "base.sync",
    "Agent": "core.agent",
    "AgentContext": "core.context",
    "AgentOptions": "core.context",
    "EVENT_NAMES": "core.events",
    "Subscription": "core.events",
    "ToolCallConfig": "core.events",
    "Fragola": "core.fragola",
    "ToolCallPayload": "core.payloads",
    "AgentState": "core.state",
    "Decision": "core.state",
    "PendingCall": "core.state",
    "Store": "core.stores",
    "create_store": "core.stores",
    "Tool": "core.tools",
    "tool": "core.tools",
    "BatchResult": "experiments",
    "Comparison": "experiments",
    "Evaluation": "experiments.evaluate.evaluation",
    "Grade": "experiments.graders.base",
    "GradedRow": "experiments.graders.base",
    "SimulatedUser": "experiments.simuser",
    "Versus": "experiments.evaluate.verdicts",
    "JsonResult": "core.jsonmode",
    "Session": "sessions",
    "export_html": "sessions",
    "export_markdown": "sessions",
    "export_tree_html": "sessions",
    "export_tree_markdown": "sessions",
    "load_session": "sessions",
    "save_session": "sessions",
    "Usage": "core.usage",
    "tree_usage": "core.usage",
    "BranchDiff": "core.branchdiff",
    "diff": "core.branchdiff",
    "Budget": "core.limits",
    "RateLimit": "models.client.ratelimit",
    # The rest of the Fragola system: optional modules (mcp_tools and instrument import their
    # extras, mcp and opentelemetry, only when called).
    "Guardrail": "presets.guardrails",
    "GuardrailRejected": "presets.guardrails",
    "Rejection": "presets.guardrails",
    "guardrail": "presets.guardrails",
    "MCPConnection": "presets.mcptools",
    "MCPConnectionError": "presets.mcptools",
    "MCPToolError": "presets.mcptools",
    "mcp_tools": "presets.mcptools",
    "Orchestration": "presets.orchestration",
    "OrchestrationError": "presets.orchestration",
    "OrchestrationMessage": "presets.orchestration",
    "Veto": "presets.orchestration",
    "orchestrate": "presets.orchestration",
    "mcp_hook": "presets.hooks",
    "preset": "presets.hooks",
    "instrument": "presets.tracing",
    "tracing_hook": "presets.tracing",
    "uninstrument": "presets.tracing",
    # agent.batch(..., backend=RayBackend(...)): imports ray only when a batch uses it.
    "RayBackend": "experiments.ray.backend",
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
    "Budget",
    "Comparison",
    "Decision",
    "Evaluation",
    "Fragola",
    "FragolaError",
    "Grade",
    "GradedRow",
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
    "RateLimit",
    "RayBackend",
    "Rejection",
    "Session",
    "SessionError",
    "SimulatedUser",
    "Store",
    "Subscription",
    "Tool",
    "ToolCallConfig",
    "ToolCallPayload",
    "TurnRefused",
    "Usage",
    "Versus",
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
    "mcp_hook",
    "mcp_tools",
    "orchestrate",
    "preset",
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
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    _face(value, __name__)
    globals()[name] = value  # once: later lookups do not come here
    return value


def _face(value: object, face: str) -> None:
    """Say ``face`` as the module of an exported class or function: what ``help``, reprs and
    tracebacks print is the path users import it from. Pickle (and Ray's cloudpickle) find it
    there too, by ``getattr(face, __qualname__)``; the docs read the source files, not this."""
    if isinstance(value, (type, types.FunctionType)):
        value.__module__ = face


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


def load_ipython_extension(ipython: object) -> None:
    """``%load_ext fragola_nb``: the notebook layer, imported only here."""
    from fragola_nb.notebook import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython: object) -> None:
    from fragola_nb.notebook import unload_ipython_extension as unload

    unload(ipython)

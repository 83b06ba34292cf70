"""Tools: what the model may call, made with ``tool(...)`` or the ``@tool`` decorator.

>>> from pydantic import BaseModel
>>> class Weather(BaseModel):
...     city: str
>>> get_weather = tool(
...     name="get_weather",
...     description="Current weather for a city.",
...     schema=Weather,
...     handler=lambda params, context: f"Sunny in {params.city}",
... )
>>> @tool
... def add(x: int, y: int = 1) -> int:
...     '''Add two numbers.'''
...     return x + y
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, overload

import pydantic

from fragola_nb.base.errors import InvalidToolDefinition
from fragola_nb.core.payloads import ToolCallPayload, unpack
from fragola_nb.core.schemas import SignatureSchema, ToolSchema, parse_docstring, to_schema

if TYPE_CHECKING:
    from fragola_nb.core.context import AgentContext

__all__ = ["Tool", "serialize_result", "tool"]

TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")

Handler = Callable[..., Any]
ApprovalRule = bool | Callable[[Any, "AgentContext"], bool]


@dataclass(frozen=True, eq=False)
class Tool:
    """A tool the model can call. Immutable, so forks share it safely."""

    name: str
    description: str
    schema: ToolSchema = field(repr=False)
    handler: Handler | Literal["dynamic"] = field(repr=False)
    require_approval: ApprovalRule = False
    definition: dict[str, Any] = field(init=False, repr=False)
    _call_style: str = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not TOOL_NAME.match(self.name):
            raise InvalidToolDefinition(
                f"tool name {self.name!r} breaks OpenAI's rule: 1 to 64 characters "
                "of letters, digits, '_' or '-'"
            )
        if not isinstance(self.description, str):
            raise InvalidToolDefinition(f"tool {self.name}: description must be a string")
        if self.handler != "dynamic" and not callable(self.handler):
            raise InvalidToolDefinition(
                f"tool {self.name}: handler must be a function or the string 'dynamic'"
            )
        if not isinstance(self.require_approval, bool) and not callable(self.require_approval):
            raise InvalidToolDefinition(
                f"tool {self.name}: require_approval must be a bool or a function"
            )
        function: dict[str, Any] = {"name": self.name, "parameters": self.schema.parameters}
        if self.description:
            function["description"] = self.description
        object.__setattr__(self, "definition", {"type": "function", "function": function})
        object.__setattr__(self, "_call_style", _call_style(self.handler, self.schema))

    @property
    def is_dynamic(self) -> bool:
        return self.handler == "dynamic"

    @property
    def parameters(self) -> dict[str, Any]:
        """The JSON Schema sent to the model."""
        return self.schema.parameters

    def parse_arguments(self, arguments: dict[str, Any]) -> Any:
        """Validate (where the schema validates) and build what the handler receives."""
        return self.schema.parse(arguments)

    def needs_approval(self, params: Any, context: AgentContext) -> bool:
        rule = self.require_approval
        return bool(rule(params, context)) if callable(rule) else rule

    async def invoke(self, params: Any, context: AgentContext) -> Any:
        """Run the handler, sync or async, with the arguments shaped as it expects."""
        assert callable(self.handler)
        style = self._call_style
        if style == "fields":
            result = self.handler(**_fields(params, self.schema))
        elif style == "fields+context":
            result = self.handler(**_fields(params, self.schema), context=context)
        elif style == "none":
            result = self.handler()
        elif style == "params":
            result = self.handler(params)
        else:
            result = self.handler(params, context)
        if inspect.isawaitable(result):
            result = await result
        return result

    def __repr__(self) -> str:
        kind = "dynamic" if self.is_dynamic else self.schema.kind
        return f"Tool(name={self.name!r}, schema={kind})"


def _fields(params: Any, schema: ToolSchema) -> Any:
    """The arguments a handler taking the schema's fields is called with: ``dict(params)`` (a
    model instance iterates as (field, value)). An instance of the model a ``SignatureSchema``
    made holds its fields alone (no extra, no private attribute), so its ``__dict__`` is that,
    read at once rather than through the model's iterator."""
    if type(params) is getattr(schema, "model", None):
        return params.__dict__
    return dict(params)


def _call_style(handler: Any, schema: ToolSchema) -> str:
    if handler == "dynamic":
        return "dynamic"
    if isinstance(schema, SignatureSchema):
        names = inspect.signature(handler).parameters
        return "fields+context" if "context" in names else "fields"
    try:
        params = inspect.signature(handler).parameters.values()
    except (TypeError, ValueError):
        return "params+context"
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return "params+context"
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return {0: "none", 1: "params"}.get(len(positional), "params+context")


@overload
def tool(fn: Handler, /) -> Tool: ...
@overload
def tool(
    fn: None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    schema: Any = None,
    handler: Handler | Literal["dynamic"] | None = None,
    require_approval: ApprovalRule = False,
    validate: bool = False,
) -> Any: ...


def tool(
    fn: Handler | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    schema: Any = None,
    handler: Handler | Literal["dynamic"] | None = None,
    require_approval: ApprovalRule = False,
    validate: bool = False,
) -> Any:
    """Make a tool.

    ``tool(name=, description=, schema=, handler=)`` follows the docs: ``schema`` is a pydantic
    (v2 or ``pydantic.v1``) model class, a JSON Schema string or dict (checked now, arguments
    not validated unless ``validate=True``), or None for no arguments. ``handler`` is a sync or
    async function of ``(params, context)`` (or fewer arguments), or ``"dynamic"``.

    As a decorator, ``@tool`` or ``@tool(require_approval=True, ...)`` builds the schema from
    the function's signature and docstring; the function is called with keyword arguments
    (and ``context=`` if it has a ``context`` parameter).
    """
    if fn is not None:
        return _from_function(fn, name=name, description=description,
                              require_approval=require_approval)
    if handler is None:
        if schema is not None:
            raise InvalidToolDefinition("tool(...) with a schema needs a handler= (or 'dynamic')")

        def decorate(func: Handler) -> Tool:
            return _from_function(func, name=name, description=description,
                                  require_approval=require_approval)

        return decorate
    if name is None:
        raise InvalidToolDefinition("tool(...) needs a name=")
    return Tool(
        name=name,
        description=description or "",
        schema=to_schema(schema, validate=validate),
        handler=handler,
        require_approval=require_approval,
    )


def _from_function(
    fn: Handler, *, name: str | None, description: str | None, require_approval: ApprovalRule
) -> Tool:
    if not callable(fn):
        raise InvalidToolDefinition("@tool decorates a function")
    tool_name = name or fn.__name__
    summary, _ = parse_docstring(fn.__doc__)
    return Tool(
        name=tool_name,
        description=description if description is not None else summary,
        schema=SignatureSchema(fn, tool_name),
        handler=fn,
        require_approval=require_approval,
    )


def check_tools(tools: Iterable[Tool]) -> tuple[Tool, ...]:
    """A tuple of tools with unique names, or a clear error."""
    out = tuple(tools)
    seen: set[str] = set()
    for item in out:
        if not isinstance(item, Tool):
            raise InvalidToolDefinition(
                f"expected a Tool (made with tool(...) or @tool), got {type(item).__name__}"
            )
        if item.name in seen:
            raise InvalidToolDefinition(f"two tools are named {item.name!r}")
        seen.add(item.name)
    return out


def serialize_result(result: Any) -> str:
    """A tool's result as the model reads it: a string as is, anything else as JSON; a
    ``ToolCallPayload`` as its data, or the one line of its failure."""
    if isinstance(result, ToolCallPayload):
        result = unpack(result, None)[0]
    if isinstance(result, str):
        return result
    return _ENCODER.encode(result)


def _json_default(value: Any) -> Any:
    if isinstance(value, pydantic.BaseModel):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if hasattr(value, "dict") and callable(value.dict):  # pydantic.v1 models
        return value.dict()
    return str(value)


_ENCODER = json.JSONEncoder(default=_json_default, ensure_ascii=False)
"""What ``json.dumps(result, default=_json_default, ensure_ascii=False)`` makes anew for
every call (it keeps no state between calls)."""

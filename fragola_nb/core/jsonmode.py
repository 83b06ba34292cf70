"""``agent.json``: structured output with a pydantic model or a JSON Schema."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import pydantic

from fragola_nb.base.errors import (
    FragolaError,
    InvalidToolDefinition,
    JsonModeError,
    ModelError,
    exception_text,
)
from fragola_nb.core.jsonshapes import FALLBACKS, Shape, check_json_mode, refuses
from fragola_nb.core.run import driver
from fragola_nb.core.run.start import user_message_start
from fragola_nb.core.schemas import is_pydantic_v1_model, json_validator, load_json_schema, parse_v1
from fragola_nb.core.state import AgentState
from fragola_nb.models.client import json_schema_response_format

if TYPE_CHECKING:
    from fragola_nb.core.conversation import Conversation, RunDeps

__all__ = ["JsonResult"]

T = TypeVar("T")


@dataclass(frozen=True)
class JsonResult(Generic[T]):
    """A safe-parse result: ``data`` when ``success``, else ``error`` says why.
    ``json_mode`` is the strategy the answer came by (see ``fragola_nb.core.jsonshapes``)."""

    success: bool
    data: T | None
    error: str | None
    state: AgentState
    json_mode: str = "json_schema"


async def run_json(
    conv: Conversation, message: str, schema: Any, ignore_user_message_events: bool,
    json_mode: str | None = None,
) -> JsonResult[Any]:
    if not isinstance(message, str):
        raise JsonModeError("agent.json(message=...) takes a string")
    # Checked here too: fragola.json_mode is a plain attribute, which one may set by hand.
    deps = conv.deps
    chosen = check_json_mode(deps.fragola.json_mode if json_mode is None else json_mode)
    try:
        validate, response_format = _prepare(schema)
    except (FragolaError, pydantic.PydanticUserError, TypeError, ValueError) as exc:
        # pydantic (a model it cannot describe in JSON Schema) and openai's strict-schema
        # conversion report a broken schema with their own errors: the caller gets ours.
        raise JsonModeError(f"unusable schema for agent.json: {exc}") from exc
    conv.check_can_start(resuming=False)
    model = deps.model
    mode = deps.fragola.json_modes.get(model, "json_schema") if chosen == "auto" else chosen
    about = response_format["json_schema"]
    budget = conv.steps_allowed(None, after_user_message=True)
    start: Any = user_message_start(
        conv, {"role": "user", "content": message}, events=not ignore_user_message_events
    )
    runs: list[driver.Run] = []
    while True:
        shape = Shape(mode, about["schema"], about["name"], response_format)
        try:
            state = await driver.drive(conv, deps, start, budget, shape.settings(deps),
                                       shape=shape, resuming=start is None, runs=runs)
            break
        except ModelError as exc:
            following = FALLBACKS.get(mode) if chosen == "auto" and refuses(exc, mode) else None
            if following is not None:
                # The server refuses this strategy: this model keeps the next one from now on.
                deps.fragola.json_modes = {model: following}
            if following is None or runs[-1].stop_asked:
                # Not a refusal, or stopped meanwhile: stop() asked for no further request.
                raise JsonModeError(
                    f"the model API failed during agent.json ({mode}): {exc}") from exc
            # The same turn goes on with the next strategy (the user message is stored).
            mode = following
            start = None
    if chosen == "auto":
        deps.fragola.json_modes = {model: mode}
    return _result(state, shape, deps, validate)


def _result(state: AgentState, shape: Shape, deps: RunDeps, validate: Any) -> JsonResult[Any]:
    messages = state.messages
    reply = next((m for m in reversed(messages) if m.get("role") == "assistant"), None)
    call = shape.answer_call(deps, reply) if reply is not None else None
    if call is None and (state.outcome != "finished" or state.last_message != reply):
        raise JsonModeError(f"agent.json ended without a final answer (outcome: {state.outcome})")
    assert reply is not None
    if reply.get("refusal"):
        raise JsonModeError(f"the model refused: {reply['refusal']}")
    content = reply.get("content") if call is None else call["function"].get("arguments")
    try:
        document = json.loads(content) if isinstance(content, str) else None
    except json.JSONDecodeError as exc:
        raise JsonModeError(
            f"the model's answer is not JSON ({exc.msg}): {content!r:.200}"
        ) from exc
    except (ValueError, RecursionError) as exc:  # a 5,000-digit number, nesting too deep
        raise JsonModeError(
            f"the model's answer cannot be read as JSON ({type(exc).__name__}: "
            f"{str(exc)[:200]})") from exc
    if document is None:
        raise JsonModeError("the model's answer has no JSON content")
    try:
        data = validate(document)
    except ValueError as exc:
        return JsonResult(False, None, str(exc), state, shape.mode)
    return JsonResult(True, data, None, state, shape.mode)


def _prepare(schema: Any) -> tuple[Any, dict[str, Any]]:
    if isinstance(schema, type) and issubclass(schema, pydantic.BaseModel):
        model = schema

        def validate_model(document: Any) -> Any:
            try:
                return model.model_validate(document)
            except pydantic.ValidationError as exc:
                raise ValueError(str(exc)) from exc
            except Exception as exc:  # a custom validator raising anything else
                raise ValueError(f"the validator raised {exception_text(exc)}") from exc

        return validate_model, json_schema_response_format(model, _name(model.__name__))
    if is_pydantic_v1_model(schema):
        v1_model = schema
        # openai's strict conversion knows only pydantic v2: a v1 schema goes non-strict.
        return (
            lambda document: parse_v1(v1_model, document),
            json_schema_response_format(v1_model.schema(), _name(v1_model.__name__)),
        )
    if isinstance(schema, (str, dict)):
        try:
            raw = load_json_schema(schema)
        except InvalidToolDefinition as exc:
            raise JsonModeError(str(exc)) from exc
        validator = json_validator(raw)

        def validate_raw(document: Any) -> Any:
            try:
                errors = [f"{'.'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}"
                          for e in validator.iter_errors(document)]
            except Exception as exc:  # a document nested deeper than the recursion limit
                raise ValueError(f"the validator raised {exception_text(exc)}") from exc
            if errors:
                raise ValueError("\n".join(errors))
            return document

        return validate_raw, json_schema_response_format(raw, _name(raw.get("title", "response")))
    raise JsonModeError(
        f"agent.json needs a pydantic model class or a JSON Schema, got {type(schema).__name__}"
    )


def _name(text: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_-]", "_", str(text))[:64] or "response"

"""Argument schemas: pydantic v2, ``pydantic.v1``, raw JSON Schema, or a function signature.

Every kind answers two questions the run loop asks: what JSON Schema goes to the model
(``parameters``), and what the handler receives for a given arguments dict (``parse``, which
raises ``ArgumentsRejected`` with a message written for the model to read and correct).
"""

from __future__ import annotations

import inspect
import json
import re
import sys
import typing
from collections.abc import Callable
from typing import Any

import pydantic

from fragola_nb.base.errors import InvalidToolDefinition, exception_text


def _pydantic_v1() -> Any:
    """``pydantic.v1`` if something imported it, else None. A v1 model class can only exist
    once it is imported, so fragola_nb never imports it (that would cost ``import fragola_nb``
    about as much as all of its own modules: bench/import_time.py)."""
    return sys.modules.get("pydantic.v1")


EMPTY_OBJECT: dict[str, Any] = {"type": "object", "properties": {}}


class ArgumentsRejected(Exception):
    """Arguments that do not fit the schema; ``str(exc)`` is meant for the model to read."""


class ToolSchema:
    """A schema as the run loop sees it."""

    kind = "none"
    validates = False

    def __init__(self, parameters: dict[str, Any]) -> None:
        self.parameters = parameters

    def parse(self, arguments: dict[str, Any]) -> Any:
        return arguments


class PydanticSchema(ToolSchema):
    """A pydantic v2 model: validated, and the handler receives the model instance."""

    kind = "pydantic"
    validates = True

    def __init__(self, model: type[pydantic.BaseModel]) -> None:
        try:
            parameters = model.model_json_schema()
        except Exception as exc:
            raise InvalidToolDefinition(f"{model.__name__} has no JSON Schema: {exc}") from exc
        super().__init__(parameters)
        self.model = model

    def parse(self, arguments: dict[str, Any]) -> Any:
        try:
            return self.model.model_validate(arguments)
        except pydantic.ValidationError as exc:
            raise ArgumentsRejected(format_pydantic_errors(exc.errors())) from exc
        except Exception as exc:
            raise _rejected_by_validator(exc) from exc


class PydanticV1Schema(ToolSchema):
    """A ``pydantic.v1`` model, handled like a v2 one."""

    kind = "pydantic.v1"
    validates = True

    def __init__(self, model: Any) -> None:
        super().__init__(model.schema())
        self.model = model
        self._invalid = _pydantic_v1().ValidationError

    def parse(self, arguments: dict[str, Any]) -> Any:
        try:
            return self.model.parse_obj(arguments)
        except self._invalid as exc:
            raise ArgumentsRejected(format_pydantic_errors(exc.errors())) from exc
        except Exception as exc:
            raise _rejected_by_validator(exc) from exc


def _rejected_by_validator(exc: Exception) -> ArgumentsRejected:
    """Whatever a validator raises (a custom pydantic validator raising ``PermissionError``,
    a ``RecursionError`` on deep arguments) means the arguments were not accepted."""
    return ArgumentsRejected(f"- (arguments): the validator raised {exception_text(exc)}")


class JsonSchema(ToolSchema):
    """A raw JSON Schema: checked when made; arguments validated only with ``validate=True``."""

    kind = "json-schema"

    def __init__(self, schema: str | dict[str, Any], *, validate: bool = False) -> None:
        parameters = load_json_schema(schema)
        super().__init__(parameters)
        self.validates = validate
        self._validator = json_validator(parameters)

    def parse(self, arguments: dict[str, Any]) -> Any:
        if self.validates:
            try:
                errors = sorted(self._validator.iter_errors(arguments),
                                key=lambda e: [str(part) for part in e.path])
            except Exception as exc:
                raise _rejected_by_validator(exc) from exc
            if errors:
                raise ArgumentsRejected(
                    "\n".join(f"- {_json_path(e.absolute_path)}: {e.message}" for e in errors)
                )
        return arguments


def json_validator(schema: dict[str, Any]) -> Any:
    """A ``jsonschema`` validator for a schema ``load_json_schema`` accepted, resolving
    ``$ref`` within the schema (and the JSON Schema meta-schemas) only: never over the
    network, which jsonschema would otherwise try for a remote ``$ref``."""
    import jsonschema  # imported when needed: it costs seconds at import time

    return jsonschema.validators.validator_for(schema)(schema, registry=_local_registry())


def _local_registry() -> Any:
    """The JSON Schema meta-schemas, and nothing that retrieves anything else."""
    import jsonschema_specifications  # type: ignore[import-untyped]

    return jsonschema_specifications.REGISTRY


def _check_refs(schema: dict[str, Any]) -> None:
    """Refuse a ``$ref`` that does not resolve within the schema, before any call needs it."""
    from referencing.exceptions import Unresolvable
    from referencing.jsonschema import DRAFT202012, specification_with

    specification = specification_with(str(schema.get("$schema", "")), default=DRAFT202012)
    root = _local_registry().resolver_with_root(
        specification.create_resource(schema))

    def walk(node: Any, resolver: Any) -> None:
        if isinstance(node, list):
            for item in node:
                walk(item, resolver)
            return
        if not isinstance(node, dict):
            return
        if node is not schema and specification.id_of(node):
            resolver = resolver.in_subresource(specification.create_resource(node))
        ref = node.get("$ref")
        if isinstance(ref, str):
            try:
                resolver.lookup(ref)
            except Unresolvable as exc:
                raise InvalidToolDefinition(
                    f"the JSON Schema's $ref {ref!r} points nowhere in the schema (fragola_nb "
                    "never fetches remote schemas: put what it names under $defs)") from exc
        for value in node.values():
            walk(value, resolver)

    try:
        walk(schema, root)
    except RecursionError as exc:
        raise InvalidToolDefinition("the JSON Schema is nested too deeply") from exc


def load_json_schema(schema: str | dict[str, Any]) -> dict[str, Any]:
    """Parse and check a raw JSON Schema for tool parameters or JSON mode."""
    if isinstance(schema, str):
        try:
            schema = json.loads(schema)
        except json.JSONDecodeError as exc:
            raise InvalidToolDefinition(f"the schema string is not valid JSON: {exc}") from exc
    if not isinstance(schema, dict):
        raise InvalidToolDefinition("a JSON Schema must be a JSON object")
    import jsonschema  # imported when needed: it costs seconds at import time

    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise InvalidToolDefinition(f"the JSON Schema is broken: {exc.message}") from exc
    except RecursionError as exc:
        raise InvalidToolDefinition("the JSON Schema is nested too deeply") from exc
    if schema.get("type", "object") != "object":
        raise InvalidToolDefinition(
            'a parameters schema must describe an object ("type": "object")'
        )
    _check_refs(schema)
    return schema


def is_pydantic_v1_model(obj: Any) -> bool:
    """Whether ``obj`` is a ``pydantic.v1`` model class."""
    pydantic_v1 = _pydantic_v1()
    return (
        pydantic_v1 is not None and isinstance(obj, type) and issubclass(obj, pydantic_v1.BaseModel)
    )


def parse_v1(model: Any, document: Any) -> Any:
    """``model.parse_obj(document)``, raising ``ValueError`` with pydantic's message."""
    try:
        return model.parse_obj(document)
    except _pydantic_v1().ValidationError as exc:
        raise ValueError(str(exc)) from exc
    except Exception as exc:  # a custom validator raising anything else
        raise ValueError(f"the validator raised {exception_text(exc)}") from exc


def to_schema(schema: Any, *, validate: bool = False) -> ToolSchema:
    """Recognise what the user gave as ``schema=``."""
    if schema is None:
        return ToolSchema(dict(EMPTY_OBJECT))
    if isinstance(schema, ToolSchema):
        return schema
    if isinstance(schema, type) and issubclass(schema, pydantic.BaseModel):
        return PydanticSchema(schema)
    if is_pydantic_v1_model(schema):
        return PydanticV1Schema(schema)
    if isinstance(schema, (str, dict)):
        return JsonSchema(schema, validate=validate)
    raise InvalidToolDefinition(
        "schema must be a pydantic model class, a pydantic.v1 model class, a JSON Schema "
        f"string or dict, or None; got {type(schema).__name__}"
    )


def format_pydantic_errors(errors: Any) -> str:
    lines = []
    for error in errors:
        where = _json_path(error.get("loc", ()))
        lines.append(f"- {where}: {error.get('msg', 'invalid value')}")
    return "\n".join(lines) or "- invalid arguments"


def _json_path(parts: Any) -> str:
    path = ".".join(str(p) for p in parts)
    return path or "(arguments)"


# -- schemas from a function signature (the @tool decorator) ----------------------------------

_DOC_ARGS_HEADER = re.compile(r"^\s*(Args|Arguments|Parameters|Params)\s*:\s*$")
_DOC_ARG_LINE = re.compile(r"^\s*(\*{0,2}\w+)\s*(\([^)]*\))?\s*:\s*(.*)$")
_REST_PARAM = re.compile(r"^\s*:param\s+(?:\w+\s+)?(\w+)\s*:\s*(.*)$")
_DOC_SECTION_END = re.compile(r"^\s*(Returns?|Raises|Yields|Examples?|Notes?)\s*:\s*$")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """The summary and per-argument descriptions of a Google or reST style docstring."""
    text = inspect.cleandoc(doc or "")
    summary_lines: list[str] = []
    params: dict[str, str] = {}
    in_args = False
    current: str | None = None
    for line in text.splitlines():
        rest = _REST_PARAM.match(line)
        if rest:
            current = rest.group(1)
            params[current] = rest.group(2).strip()
            in_args = True
            continue
        if _DOC_ARGS_HEADER.match(line):
            in_args, current = True, None
            continue
        if in_args:
            if _DOC_SECTION_END.match(line):
                in_args, current = False, None
                continue
            arg = _DOC_ARG_LINE.match(line)
            if arg and line[: len(line) - len(line.lstrip())] != "" and line.strip():
                current = arg.group(1).lstrip("*")
                params[current] = arg.group(3).strip()
            elif current and line.strip():
                params[current] = f"{params[current]} {line.strip()}".strip()
            continue
        summary_lines.append(line)
    summary = "\n".join(summary_lines).strip().split("\n\n")[0].replace("\n", " ").strip()
    return summary, params


class SignatureSchema(PydanticSchema):
    """A pydantic model built from a function's parameters (all but ``context``)."""

    kind = "signature"

    def __init__(self, fn: Callable[..., Any], name: str) -> None:
        _, docs = parse_docstring(fn.__doc__)
        fields: dict[str, Any] = {}
        try:
            hints = typing.get_type_hints(fn)
        except Exception as exc:
            raise InvalidToolDefinition(f"cannot read the type hints of {name}: {exc}") from exc
        for param in inspect.signature(fn).parameters.values():
            if param.name == "context":
                continue
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise InvalidToolDefinition(f"{name}: *args and **kwargs cannot become a schema")
            annotation = hints.get(param.name, Any)
            default = ... if param.default is param.empty else param.default
            fields[param.name] = (
                annotation,
                pydantic.Field(default, description=docs.get(param.name)),
            )
        model = pydantic.create_model(f"{name}_arguments", **fields)
        super().__init__(model)

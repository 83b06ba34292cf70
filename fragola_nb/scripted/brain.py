"""A deterministic, rule-based brain for offline demos.

``ScriptedModel(brain=demo_brain)`` answers every request once the script is empty, so the
notebooks run without an API key and still show tool calls, tool results and JSON mode::

    demo_brain({"messages": [{"role": "user", "content": "Weather in Paris?"}],
                "tools": [{"type": "function", "function": {"name": "get_weather", ...}}]})
    # -> tool_calls(call("get_weather", {"city": "Paris"}))

The rules, in order: structured output (``response_format``) gets a JSON document generated
from the schema; a user message with tools gets a call to the tool whose name best matches
the user's words; trailing tool results get a one-sentence summary each; anything else gets a
friendly echo.
"""

from __future__ import annotations

import json
import re
from collections import deque
from typing import Any

from .items import Item, ToolCalls, call, reply, tool_calls

__all__ = ["demo_brain", "text_of"]

_WORD = re.compile(r"[A-Za-z][A-Za-z0-9']*|\d+")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_QUOTED = re.compile(r'"([^"]+)"|\u201c([^\u201d]+)\u201d|`([^`]+)`')
_PROPER = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][a-zA-Z]+(?:\s+[A-Z][a-zA-Z]+)*")
_NAME_SPLIT = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])|[^A-Za-z0-9]+")
_STOP = frozenset(
    "a an the is are was were be am i me my you your it its it's this that these those what "
    "what's whats which who how when where why in on at for to of and or with by from into "
    "about please can could would should will do does did tell give show find get some any "
    "there here let's let us we our now today".split()
)
# Verbs that start many tool names: they only break ties, they never pick a tool alone.
_GENERIC = frozenset("get set do run make fetch call tool func function".split())
_FORMATS = {
    "date-time": "2024-01-01T00:00:00Z",
    "date": "2024-01-01",
    "time": "00:00:00",
    "email": "user@example.com",
    "uri": "https://example.com",
    "url": "https://example.com",
    "uuid": "00000000-0000-0000-0000-000000000000",
}


def text_of(content: Any) -> str:
    """The text of a message ``content``: a string, or a list of parts (images as ``[image]``)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    texts = []
    for part in content:
        if isinstance(part, dict):
            kind = str(part.get("type", ""))
            if isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif kind in ("image_url", "input_image", "image"):
                texts.append("[image]")
            elif kind:
                texts.append(f"[{kind.removeprefix('input_')}]")
    return " ".join(texts)


def _stem(word: str) -> str:
    word = word.lower()
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


class _Filler:
    """Fills a JSON schema with values taken, in order, from a user message."""

    def __init__(self, text: str, *, spare_words: bool = False, skip: frozenset[str] = frozenset()):
        self.text = text
        self.numbers: deque[float] = deque()
        for m in _NUMBER.finditer(text):
            value = m.group()
            if value.startswith("-") and m.start() > 0 and text[m.start() - 1].isalnum():
                value = value[1:]  # "3-5" is a range, not minus five
            self.numbers.append(float(value))
        self.strings = deque(next(g for g in m.groups() if g) for m in _QUOTED.finditer(text))
        self.strings.extend(
            m.group() for m in _PROPER.finditer(text) if m.group().lower() not in _STOP
        )
        if spare_words:  # tool arguments: "a word" beats "example"
            taken = {w.lower() for s in self.strings for w in s.split()}
            self.strings.extend(
                w
                for w in _WORD.findall(text)
                if w.lower() not in _STOP | taken and _stem(w) not in skip and not w.isdigit()
            )

    def value(self, schema: Any, root: Any, key: str | None = None, depth: int = 0) -> Any:
        if not isinstance(schema, dict):
            return "example"
        if isinstance(schema.get("$ref"), str):
            return self.value(_resolve(root, schema["$ref"]), root, key, depth + 1)
        if "const" in schema:
            return schema["const"]
        if isinstance(schema.get("enum"), list) and schema["enum"]:
            return schema["enum"][0]
        for combinator in ("anyOf", "oneOf"):
            if isinstance(schema.get(combinator), list):
                branches = [b for b in schema[combinator] if not _is_null(b, root)]
                return self.value(branches[0], root, key, depth + 1) if branches else None
        if isinstance(schema.get("allOf"), list):
            merged = {k: v for k, v in schema.items() if k != "allOf"}
            for part in schema["allOf"]:
                part = (
                    _resolve(root, part["$ref"])
                    if isinstance(part, dict) and "$ref" in part
                    else part
                )
                if isinstance(part, dict):
                    props = {**merged.get("properties", {}), **part.get("properties", {})}
                    merged = {**merged, **part, "properties": props}
            return self.value(merged, root, key, depth + 1)
        kind = schema.get("type")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), "null")
        if kind is None:
            kind = (
                "object" if "properties" in schema else "array" if "items" in schema else "string"
            )
        if kind == "object":
            props = schema.get("properties") or {}
            return {name: self.value(sub, root, name, depth + 1) for name, sub in props.items()}
        if kind == "array":
            # Recursive schemas end in empty arrays; one item otherwise.
            count = max(int(schema.get("minItems", 0)), 0 if depth > 8 else 1)
            count = min(count, int(schema.get("maxItems", count)))
            return [self.value(schema.get("items", {}), root, key, depth + 1) for _ in range(count)]
        if kind in ("integer", "number"):
            return self._number(schema, integer=kind == "integer")
        if kind == "boolean":
            return False
        if kind == "null":
            return None
        return self._string(schema, key)

    def _number(self, schema: dict[str, Any], *, integer: bool) -> float | int:
        value = self.numbers.popleft() if self.numbers else 0.0
        low = schema.get("minimum", schema.get("exclusiveMinimum"))
        high = schema.get("maximum", schema.get("exclusiveMaximum"))
        step = 1 if "exclusiveMinimum" in schema or "exclusiveMaximum" in schema else 0
        if isinstance(low, (int, float)) and value < low + step:
            value = low + step
        if isinstance(high, (int, float)) and value > high - step:
            value = high - step
        return int(value) if integer or value.is_integer() else value

    def _string(self, schema: dict[str, Any], key: str | None) -> str:
        if schema.get("format") in _FORMATS:
            return _FORMATS[schema["format"]]
        text = self._keyed(key) or (self.strings.popleft() if self.strings else "example")
        low, high = schema.get("minLength", 0), schema.get("maxLength")
        text = text.ljust(low, "x")
        return text[:high] if isinstance(high, int) else text

    def _keyed(self, key: str | None) -> str | None:
        """``city is Paris`` / ``city: "New York"`` in the user text, for property ``city``."""
        if not key:
            return None
        name = re.escape(key).replace("_", "[ _]")
        m = re.search(rf'\b{name}\s*(?:is|:|=)\s*(?:"([^"]*)"|([^\s,;.!?]+))', self.text, re.I)
        return (m.group(1) if m.group(1) is not None else m.group(2)) if m else None


def _resolve(root: Any, ref: str) -> Any:
    node = root
    for token in ref.removeprefix("#").strip("/").split("/") if ref != "#" else ():
        token = token.replace("~1", "/").replace("~0", "~")
        node = node.get(token, {}) if isinstance(node, dict) else {}
    return node


def _is_null(schema: Any, root: Any) -> bool:
    if isinstance(schema, dict) and isinstance(schema.get("$ref"), str):
        schema = _resolve(root, schema["$ref"])
    return isinstance(schema, dict) and schema.get("type") == "null"


def _tool_words(name: str) -> list[str]:
    return [_stem(w) for w in _NAME_SPLIT.split(name) if w]


def _pick_tool(request: dict[str, Any], user_text: str) -> dict[str, Any] | None:
    choice = request.get("tool_choice")
    tools = [
        t["function"]
        for t in request.get("tools") or ()
        if isinstance(t, dict)
        and t.get("type") == "function"
        and isinstance(t.get("function"), dict)
    ]
    if choice == "none" or not tools:
        return None
    if isinstance(choice, dict):
        wanted = (choice.get("function") or {}).get("name")
        return next((t for t in tools if t.get("name") == wanted), None)
    said = {_stem(w) for w in _WORD.findall(user_text)}
    best, best_score = None, (0, 0)
    for tool in tools:
        words = set(_tool_words(str(tool.get("name", ""))))
        score = (len(words & said - _GENERIC), len(words & said & _GENERIC))
        if score[0] and score > best_score:
            best, best_score = tool, score
    return best or (tools[0] if choice == "required" else None)


def _summary(messages: list[dict[str, Any]]) -> str:
    start = len(messages)
    while start and messages[start - 1].get("role") == "tool":
        start -= 1
    names: dict[str, str] = {}
    for message in reversed(messages[:start]):
        if message.get("role") == "assistant" and message.get("tool_calls"):
            for tc in message["tool_calls"]:
                if isinstance(tc, dict) and isinstance(tc.get("function"), dict):
                    names[str(tc.get("id"))] = str(tc["function"].get("name"))
            break
    sentences = []
    for result in messages[start:]:
        name = names.get(str(result.get("tool_call_id")))
        content = text_of(result.get("content")).strip().rstrip(".")
        tool = f"The tool {name}" if name else "The tool"
        sentences.append(f"{tool} returned: {content}.")
    return " ".join(sentences)


def demo_brain(request: dict[str, Any]) -> Item:
    """Answer ``request`` (a Chat Completions body) by simple, deterministic rules."""
    messages = [m for m in request.get("messages") or () if isinstance(m, dict)]
    user_text = next(
        (text_of(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), ""
    )
    echo = f"(scripted model) You said: {user_text}" if user_text else "(scripted model) Hello!"
    response_format = request.get("response_format")
    if isinstance(response_format, dict):
        if response_format.get("type") == "json_schema":
            schema = (response_format.get("json_schema") or {}).get("schema") or {}
            return reply(json.dumps(_Filler(user_text).value(schema, schema)))
        if response_format.get("type") == "json_object":
            return reply(json.dumps({"reply": echo}))
    last = messages[-1].get("role") if messages else None
    if last == "user":
        tool = _pick_tool(request, user_text)
        if tool is not None:
            return _call(tool, user_text)
    if last == "tool":
        return reply(_summary(messages))
    return reply(echo)


def _call(tool: dict[str, Any], user_text: str) -> ToolCalls:
    name = str(tool.get("name", ""))
    params = tool.get("parameters") or {"type": "object", "properties": {}}
    filler = _Filler(user_text, spare_words=True, skip=frozenset(_tool_words(name)))
    args = filler.value(params, params)
    return tool_calls(call(name, args if isinstance(args, dict) else {}))

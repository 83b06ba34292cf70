"""Filling a JSON schema with values taken from a user message, for the demo brain.

``Filler(text).value(schema, schema)`` builds a document that fits ``schema``: numbers, quoted
strings and proper names are taken from ``text`` in order (``"name is Ada"`` fills ``name``
first), formats get a fixed example, and anything missing gets a plain default (``0``,
``False``, ``"example"``). It never raises, whatever the schema holds: the demo brain answers
any request, even one whose schema is nonsense.
"""

from __future__ import annotations

import re
from collections import deque
from typing import Any

__all__ = ["STOP_WORDS", "WORD", "Filler", "stem"]

WORD = re.compile(r"[A-Za-z][A-Za-z0-9']*|\d+")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_QUOTED = re.compile(r'"([^"]+)"|\u201c([^\u201d]+)\u201d|`([^`]+)`')
_PROPER = re.compile(r"\b[A-Z][a-zA-Z]+(?:\s+[A-Z][a-zA-Z]+)*")
_CODE = re.compile(r"\b\d[\w./:-]*[/:-][\w./:-]*\w")  # 978-3-16-148410-0, 10:30, 1/2
STOP_WORDS = frozenset(
    "a an the is are was were be am i me my you your it its it's this that these those what "
    "what's whats which who how when where why in on at for to of and or with by from into "
    "about please can could would should will do does did tell give show find get some any "
    "there here let's let us we our now today".split()
)
_FORMATS = {
    "date-time": "2024-01-01T00:00:00Z",
    "date": "2024-01-01",
    "time": "00:00:00",
    "email": "user@example.com",
    "uri": "https://example.com",
    "url": "https://example.com",
    "uuid": "00000000-0000-0000-0000-000000000000",
}
_DEEPEST = 40  # a schema that refers to itself ends here, not in a RecursionError
_BUDGET = 2_000  # values per document: wide recursive schemas stop growing, they do not explode


def stem(word: str) -> str:
    """``"cities"`` and ``"city"`` alike enough: lower case, one plural ``s`` dropped."""
    word = word.lower()
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def _whole(value: Any, default: int) -> int:
    """A schema bound that is a number, else ``default`` (a schema may hold anything)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return default
    return int(max(min(value, 10_000), -10_000))


class Filler:
    """Fills a JSON schema with values taken, in order, from a user message."""

    def __init__(self, text: str, *, spare_words: bool = False, skip: frozenset[str] = frozenset()):
        self.text = text
        self._left = _BUDGET
        self.numbers: deque[float] = deque()
        for m in _NUMBER.finditer(text):
            value = m.group()
            if value.startswith("-") and m.start() > 0 and text[m.start() - 1].isalnum():
                value = value[1:]  # "3-5" is a range, not minus five
            self.numbers.append(float(value))
        self.strings = deque(next(g for g in m.groups() if g) for m in _QUOTED.finditer(text))
        self.strings.extend(_proper_names(text))
        if spare_words:  # tool arguments: a code, a word, then a number beat "example"
            self.strings.extend(m.group() for m in _CODE.finditer(text))
            taken = {w.lower() for s in self.strings for w in s.split()}
            self.strings.extend(
                w
                for w in WORD.findall(text)
                if w.lower() not in STOP_WORDS | taken and stem(w) not in skip and not w.isdigit()
            )
            self.strings.extend(m.group() for m in _NUMBER.finditer(text))

    def value(self, schema: Any, root: Any, key: str | None = None, depth: int = 0) -> Any:
        """A value that fits ``schema`` (``root`` resolves ``$ref``; ``key`` is its name)."""
        if not isinstance(schema, dict) or depth > _DEEPEST:
            return "example"
        self._left -= 1
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
            return self.value(_merged(schema, root), root, key, depth + 1)
        kind = schema.get("type")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), "null")
        if not isinstance(kind, str):
            kind = (
                "object" if "properties" in schema else "array" if "items" in schema else "string"
            )
        if kind == "object":
            props = schema.get("properties")
            if not isinstance(props, dict) or self._left <= 0:
                return {}
            return {str(name): self.value(sub, root, str(name), depth + 1)
                    for name, sub in props.items()}
        if kind == "array":
            # Recursive schemas end in empty arrays; one item otherwise.
            count = max(_whole(schema.get("minItems"), 0), 0 if depth > 8 else 1)
            count = count if self._left > 0 else 0
            count = min(count, max(_whole(schema.get("maxItems"), count), 0))
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
        if isinstance(low, (int, float)) and _bound(low) and value < low + step:
            value = low + step
        if isinstance(high, (int, float)) and _bound(high) and value > high - step:
            value = high - step
        value = float(value)
        if value != value or value in (float("inf"), float("-inf")):
            value = 0.0  # JSON has no NaN or infinity
        return int(value) if integer or value.is_integer() else value

    def _string(self, schema: dict[str, Any], key: str | None) -> str:
        form = schema.get("format")
        if isinstance(form, str) and form in _FORMATS:
            return _FORMATS[form]
        text = self._keyed(key) or (self.strings.popleft() if self.strings else "example")
        text = text.ljust(_whole(schema.get("minLength"), 0), "x")
        high = schema.get("maxLength")
        return text[: max(high, 0)] if _bound(high) and isinstance(high, int) else text

    def _keyed(self, key: str | None) -> str | None:
        """``city is Paris`` / ``city: "New York"`` in the user text, for property ``city``."""
        if not key:
            return None
        name = re.escape(key).replace("_", "[ _]")
        m = re.search(rf'\b{name}\s*(?:is|:|=)\s*(?:"([^"]*)"|([^\s,;.!?]+))', self.text, re.I)
        return (m.group(1) if m.group(1) is not None else m.group(2)) if m else None


def _proper_names(text: str) -> list[str]:
    """Runs of capitalized words, in order. A sentence's first word is capitalized anyway:
    alone it is left out ("Convert", "Hello"), and so is a first word that is a stop word
    ("Is Paris sunny?" gives "Paris"), but a longer run is a name ("Ada Lovelace was...")."""
    names = []
    for m in _PROPER.finditer(text):
        words = m.group().split()
        if _starts_sentence(text, m.start()):
            if len(words) == 1 or words[0].lower() in STOP_WORDS:
                words = words[1:]
        while words and words[0].lower() in STOP_WORDS:
            words = words[1:]
        if words:
            names.append(" ".join(words))
    return names


def _starts_sentence(text: str, at: int) -> bool:
    """Whether ``text[at]`` begins the text, a line or a sentence (read back over the spaces
    before it only: linear over a long message)."""
    at -= 1
    while at >= 0 and text[at] in " \t":
        at -= 1
    return at < 0 or text[at] in ".!?:;\n\r"


def _bound(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value


def _merged(schema: dict[str, Any], root: Any) -> dict[str, Any]:
    merged = {k: v for k, v in schema.items() if k != "allOf"}
    for part in schema["allOf"]:
        if isinstance(part, dict) and isinstance(part.get("$ref"), str):
            part = _resolve(root, part["$ref"])
        if isinstance(part, dict):
            mine, theirs = merged.get("properties"), part.get("properties")
            props = {**(mine if isinstance(mine, dict) else {}),
                     **(theirs if isinstance(theirs, dict) else {})}
            merged = {**merged, **part, "properties": props}
    return merged


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

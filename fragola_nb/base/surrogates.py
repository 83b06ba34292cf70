"""Half an emoji: a lone surrogate, which no request can carry.

JSON lets a server send half of a surrogate pair (``"\\ud83d"``), and Python keeps it as a
lone surrogate (U+D800-U+DFFF), which UTF-8 cannot encode: a request holding one cannot be
sent at all. Stored in a history, it would make every later request of the agent fail before
it is sent. So the text that enters a history is ``mended``: a high and a low surrogate side
by side become the character they encode, and every other surrogate becomes U+FFFD (the
replacement character), as a decoder does with bytes it cannot read. Text a caller gives as a
new user message is checked instead (``first_lone_surrogate``): refused, nothing stored.

>>> mended({"role": "assistant", "content": "half \\ud83d of an emoji"})["content"]
'half \\ufffd of an emoji'
"""

from __future__ import annotations

import re
from typing import Any, TypeVar

__all__ = ["REPLACEMENT", "first_lone_surrogate", "mended"]

REPLACEMENT = "\ufffd"
_SURROGATE = re.compile("[\ud800-\udfff]")
T = TypeVar("T")


def _mend_text(text: str) -> str:
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    # UTF-16 joins a high surrogate followed by a low one; what is left alone is replaced.
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def mended(value: T) -> T:
    """``value`` (a message, a string, or lists and dicts of them) with every lone surrogate
    mended (see the module); the very same object when there is none, else a copy of the
    parts that changed (a message a fork shares is never changed in place)."""
    if isinstance(value, str):
        return _mend_text(value)  # type: ignore[return-value]
    if _whole(value):
        return value  # the usual case, told without copying anything
    if isinstance(value, dict):
        changed = {_mend_key(key): mended(item) for key, item in value.items()}
        same = len(changed) == len(value) and all(  # a key mended is a change too
            key is new_key and item is new_item for (key, item), (new_key, new_item)
            in zip(value.items(), changed.items(), strict=True))
        return value if same else changed  # type: ignore[return-value]
    if isinstance(value, list):
        items = [mended(item) for item in value]
        return value if all(a is b for a, b in zip(value, items, strict=True)) else items  # type: ignore[return-value]
    return value


def _whole(value: Any) -> bool:
    """True when ``value`` holds no surrogate (strings in lists and dicts, keys too). An ASCII
    string (``isascii`` is known without reading it) is skipped."""
    search = _SURROGATE.search
    if isinstance(value, dict):
        try:
            keys = "".join(value)  # the keys at once, when they are all strings
        except TypeError:
            keys = "".join(key for key in value if isinstance(key, str))
        if not keys.isascii() and search(keys) is not None:
            return False  # joined, a high and a low surrogate of two keys never pair: str
        for item in value.values():
            if isinstance(item, str):
                if not item.isascii() and search(item) is not None:
                    return False
            elif isinstance(item, (dict, list)) and not _whole(item):
                return False
        return True
    if isinstance(value, list):
        for item in value:
            if isinstance(item, str):
                if not item.isascii() and search(item) is not None:
                    return False
            elif isinstance(item, (dict, list)) and not _whole(item):
                return False
    return True


def _mend_key(key: Any) -> Any:
    return _mend_text(key) if isinstance(key, str) else key


def first_lone_surrogate(value: Any) -> str | None:
    """The first lone surrogate in ``value`` (strings in lists and dicts too) as its escape
    (``"\\\\ud83d"``), or None."""
    if isinstance(value, str):
        found = _SURROGATE.search(value)
        return None if found is None else found.group().encode("unicode_escape").decode()
    items: Any = ()
    if isinstance(value, dict):
        items = [*value.keys(), *value.values()]
    elif isinstance(value, list):
        items = value
    for item in items:
        found_in = first_lone_surrogate(item)
        if found_in is not None:
            return found_in
    return None

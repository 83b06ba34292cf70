"""The one rule for text fragola_nb writes to a file: any text a model sends can be written.

JSON lets a server send half of a surrogate pair (``"\\ud83d"``, half an emoji); Python keeps
it as a lone surrogate, which UTF-8 cannot encode, so a plain ``text.encode()`` raises
``UnicodeEncodeError`` and whatever was being written (a batch row, a recorded exchange, a
session, an export) would be lost. Here such a character is written as its escape,
``\\ud83d``: inside a JSON string that is the JSON escape itself, so reading the file back
gives the very same text; in Markdown or HTML it is visible, as control characters already are
(``fragola_nb.base.render.visible``). Every other character is written as UTF-8, unchanged.
"""

from __future__ import annotations

__all__ = ["utf8", "writable"]


def utf8(text: str) -> bytes:
    """``text`` as UTF-8, each lone surrogate written as ``\\udXXX`` (see the module)."""
    # "backslashreplace" writes exactly what UTF-8 cannot hold, and in UTF-8 that is only a
    # surrogate; json.dumps has already doubled every backslash of the text itself, so the
    # escape cannot join one and reads back as the surrogate.
    return text.encode("utf-8", "backslashreplace")


def writable(text: str) -> str:
    """``text`` as ``utf8`` writes it, as a ``str`` (what a file written from it holds)."""
    return utf8(text).decode("utf-8")

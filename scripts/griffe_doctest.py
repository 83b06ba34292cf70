"""griffe extension (mkdocs.yml, mkdocstrings' ``extensions``): docstring examples as code.

The package's docstrings show examples as bare doctest lines (``>>> state = await ...``),
outside any "Examples:" section; as Markdown they would be a paragraph, and text such as
``messages[-1]["content"]`` a broken reference link. Each run of ``>>>`` lines (with its
``...`` continuations and output, up to a blank line) becomes a ``pycon`` code block, and
the ``# doctest: +SKIP`` flags, which are for the test runner, are left out.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

FLAG = re.compile(r"\s*#\s*doctest:.*$")


def fence_doctests(text: str) -> str:
    lines = text.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.lstrip().startswith(">>>"):
            out.append(line)
            i += 1
            continue
        indent = line[: len(line) - len(line.lstrip())]
        out.append(f"{indent}```pycon")
        while i < len(lines) and lines[i].strip():
            out.append(FLAG.sub("", lines[i]))
            i += 1
        out.append(f"{indent}```")
    return "\n".join(out)


class DoctestFences(griffe.Extension):
    def on_object(self, *, obj: griffe.Object, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        if obj.docstring is not None and ">>>" in obj.docstring.value:
            obj.docstring.value = fence_doctests(obj.docstring.value)

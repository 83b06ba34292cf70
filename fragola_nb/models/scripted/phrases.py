"""What the scripted judges look for in an answer: the rubric's quoted phrases, else the
expected answer (``judging`` for one answer, ``pairing`` for two)."""

from __future__ import annotations

import re

__all__ = ["phrases_of"]

_QUOTED = re.compile(r'"([^"\n]+)"|\u201c([^\u201d\n]+)\u201d|`([^`\n]+)`')


def phrases_of(rubric: str, expected: str | None) -> tuple[list[str], str]:
    """What the judge looks for: the rubric's quoted phrases, else the expected answer."""
    phrases = [next(group for group in m.groups() if group) for m in _QUOTED.finditer(rubric)]
    if not phrases and expected and expected.strip():
        return [expected.strip()], "the expected answer"
    return phrases, "phrases of the rubric"

"""How the demo brain follows instructions: a few keyword rules, so that a prompt experiment
run offline shows a different answer for each set of instructions.

The instructions are the text of the request's ``system`` and ``developer`` messages. Each rule
is a list of keywords (whole words, any case); a rule whose keyword appears is followed, and the
answer ends with a note naming the rules it followed, ``(instructions followed: be brief, like
a pirate)``. Keywords, not understanding: ``"never be brief"`` counts as ``brief``.

=================  ==================================================  =====================
rule (shown as)    keywords                                            effect
=================  ==================================================  =====================
``be brief``       brief, concise, terse, short, one sentence, ...     the bare result
``step by step``   step by step, explain, walk me through, ...         numbered steps
``bullet points``  bullet(s), bullet points, bulleted, as a list       one ``-`` line each
``in French`` ...  French, Spanish, German, Italian (or français...)   a canned opener
``like a pirate``  pirate; formal, polite; casual, friendly, informal  an opener and a closer
``uppercase`` ...  uppercase, all caps, shout; lowercase, lower case   the letter case
=================  ==================================================  =====================

One rule of each kind applies, the first of its row in the table above (``be brief`` over
``step by step``, French over Spanish, ``pirate`` over ``formal``); bullet points combine with
any. A JSON answer (``response_format``) and a tool call are never changed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

__all__ = ["Answer", "Manner", "follow", "read_instructions"]


def _words(*keywords: str) -> re.Pattern[str]:
    spelled = "|".join(re.escape(k).replace(r"\ ", r"[\s-]+") for k in keywords)
    return re.compile(rf"(?<![\w-])(?:{spelled})(?![\w-])", re.IGNORECASE)


_LENGTH = (
    ("be brief", _words("brief", "briefly", "concise", "concisely", "terse", "tersely", "short",
                        "shorter", "one sentence", "single sentence", "one line", "few words")),
    ("step by step", _words("step by step", "explain", "explanation", "walk me through",
                            "show your work", "show your reasoning")),
)
_BULLETS = ("bullet points", _words("bullet", "bullets", "bullet points", "bulleted",
                                     "as a list", "in a list"))
_LANGUAGES = (
    ("in French", _words("french", "français", "francais"), "Voici ma réponse :"),
    ("in Spanish", _words("spanish", "español", "espanol"), "Esta es mi respuesta:"),
    ("in German", _words("german", "deutsch"), "Hier ist meine Antwort:"),
    ("in Italian", _words("italian", "italiano"), "Ecco la mia risposta:"),
)
_STYLES = (
    ("like a pirate", _words("pirate", "pirates"), "Arr!", "Yo-ho-ho!"),
    ("formal", _words("formal", "formally", "polite", "politely"), "Dear user,", "Kind regards."),
    ("casual", _words("casual", "casually", "friendly", "informal", "informally"), "Hey!",
     "Cheers!"),
)
_CASES = (
    ("uppercase", _words("uppercase", "upper case", "all caps", "capital letters", "shout",
                         "shouting"), str.upper),
    ("lowercase", _words("lowercase", "lower case"), str.lower),
)


@dataclass(frozen=True)
class Answer:
    """What the brain would say, in three lengths: ``full`` sentences, the ``short`` result
    alone, and ``steps`` that retell how it got there."""

    full: tuple[str, ...]
    short: str
    steps: tuple[str, ...]


@dataclass(frozen=True)
class Manner:
    """The rules read from the instructions (empty: answer as it always did)."""

    length: str | None = None
    bullets: bool = False
    language: str | None = None
    opener: str = ""
    style: str | None = None
    style_words: tuple[str, str] = ("", "")
    case: str | None = None

    @property
    def followed(self) -> list[str]:
        """The rules followed, as the answer's note names them, in table order."""
        shown = [self.length, "bullet points" if self.bullets else None, self.language,
                 self.style, self.case]
        return [label for label in shown if label]


def read_instructions(messages: list[dict[str, Any]], text_of: Any) -> Manner:
    """The rules the ``system``/``developer`` messages ask for."""
    said = "\n".join(text_of(m.get("content")) for m in messages
                     if m.get("role") in ("system", "developer"))
    if not said.strip():
        return Manner()
    length = next((label for label, pattern in _LENGTH if pattern.search(said)), None)
    language = next((row for row in _LANGUAGES if row[1].search(said)), None)
    style = next((row for row in _STYLES if row[1].search(said)), None)
    case = next((label for label, pattern, _ in _CASES if pattern.search(said)), None)
    return Manner(
        length=length,
        bullets=bool(_BULLETS[1].search(said)),
        language=language[0] if language else None,
        opener=language[2] if language else "",
        style=style[0] if style else None,
        style_words=(style[2], style[3]) if style else ("", ""),
        case=case,
    )


def follow(manner: Manner, answer: Answer) -> str:
    """``answer`` said the way ``manner`` asks, ending with the note of what it followed."""
    if manner.length == "be brief":
        lines = [answer.short]
    elif manner.length == "step by step":
        lines = [f"{n}. {step}" for n, step in enumerate(answer.steps, 1)]
    else:
        lines = list(answer.full)
    if manner.bullets:
        lines = [f"- {line.partition('. ')[2] if manner.length == 'step by step' else line}"
                 for line in lines]
    # A list reads as a list: one line each, the opener, closer and note on lines of their own.
    several = manner.bullets or manner.length == "step by step"
    opener, closer = manner.style_words
    parts = [p for p in (opener, manner.opener, *lines, closer) if p]
    text = ("\n" if several else " ").join(parts)
    changed = next((change for label, _, change in _CASES if label == manner.case), None)
    if changed is not None:
        text = changed(text)
    if not manner.followed:
        return text
    note = f"(instructions followed: {', '.join(manner.followed)})"
    return f"{text}\n{note}" if several else f"{text} {note}"

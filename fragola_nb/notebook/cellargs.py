"""What a ``%%fragola`` line means: its options, the names it refers to, ``{var}`` in the text.

Every mistake here is a one-line ``UsageError`` (IPython prints it without a traceback).

Interpolation: ``{name}`` and ``{name.attr}`` in the cell's text (and line) are replaced by the
value from the user namespace; ``{{name}}`` gives a literal ``{name}``. Only braces around a
(dotted) Python name are special, so JSON such as ``{"a": {"b": 1}}`` and code pass through
untouched.
"""

from __future__ import annotations

import argparse
import functools
import keyword
import math
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

from IPython.core.error import UsageError

from fragola_nb.core.jsonshapes import JSON_MODES

__all__ = ["USAGE", "CellOptions", "interpolate", "lookup", "parse_name", "parse_options"]

USAGE = (
    "%%fragola [AGENT] [--by N] [--fork NAME] [--json SCHEMA [--json-mode MODE]] [--model M] "
    "[--temperature T] [--out VAR] [--no-stream] [--compare VARIANTS] | "
    "%%fragola [AGENT] --evaluate CASES [--variants V] [--graders G] [--repeat N] [--out VAR]"
)

_DOTTED = r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*"
_PLACEHOLDER = re.compile(r"\{\{(" + _DOTTED + r")\}\}|\{(" + _DOTTED + r")\}")
_DOTTED_NAME = re.compile(_DOTTED + r"\Z")


@dataclass(frozen=True)
class CellOptions:
    """The parsed ``%%fragola`` line."""

    agent: str | None = None
    by: int | None = None
    fork: str | None = None
    json: str | None = None
    json_mode: str | None = None
    """``agent.json``'s strategy for this turn (``auto``, ``json_schema``, ``json_object``,
    ``tool``)."""
    model: str | None = None
    temperature: float | None = None
    out: str | None = None
    stream: bool = True
    compare: str | None = None
    """A name in the notebook holding a dict of variants (``agent.compare``)."""
    evaluate: str | None = None
    """A name in the notebook holding the cases (``agent.evaluate``)."""
    variants: str | None = None
    """With ``--evaluate``: a name holding a dict of variants."""
    graders: str | None = None
    """With ``--evaluate``: a name holding a grader or a list of them."""
    repeat: int | None = None
    """With ``--evaluate``: runs of each case on each variant."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (usage: {USAGE})")


def _whole(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"--by takes a whole number >= 0, not {text!r}")
    return value


def _repeat(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"--repeat takes a whole number >= 1, not {text!r}")
    return value


def _number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"--temperature takes a number, not {text!r}")
    return value


@functools.cache  # made once: its making took about a millisecond of every %%fragola cell
def _parser() -> _Parser:
    parser = _Parser(prog="%%fragola", add_help=False, allow_abbrev=False)
    parser.add_argument("agent", nargs="?")
    parser.add_argument("--by", type=_whole)
    parser.add_argument("--fork")
    parser.add_argument("--json")
    parser.add_argument("--json-mode", dest="json_mode")
    parser.add_argument("--model")
    parser.add_argument("--temperature", type=_number)
    parser.add_argument("--out")
    parser.add_argument("--no-stream", dest="stream", action="store_false")
    parser.add_argument("--compare")
    parser.add_argument("--evaluate")
    parser.add_argument("--variants")
    parser.add_argument("--graders")
    parser.add_argument("--repeat", type=_repeat)
    return parser


def parse_options(line: str) -> CellOptions:
    """Parse the ``%%fragola`` line (after interpolation)."""
    try:
        words = shlex.split(line)
    except ValueError as exc:
        raise UsageError(f"cannot read the %%fragola line: {exc} (usage: {USAGE})") from None
    options = CellOptions(**vars(_parser().parse_args(words)))
    if options.agent is not None:
        parse_name(options.agent, "AGENT")
    if options.json is not None:
        parse_name(options.json, "--json")
    for flag, target in (("--fork", options.fork), ("--out", options.out)):
        if target is not None and not _assignable(target):
            raise UsageError(f"{flag} takes a variable name, not {target!r}")
    if options.model is not None and not options.model.strip():
        raise UsageError("--model takes a model name")
    if options.json_mode is not None:
        if options.json is None:
            raise UsageError("--json-mode goes with --json SCHEMA")
        if options.json_mode not in JSON_MODES:
            raise UsageError(f"--json-mode takes one of {', '.join(JSON_MODES)}, "
                             f"not {options.json_mode!r}")
    if options.json is not None and options.by is not None:
        raise UsageError("--by does not apply with --json (agent.json runs one turn)")
    if options.compare is not None:
        _check_compare(options)
    if options.evaluate is not None:
        _check_evaluate(options)
    else:
        for flag, value in (("--variants", options.variants), ("--graders", options.graders),
                            ("--repeat", options.repeat)):
            if value is not None:
                raise UsageError(f"{flag} goes with --evaluate CASES")
    return options


def _check_compare(options: CellOptions) -> None:
    parse_name(options.compare or "", "--compare")
    for flag, value in (("--by", options.by), ("--fork", options.fork), ("--json", options.json),
                        ("--model", options.model), ("--temperature", options.temperature)):
        if value is not None:
            raise UsageError(f"{flag} does not apply with --compare (set model, model_settings "
                             "or instructions in each variant)")


def _check_evaluate(options: CellOptions) -> None:
    for flag, name in (("--evaluate", options.evaluate), ("--variants", options.variants),
                       ("--graders", options.graders)):
        if name is not None:
            parse_name(name, flag)
    for flag, value in (("--by", options.by), ("--fork", options.fork), ("--json", options.json),
                        ("--model", options.model), ("--temperature", options.temperature),
                        ("--compare", options.compare),
                        ("--no-stream", None if options.stream else True)):
        if value is not None:
            raise UsageError(f"{flag} does not apply with --evaluate (set model, model_settings "
                             "or instructions in each variant)")


def parse_name(text: str, what: str) -> str:
    """``text`` if it is a (dotted) Python name, else a usage error naming ``what``."""
    if not _DOTTED_NAME.match(text) or any(keyword.iskeyword(p) for p in text.split(".")):
        raise UsageError(f"{what} must be a variable name (or name.attr), not {text!r}")
    return text


def _assignable(name: str) -> bool:
    return name.isidentifier() and not keyword.iskeyword(name)


def lookup(name: str, namespace: Mapping[str, Any], what: str = "name") -> Any:
    """The value of ``name`` or ``name.attr.attr`` in ``namespace``; a usage error if absent."""
    first, *attrs = name.split(".")
    if first not in namespace:
        raise UsageError(f"{what}: {first!r} is not defined in the notebook")
    value = namespace[first]
    path = first
    for attr in attrs:
        try:
            value = getattr(value, attr)
        except Exception as exc:  # a property that raises is the same mistake for the user
            raise UsageError(f"{what}: {path}.{attr}: {type(exc).__name__}: {exc}") from None
        path = f"{path}.{attr}"
    return value


def interpolate(text: str, namespace: Mapping[str, Any]) -> str:
    """Replace ``{name}`` / ``{name.attr}`` with values; ``{{name}}`` stays ``{name}``."""

    def substitute(match: re.Match[str]) -> str:
        escaped, name = match.groups()
        if escaped is not None:
            return "{" + escaped + "}"
        return str(lookup(name, namespace, "{" + name + "}"))

    return _PLACEHOLDER.sub(substitute, text)

"""What an evaluation ran with (its *setup*), and what changed in it since a baseline.

``Evaluation.setup`` holds a hash of the cases (their inputs, expected answers and tags) and,
per variant, the instructions, the model, the settings (plain values only: no header, no
body, no key), the tools (each name with a hash of its schema) and the graders' names.
``save`` writes it (credentials hidden), ``load`` reads it back, and ``diff`` says in words
what differs from the baseline's (``EvaluationDiff.setup_changes``)::

    variant 'formal': instructions changed: Answer [-briefly.-] {+formally.+}
    3 cases added
"""

from __future__ import annotations

import difflib
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fragola_nb.core.agent import Agent
    from fragola_nb.experiments.evaluate.cases import Case
    from fragola_nb.experiments.evaluate.evaluation import Evaluation

__all__ = ["make_setup", "setup_changes"]

_HIDDEN = frozenset({"extra_headers", "extra_query", "extra_body", "api_key", "headers",
                     "default_headers", "timeout"})
_SHOWN = 160  # characters of a text diff


def _hash(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def make_setup(cases: Sequence[Case], agents: Mapping[str, Agent], default_model: str | None,
               graders: Sequence[str], repeat: int) -> dict[str, Any]:
    """The setup of an evaluation about to run ``cases`` on the variants' ``agents``."""
    variants = {}
    for name, agent in agents.items():
        options = agent.options
        settings = {key: value for key, value in sorted(options.model_settings.items())
                    if key not in _HIDDEN and key != "model"
                    and (value is None or isinstance(value, (str, int, float, bool)))}
        variants[name] = {
            "instructions": options.instructions,
            "model": str(options.model_settings.get("model") or default_model or ""),
            "settings": settings,
            "tools": {tool.name: _hash(tool.definition) for tool in options.tools},
            "graders": list(graders)}
    return {"cases": _hash([[c.input, c.expected, list(c.tags)] for c in cases]),
            "repeat": repeat, "variants": variants}


def setup_changes(baseline: Evaluation, current: Evaluation) -> list[str]:
    """What differs between the two runs' setups and cases, one line each."""
    lines = _case_changes(baseline, current)
    old, new = baseline.setup, current.setup
    if old is None or new is None:
        which = "the baseline" if old is None else "this run"
        return [*lines, f"{which} has no setup recorded (saved before setups were kept): "
                        "its instructions, models and tools cannot be compared"]
    if old.get("repeat") != new.get("repeat"):
        lines.append(f"repeat {old.get('repeat')} → {new.get('repeat')}")
    was, now = old.get("variants") or {}, new.get("variants") or {}
    lines += [f"variant {name!r} added" for name in now if name not in was]
    lines += [f"variant {name!r} removed" for name in was if name not in now]
    for name in now:
        if name in was:
            lines += [f"variant {name!r}: {line}" for line in _variant_changes(was[name],
                                                                               now[name])]
    return lines


def _case_changes(baseline: Evaluation, current: Evaluation) -> list[str]:
    def cases(evaluation: Evaluation) -> dict[str, str]:
        found: dict[str, str] = {}
        for row in evaluation:
            key = json.dumps(row.input, ensure_ascii=False, sort_keys=True)
            found.setdefault(key, _hash([row.expected, list(row.tags)]))
        return found

    old, new = cases(baseline), cases(current)
    lines = []
    for count, what in ((sum(1 for k in new if k not in old), "added"),
                        (sum(1 for k in old if k not in new), "removed"),
                        (sum(1 for k in new if k in old and old[k] != new[k]),
                         "changed (expected answer or tags)")):
        if count:
            lines.append(f"{count} case{'s' if count != 1 else ''} {what}")
    return lines


def _variant_changes(was: Mapping[str, Any], now: Mapping[str, Any]) -> list[str]:
    lines = []
    if was.get("instructions") != now.get("instructions"):
        lines.append("instructions changed: " + word_diff(was.get("instructions") or "",
                                                           now.get("instructions") or ""))
    if was.get("model") != now.get("model"):
        lines.append(f"model {was.get('model')!r} → {now.get('model')!r}")
    old_settings, new_settings = was.get("settings") or {}, now.get("settings") or {}
    for key in sorted(set(old_settings) | set(new_settings)):
        if old_settings.get(key) != new_settings.get(key):
            lines.append(f"setting {key}: {_said(old_settings, key)} → "
                         f"{_said(new_settings, key)}")
    old_tools, new_tools = was.get("tools") or {}, now.get("tools") or {}
    lines += [f"tool {t!r} added" for t in new_tools if t not in old_tools]
    lines += [f"tool {t!r} removed" for t in old_tools if t not in new_tools]
    lines += [f"tool {t!r}: schema changed" for t in new_tools
              if t in old_tools and old_tools[t] != new_tools[t]]
    old_graders, new_graders = list(was.get("graders") or ()), list(now.get("graders") or ())
    lines += [f"grader {g!r} added" for g in new_graders if g not in old_graders]
    lines += [f"grader {g!r} removed" for g in old_graders if g not in new_graders]
    return lines


def _said(settings: Mapping[str, Any], key: str) -> str:
    return repr(settings[key]) if key in settings else "unset"


def word_diff(before: str, after: str) -> str:
    """A short word diff: ``Answer [-briefly.-] {+formally.+}`` (removed, then added),
    equal stretches cut to their ends; at most 160 characters."""
    old, new = before.split(), after.split()
    parts: list[str] = []
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    for kind, i1, i2, j1, j2 in matcher.get_opcodes():
        if kind == "equal":
            parts.append(_cut(old[i1:i2]))
            continue
        if i2 > i1:
            parts.append("[-" + " ".join(old[i1:i2]) + "-]")
        if j2 > j1:
            parts.append("{+" + " ".join(new[j1:j2]) + "+}")
    text = " ".join(part for part in parts if part) or "(whitespace only)"
    return text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"


def _cut(words: Iterable[str]) -> str:
    words = list(words)
    return " ".join(words) if len(words) <= 6 else " ".join([*words[:2], "…", *words[-2:]])

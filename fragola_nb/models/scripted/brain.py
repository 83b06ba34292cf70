"""A deterministic, rule-based brain for offline demos.

``ScriptedModel(brain=demo_brain)`` answers every request once the script is empty, so the
notebooks run without an API key and still show tool calls, tool results, JSON mode and the
effect of instructions::

    demo_brain({"messages": [{"role": "user", "content": "How warm is it in Oslo?"}],
                "tools": [{"type": "function", "function": {
                    "name": "lookup", "description": "current temperature of a city", ...}}]})
    # -> tool_calls(call("lookup", {"city": "Oslo"}))

The rules, in order (the README's "The offline demo model" has them in full):

0. A judge's request (``fragola_nb.graders.judge``) gets a fixed score by a stated rule
   (``fragola_nb.models.scripted.judging``); a simulated user's (``SimulatedUser``) says
   its goal's quoted phrases one per turn, then ``[done]``
   (``fragola_nb.models.scripted.simulating``).
1. ``response_format`` gets a JSON document generated from the schema (``json_schema``, or
   ``json_object`` with llama.cpp's ``schema`` field), or ``{"reply": ...}``.
2. A last message from the user, with tools, gets a call to the tool that matches the user's
   words best: first by the words of its name, then of its argument names, then of its
   description (a small table of related words counts "warm" as "temperature"). No match, no
   call (unless ``tool_choice`` asks for one). Arguments come from the user's words.
3. Trailing tool results get one sentence each: ``The tool NAME returned: RESULT.``
4. Anything else gets an echo: ``(scripted model) You said: ...``.

Text answers (3 and 4) follow keyword rules read from the instructions (``be brief``, ``step by
step``, ``bullet points``, a language, a style, a letter case: see ``manner``) and then say
which they followed. The same request always gets the same answer.
"""

from __future__ import annotations

import json
import re
from typing import Any

from fragola_nb.models.scripted.fill import STOP_WORDS, WORD, Filler, stem
from fragola_nb.models.scripted.items import Item, ToolCalls, call, reply, tool_calls
from fragola_nb.models.scripted.judging import judge_request
from fragola_nb.models.scripted.manner import Answer, follow, read_instructions
from fragola_nb.models.scripted.simulating import simulated_request

__all__ = ["RELATED_WORDS", "demo_brain", "text_of"]

_NAME_SPLIT = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])|[^A-Za-z0-9]+")
# Verbs that start many tool names: they only break ties, they never pick a tool alone.
_GENERIC = frozenset("get set do run make fetch call tool func function".split())
RELATED_WORDS: tuple[frozenset[str], ...] = tuple(
    frozenset(stem(w) for w in group.split())
    for group in (
        "temperature warm hot cold chilly freezing degree heat celsius fahrenheit",
        "weather forecast rain raining sunny snow snowing wind windy umbrella",
        "time clock hour o'clock late early",
        "date day calendar tomorrow yesterday",
        "price cost much expensive cheap pay",
        "distance far km kilometre kilometer mile",
        "add plus sum total calculate compute",
        "search lookup look",
    )
)
"""Groups of words the tool matcher treats as the same (a user who says "warm" means a
tool about "temperature"): a word of the message brings in its whole group."""


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


def _name_words(name: str) -> set[str]:
    return {stem(w) for w in _NAME_SPLIT.split(name) if w} - STOP_WORDS


def _prose_words(text: Any) -> set[str]:
    return {stem(w) for w in WORD.findall(text)} - STOP_WORDS if isinstance(text, str) else set()


def _properties(tool: dict[str, Any]) -> dict[str, Any]:
    params = tool.get("parameters")
    props = params.get("properties") if isinstance(params, dict) else None
    return props if isinstance(props, dict) else {}


def _score(tool: dict[str, Any], said: set[str]) -> tuple[int, int, int, int]:
    """How well ``tool`` matches the words ``said``: by name, argument names, description
    (its own and its arguments'); then generic verbs (``get``...) that only break ties."""
    name = _name_words(str(tool.get("name", "")))
    props = _properties(tool)
    args = set().union(*(_name_words(str(p)) for p in props))
    about = _prose_words(tool.get("description")).union(
        *(_prose_words(p.get("description")) for p in props.values() if isinstance(p, dict))
    )
    specific = said - _GENERIC
    return (len(name & specific), len(args & specific), len(about & specific),
            len(name & said & _GENERIC))


def _pick_tool(request: dict[str, Any], user_text: str) -> dict[str, Any] | None:
    choice = request.get("tool_choice")
    offered = request.get("tools")
    tools = [
        t["function"]
        for t in (offered if isinstance(offered, list) else ())
        if isinstance(t, dict)
        and t.get("type") == "function"
        and isinstance(t.get("function"), dict)
    ]
    if choice == "none" or not tools:
        return None
    if isinstance(choice, dict):
        wanted = (choice.get("function") or {}).get("name")
        return next((t for t in tools if t.get("name") == wanted), None)
    said = {stem(w) for w in WORD.findall(user_text)} - STOP_WORDS
    said = said.union(*(group for group in RELATED_WORDS if group & said))
    best, best_score = None, (0, 0, 0, 0)
    for tool in tools:
        score = _score(tool, said)
        if any(score[:3]) and score > best_score:  # ties: the first tool listed
            best, best_score = tool, score
    return best or (tools[0] if choice == "required" else None)


def _results(messages: list[dict[str, Any]], user_text: str) -> Answer:
    """The trailing tool results, told in full, alone, and step by step."""
    start = len(messages)
    while start and messages[start - 1].get("role") == "tool":
        start -= 1
    asked: dict[str, tuple[str, str]] = {}
    for message in reversed(messages[:start]):
        if message.get("role") == "assistant" and isinstance(message.get("tool_calls"), list):
            for tc in message["tool_calls"]:
                if isinstance(tc, dict) and isinstance(tc.get("function"), dict):
                    function = tc["function"]
                    asked[str(tc.get("id"))] = (str(function.get("name")),
                                                str(function.get("arguments", "")))
            break
    full, results, steps = [], [], [f"You asked: {user_text}"] if user_text else []
    for result in messages[start:]:
        name, arguments = asked.get(str(result.get("tool_call_id")), ("", ""))
        content = text_of(result.get("content")).strip().rstrip(".")
        tool = f"The tool {name}" if name else "The tool"
        full.append(f"{tool} returned: {content}.")
        results.append(content)
        if name:
            steps.append(f"I called {name} with {arguments or '{}'}.")
        steps.append(f"{tool} returned: {content}.")
    answer = "; ".join(results)
    steps.append(f"So the answer is: {answer}." if len(results) == 1
                 else f"So the answers are: {answer}.")
    return Answer(tuple(full), f"{answer}.", tuple(steps))


def _echo(user_text: str) -> Answer:
    if not user_text:
        return Answer(("(scripted model) Hello!",), "Hello!",
                      ("Hello!", "I am the offline demo model: I answer by simple rules."))
    first = re.split(r"(?<=[.!?])\s", user_text.strip(), maxsplit=1)[0]
    words = first.split()
    short = " ".join(words[:12]) + (" ..." if len(words) > 12 else "")
    return Answer(
        (f"(scripted model) You said: {user_text}",),
        f"You said: {short}",
        (f"You said: {user_text}",
         "I am the offline demo model: with no tool that matches, I repeat your words."),
    )


def demo_brain(request: dict[str, Any]) -> Item:
    """Answer ``request`` (a Chat Completions body) by simple, deterministic rules."""
    sent = request.get("messages")
    messages = [m for m in (sent if isinstance(sent, list) else ()) if isinstance(m, dict)]
    user_text = next(
        (text_of(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), ""
    )
    judged = judge_request(messages)
    if judged is not None:
        choice = request.get("tool_choice")  # JSON mode "tool": the answer is a forced call
        if isinstance(choice, dict) and isinstance(choice.get("function"), dict):
            return tool_calls(call(str(choice["function"].get("name")), judged))
        return reply(json.dumps(judged))
    playing = simulated_request(messages)
    if playing is not None:
        return reply(playing)
    response_format = request.get("response_format")
    if isinstance(response_format, dict):
        if response_format.get("type") == "json_schema":
            about = response_format.get("json_schema")
            schema = (about.get("schema") if isinstance(about, dict) else None) or {}
            return reply(json.dumps(Filler(user_text).value(schema, schema)))
        if response_format.get("type") == "json_object":
            schema = response_format.get("schema")  # llama.cpp's way to pass a schema
            if isinstance(schema, dict):
                return reply(json.dumps(Filler(user_text).value(schema, schema)))
            return reply(json.dumps({"reply": _echo(user_text).full[0]}))
    last = messages[-1].get("role") if messages else None
    if last == "user":
        tool = _pick_tool(request, user_text)
        if tool is not None:
            return _call(tool, user_text)
    answer = _results(messages, user_text) if last == "tool" else _echo(user_text)
    return reply(follow(read_instructions(messages, text_of), answer))


def _call(tool: dict[str, Any], user_text: str) -> ToolCalls:
    name = str(tool.get("name", ""))
    params = tool.get("parameters") or {"type": "object", "properties": {}}
    filler = Filler(user_text, spare_words=True, skip=frozenset(_name_words(name)))
    args = filler.value(params, params)
    return tool_calls(call(name, args if isinstance(args, dict) else {}))

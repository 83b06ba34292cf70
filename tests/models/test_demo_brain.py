"""The offline demo model for teachers: it picks tools by name, argument names and description,
follows the documented instruction rules (and says which), answers deterministically, and a
scripted Fragola gives one agent its own rewindable script while the others keep the brain."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from hypothesis import given, settings
from hypothesis import strategies as st
from support.helpers import assert_valid_history

from fragola_nb import BadUsage, Fragola, ModelHTTPError, tool
from fragola_nb.models.scripted import (
    SCRIPT_HEADER,
    Reply,
    ToolCalls,
    call,
    demo_brain,
    reply,
    tool_calls,
)


def function(name: str, description: str = "", **params: dict[str, Any]) -> dict[str, Any]:
    schema = {"type": "object", "properties": params, "required": list(params)}
    return {"type": "function",
            "function": {"name": name, "description": description, "parameters": schema}}


def picked(text: str, *tools: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    item = demo_brain({"messages": [{"role": "user", "content": text}], "tools": list(tools)})
    if isinstance(item, Reply):
        return None
    assert isinstance(item, ToolCalls)
    (only,) = item.calls
    return only.name, json.loads(only.arguments)


STRING = {"type": "string"}
CONVERT = function("convert", "Convert an amount of money between currencies",
                   amount={"type": "number"}, currency=STRING)
LOOKUP = function("lookup", "current temperature of a city", city=STRING)


# -- which tool ---------------------------------------------------------------------------


def test_a_tool_is_picked_by_its_description_and_related_words() -> None:
    # "warm" is in the related-words group of "temperature"; nothing matches the name.
    assert picked("How warm is it in Oslo?", CONVERT, LOOKUP) == ("lookup", {"city": "Oslo"})
    assert picked("Convert 20 dollars", LOOKUP, CONVERT) == (
        "convert", {"amount": 20, "currency": "dollars"})


def test_a_tool_is_picked_by_an_argument_name() -> None:
    first = function("first", city=STRING)
    second = function("second", isbn=STRING)
    assert picked('What is the isbn of "Dune"?', first, second) == ("second", {"isbn": "Dune"})


def test_the_name_counts_before_argument_names_and_description() -> None:
    by_name = function("temperature_now", place=STRING)
    by_words = function("other", "the temperature of a place", temperature=STRING)
    assert picked("Temperature in Rome?", by_words, by_name) == (
        "temperature_now", {"place": "Rome"})


def test_no_tool_is_called_when_no_word_matches() -> None:
    assert picked("Hello! I have some conversions for you.", LOOKUP) is None
    assert picked("Say hello to me", function("km_to_miles", km={"type": "number"})) is None


def tool_def(name: str, **props: str) -> dict[str, Any]:
    return {"type": "function", "function": {
        "name": name, "description": "",
        "parameters": {"type": "object", "properties": {k: {"type": v} for k, v in props.items()}}}}


def test_a_name_that_starts_the_sentence_is_taken_whole() -> None:
    schema = {"type": "object", "properties": {"person": {"type": "string"},
                                                "year": {"type": "integer"}}}
    request = {"messages": [{"role": "user", "content": "Ada Lovelace was born in 1815."}],
               "response_format": {"type": "json_schema",
                                   "json_schema": {"name": "p", "schema": schema}}}
    answer = demo_brain(request)
    assert isinstance(answer, Reply)
    assert json.loads(answer.text) == {"person": "Ada Lovelace", "year": 1815}
    # A sentence's first word alone is still not a name ("Convert", "Is").
    request = {"messages": [{"role": "user", "content": "Is Paris sunny? Tell me."}],
               "tools": [tool_def("get_weather", city="string")]}
    called = demo_brain(request)
    assert isinstance(called, ToolCalls)
    assert json.loads(called.calls[0].arguments) == {"city": "Paris"}


def test_a_string_argument_takes_a_number_from_the_message_as_written() -> None:
    # Arguments come from the message: a code such as an ISBN before other words, and a
    # plain number when no word is left (a number argument takes numbers first anyway).
    request = {"messages": [{"role": "user", "content": "find the book 978-3-16-148410-0"}],
               "tools": [tool_def("find_book", isbn="string")]}
    called = demo_brain(request)
    assert isinstance(called, ToolCalls)
    assert json.loads(called.calls[0].arguments) == {"isbn": "978-3-16-148410-0"}
    request = {"messages": [{"role": "user", "content": "track order 12345"}],
               "tools": [tool_def("track_order", order_id="string")]}
    called = demo_brain(request)
    assert isinstance(called, ToolCalls)
    assert json.loads(called.calls[0].arguments) == {"order_id": "12345"}


# -- instructions -------------------------------------------------------------------------

RESULTS = [
    {"role": "user", "content": "How warm is it in Oslo?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function",
         "function": {"name": "lookup", "arguments": '{"city": "Oslo"}'}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "12 degrees"},
]


def answer(instructions: str | None, messages: list[dict[str, Any]] = RESULTS) -> str:
    system = [{"role": "system", "content": instructions}] if instructions else []
    item = demo_brain({"messages": [*system, *messages], "tools": [LOOKUP]})
    assert isinstance(item, Reply)
    return item.text


PLAIN = "The tool lookup returned: 12 degrees."


@pytest.mark.parametrize(("instructions", "expected"), [
    (None, PLAIN),
    ("You are a weather bot.", PLAIN),  # no rule: the answer as it always was
    ("Be brief.", "12 degrees. (instructions followed: be brief)"),
    ("Answer in one sentence.", "12 degrees. (instructions followed: be brief)"),
    ("Explain it step by step.",
     "1. You asked: How warm is it in Oslo?\n"
     '2. I called lookup with {"city": "Oslo"}.\n'
     "3. The tool lookup returned: 12 degrees.\n"
     "4. So the answer is: 12 degrees.\n"
     "(instructions followed: step by step)"),
    ("Use bullet points.", f"- {PLAIN}\n(instructions followed: bullet points)"),
    ("Answer in French.", f"Voici ma réponse : {PLAIN} (instructions followed: in French)"),
    ("Réponds en français.", f"Voici ma réponse : {PLAIN} (instructions followed: in French)"),
    ("Answer in Spanish.", f"Esta es mi respuesta: {PLAIN} (instructions followed: in Spanish)"),
    ("Talk like a pirate.", f"Arr! {PLAIN} Yo-ho-ho! (instructions followed: like a pirate)"),
    ("Be formal.", f"Dear user, {PLAIN} Kind regards. (instructions followed: formal)"),
    ("Be friendly.", f"Hey! {PLAIN} Cheers! (instructions followed: casual)"),
    ("Be formal, like a pirate.",  # one style: the first of the table
     f"Arr! {PLAIN} Yo-ho-ho! (instructions followed: like a pirate)"),
    ("ANSWER IN UPPERCASE", f"{PLAIN.upper()} (instructions followed: uppercase)"),
    ("Write in lowercase.", f"{PLAIN.lower()} (instructions followed: lowercase)"),
])
def test_each_instruction_rule_changes_the_answer_as_documented(
    instructions: str | None, expected: str
) -> None:
    assert answer(instructions) == expected


def test_rules_combine_one_of_each_kind_in_table_order() -> None:
    # brief beats step by step, French beats Spanish; bullets combine with any.
    said = "Be brief, step by step, in bullet points, in Spanish or French, pirate, shout."
    assert answer(said) == (
        "ARR!\nVOICI MA RÉPONSE :\n- 12 DEGREES.\nYO-HO-HO!\n"
        "(instructions followed: be brief, bullet points, in French, like a pirate, uppercase)"
    )


def test_the_echo_follows_the_rules_too() -> None:
    hello = [{"role": "user", "content": "Hi there. How are you?"}]
    assert answer(None, hello) == "(scripted model) You said: Hi there. How are you?"
    assert answer("be concise", hello) == (
        "You said: Hi there. (instructions followed: be brief)")
    developer = demo_brain({"messages": [{"role": "developer", "content": "Be a pirate"},
                                         *hello]})
    assert developer == reply("Arr! (scripted model) You said: Hi there. How are you? Yo-ho-ho! "
                              "(instructions followed: like a pirate)")


def test_json_answers_and_tool_calls_ignore_the_rules() -> None:
    schema = {"type": "object", "properties": {"city": STRING}, "required": ["city"]}
    request = {
        "messages": [{"role": "system", "content": "Answer like a pirate, in uppercase."},
                     {"role": "user", "content": "city is Oslo"}],
        "response_format": {"type": "json_schema",
                            "json_schema": {"name": "Place", "schema": schema}},
    }
    assert demo_brain(request) == reply('{"city": "Oslo"}')
    request = {"messages": [*request["messages"][:1], RESULTS[0]], "tools": [LOOKUP]}
    assert demo_brain(request) == tool_calls(call("lookup", {"city": "Oslo"}))


def test_the_same_request_gets_the_same_answer() -> None:
    request = {"messages": [{"role": "system", "content": "Explain step by step, in German."},
                            *RESULTS], "tools": [LOOKUP, CONVERT]}
    copy = json.loads(json.dumps(request))
    assert demo_brain(request) == demo_brain(copy) == demo_brain(request)
    assert request == copy  # and the request is left as it was


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=12,
)
SCHEMA = st.recursive(
    st.fixed_dictionaries({}, optional={
        "type": st.sampled_from(["string", "integer", "number", "boolean", "null", "object",
                                 "array", ["string", "null"]]) | JSON,
        "minimum": JSON, "maxLength": JSON, "minItems": JSON, "format": JSON,
        "enum": JSON, "$ref": st.sampled_from(["#", "#/$defs/X", "#/nope"]),
    }),
    lambda inner: st.fixed_dictionaries({"type": st.just("object")}, optional={
        "properties": st.dictionaries(st.text(max_size=8), inner, max_size=3) | JSON,
        "anyOf": st.lists(inner, max_size=2), "allOf": st.lists(inner, max_size=2),
        "items": inner, "$defs": st.fixed_dictionaries({"X": inner}),
    }),
    max_leaves=8,
)
WORDS = st.text(st.sampled_from(list("abcOslo warm 12 \"'.!?-_\n")), max_size=40) | st.sampled_from(
    ["be brief", "step by step", "bullet points", "in French", "pirate", "UPPERCASE",
     "How warm is it in Oslo?", "convert 3 km", ""])
CONTENT = WORDS | st.none() | JSON | st.lists(
    st.fixed_dictionaries({"type": st.sampled_from(["text", "image_url", "input_audio"])},
                          optional={"text": WORDS}), max_size=3)
MESSAGE = st.fixed_dictionaries(
    {"role": st.sampled_from(["system", "developer", "user", "assistant", "tool"]),
     "content": CONTENT},
    optional={"tool_call_id": st.sampled_from(["c1", "c2"]) | JSON,
              "tool_calls": st.lists(st.fixed_dictionaries(
                  {"id": st.sampled_from(["c1", "c2"]) | JSON,
                   "function": st.fixed_dictionaries({"name": WORDS, "arguments": JSON})}),
                  max_size=2) | JSON},
)
TOOL = st.fixed_dictionaries(
    {"type": st.just("function"),
     "function": st.fixed_dictionaries({"name": WORDS.filter(bool)},
                                       optional={"description": WORDS | JSON,
                                                 "parameters": SCHEMA | JSON})},
)


@settings(max_examples=300, deadline=None)
@given(
    messages=st.lists(MESSAGE, max_size=5) | JSON,
    tools=st.lists(TOOL, max_size=3),
    extra=st.fixed_dictionaries({}, optional={
        "tool_choice": st.sampled_from(["auto", "none", "required"]) | JSON,
        "response_format": st.sampled_from([{"type": "json_object"}, {"type": "text"}])
        | st.fixed_dictionaries({"type": st.just("json_schema"),
                                 "json_schema": st.fixed_dictionaries({"schema": SCHEMA})}),
    }),
)
def test_the_brain_always_answers_with_a_valid_item(
    messages: Any, tools: list[dict[str, Any]], extra: dict[str, Any]
) -> None:
    request = {"messages": messages, "tools": tools, **extra}
    item = demo_brain(request)
    assert item == demo_brain(request)
    if isinstance(item, ToolCalls):
        names = {t["function"]["name"] for t in tools}
        for made in item.calls:
            assert made.name in names and isinstance(json.loads(made.arguments), dict)
    else:
        assert isinstance(item, Reply) and isinstance(item.text, str)
        if isinstance(extra.get("response_format"), dict) and extra["response_format"].get(
                "type", "").startswith("json"):
            json.loads(item.text)


# -- one agent's own script ---------------------------------------------------------------


@tool
def add(x: int, y: int) -> int:
    """Add two numbers."""
    return x + y


@pytest_asyncio.fixture
async def lesson() -> AsyncIterator[Fragola]:
    fragola = Fragola.scripted()
    try:
        yield fragola
    finally:
        await fragola.aclose()


async def said(agent: Any, text: str) -> str:
    content = (await agent.user_message(text)).messages[-1]["content"]
    assert isinstance(content, str)
    return content


RUN_OUT = ("agent 'tutor' used all 2 scripted answers: re-run the cell that builds the script, "
           "or pass brain=demo_brain to fragola.script(...) to answer after it")


@pytest.mark.asyncio
async def test_a_script_answers_for_its_agent_only(lesson: Fragola) -> None:
    tutor = lesson.agent(name="tutor", tools=[add])
    other = lesson.agent(name="other", tools=[add])
    script = lesson.script(tutor, [tool_calls(call("add", {"x": 2, "y": 3})), reply("Five!")])

    assert await said(other, "Add 1 and 2") == "The tool add returned: 3."  # the demo brain
    assert await said(tutor, "Anything at all") == "Five!"
    assert [m["content"] for m in tutor.state.messages if m["role"] == "tool"] == ["5"]
    assert (script.used, script.remaining) == (2, 0)
    assert await said(other, "hi") == "(scripted model) You said: hi"
    model = lesson.scripted_model
    assert model is not None
    sent = [h.get(SCRIPT_HEADER) for h in model.headers]
    assert sent == [None, None, tutor.id, tutor.id, None]


@pytest.mark.asyncio
async def test_a_script_that_runs_out_says_so_in_one_line(lesson: Fragola) -> None:
    tutor = lesson.agent(name="tutor")
    lesson.script(tutor, [reply("one"), reply("two")])
    assert [await said(tutor, "a"), await said(tutor, "b")] == ["one", "two"]

    with pytest.raises(ModelHTTPError) as caught:
        await tutor.user_message("c")
    text = str(caught.value)
    assert text == RUN_OUT  # the fix, without an HTTP status that reads like an API failure
    assert "\n" not in text
    assert_valid_history(tutor.state.messages)
    assert tutor.state.status == "idle"


@pytest.mark.asyncio
async def test_rewind_and_rebuilding_start_the_script_over(lesson: Fragola) -> None:
    tutor = lesson.agent(name="tutor")
    script = lesson.script(tutor, [reply("one"), reply("two")])
    first = [await said(tutor, "a"), await said(tutor, "b")]
    script.rewind()
    assert script.remaining == 2
    assert [await said(tutor, "a"), await said(tutor, "b")] == first == ["one", "two"]
    # Re-running the cell that builds it: a new script replaces the old one.
    rebuilt = lesson.script(tutor, [reply("three")])
    assert await said(tutor, "c") == "three" and rebuilt.remaining == 0
    with pytest.raises(ModelHTTPError, match="used all 1 scripted answer: "):
        await tutor.user_message("d")


@pytest.mark.asyncio
async def test_a_brain_answers_after_the_script(lesson: Fragola) -> None:
    tutor = lesson.agent(name="tutor", instructions="Be brief.")
    lesson.script(tutor, [reply("scripted")], brain=demo_brain)
    assert await said(tutor, "a") == "scripted"
    assert await said(tutor, "Hi there") == "You said: Hi there (instructions followed: be brief)"


@pytest.mark.asyncio
async def test_forks_share_the_script_until_given_their_own(lesson: Fragola) -> None:
    tutor = lesson.agent(name="tutor")
    lesson.script(tutor, [reply("one"), reply("two"), reply("three")])
    assert await said(tutor, "a") == "one"
    shared = tutor.fork("shared")
    assert await said(shared, "b") == "two"
    own = tutor.fork("own")
    lesson.script(own, [reply("mine")])
    assert await said(own, "c") == "mine"
    assert await said(tutor, "d") == "three"  # the parent's script was not touched


@pytest.mark.asyncio
async def test_script_refuses_what_cannot_work(lesson: Fragola) -> None:
    tutor = lesson.agent(name="tutor", model_settings={"extra_headers": {"x-class": "4b"}})
    with pytest.raises(BadUsage, match=r"answers\[1\] is a str, not a script item"):
        lesson.script(tutor, [reply("ok"), "just text"])
    with pytest.raises(BadUsage, match="a list of script items"):
        lesson.script(tutor, "reply")  # type: ignore[arg-type]
    with pytest.raises(BadUsage, match="at least one answer"):
        lesson.script(tutor, [])
    elsewhere = Fragola.scripted()
    try:
        with pytest.raises(BadUsage, match="an agent made by this Fragola"):
            elsewhere.script(tutor, [reply("x")])
    finally:
        await elsewhere.aclose()
    online = Fragola(api_key="sk-test", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(BadUsage, match="needs a scripted Fragola"):
        online.script(online.agent(name="a"), [reply("x")])
    lesson.script(tutor, [reply("ok")])  # the agent's own headers are kept
    assert tutor.options.model_settings["extra_headers"] == {
        "x-class": "4b", SCRIPT_HEADER: tutor.id}


def judged(rubric: str, answer: str, expected: str | None = None,
           scale: tuple[float, float] = (1, 5)) -> dict[str, Any]:
    """The demo brain's verdict on a judge's request, as ``judge()`` writes one."""
    from fragola_nb.core.usage import Usage
    from fragola_nb.experiments.graders.base import GradedRow
    from fragola_nb.experiments.graders.judge import judge

    asking = judge(rubric, scale=scale)
    row = GradedRow("the question", expected, answer, None, Usage(), None)
    item = demo_brain({"messages": [{"role": "system", "content": asking.system_prompt()},
                                    {"role": "user", "content": asking.question(row)}]})
    assert isinstance(item, Reply)
    return dict(json.loads(item.text))


def test_a_judge_is_scored_by_the_rubrics_quoted_phrases_found_in_the_answer() -> None:
    assert judged('Says “Oslo”, `Norway` and "capital".', "Oslo is in norway.") == {
        "score": 3.67, "reason": 'scripted judge: 2 of 3 phrases of the rubric in the answer '
        '(found "Oslo", "Norway"; missing "capital"): 1 + 2/3 × (5 - 1) = 3.67'}
    assert judged("Correct?", "It is Oslo.", expected="Oslo", scale=(0, 10))["score"] == 10
    assert judged("Correct?", "It is Bergen.", expected="Oslo")["score"] == 1
    assert judged("Is it polite?", "Hello!") == {
        "score": 5, "reason": "scripted judge: nothing to look for in the rubric, so the top "
                              "of the scale, 5"}
    # Only a judge's request is judged: a rubric in other instructions is not.
    plain = demo_brain({"messages": [{"role": "system", "content": 'Rubric:\n"x"'},
                                     {"role": "user", "content": "hi"}]})
    assert isinstance(plain, Reply) and "You said: hi" in plain.text

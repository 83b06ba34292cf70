"""Fragola and agents: construction, options, and what each option puts on the wire.

Every request goes to the ``model`` fixture (a scripted OpenAI-compatible server), which checks
it against the official request schema at teardown.
"""

from __future__ import annotations

from typing import Any

import httpx2
import openai
import pydantic
import pytest
from support.helpers import make_fragola
from support.openai_schema import validate_request

from fragola_nb import BadUsage, Fragola, InvalidToolDefinition, create_store, tool
from fragola_nb.models.scripted import ScriptedModel, call, reply, tool_calls


def header_recorder() -> tuple[httpx2.AsyncClient, list[httpx2.Headers]]:
    """A real HTTP client that notes the headers of every request it sends."""
    seen: list[httpx2.Headers] = []

    async def note(request: httpx2.Request) -> None:
        seen.append(request.headers)

    return httpx2.AsyncClient(event_hooks={"request": [note]}), seen


# -- Fragola --------------------------------------------------------------------------------


async def test_fragola_sends_gpt_4o_mini_by_default(model: ScriptedModel) -> None:
    model.push(reply("hi"))
    agent = make_fragola(model).agent(name="a")

    await agent.user_message("hello")

    assert model.requests[0]["model"] == "gpt-4o-mini"
    assert agent.model == "gpt-4o-mini"


async def test_fragola_model_is_the_model_of_every_request(model: ScriptedModel) -> None:
    model.push(reply("one"), reply("two"))
    fragola = make_fragola(model, model="gpt-6-astra")

    await fragola.agent(name="a").user_message("1")
    await fragola.agent(name="b").user_message("2")

    assert [r["model"] for r in model.requests] == ["gpt-6-astra", "gpt-6-astra"]


async def test_api_key_and_base_url_fall_back_to_the_environment(
    model: ScriptedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    monkeypatch.setenv("OPENAI_BASE_URL", model.base_url)
    http_client, seen = header_recorder()
    model.push(reply("hi"))

    fragola = Fragola(max_retries=0, http_client=http_client)
    state = await fragola.agent(name="a").user_message("hello")

    assert state.messages[-1] == {"role": "assistant", "content": "hi"}
    assert fragola.base_url == model.base_url
    assert seen[0]["authorization"] == "Bearer sk-from-env"
    await http_client.aclose()


async def test_explicit_api_key_and_base_url_win_over_the_environment(
    model: ScriptedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # nothing listens there
    http_client, seen = header_recorder()
    model.push(reply("hi"))

    fragola = Fragola(api_key="sk-explicit", base_url=model.base_url, max_retries=0,
                      http_client=http_client)
    await fragola.agent(name="a").user_message("hello")

    assert len(model.requests) == 1
    assert seen[0]["authorization"] == "Bearer sk-explicit"
    await http_client.aclose()


async def test_openai_client_options_reach_the_client(model: ScriptedModel) -> None:
    http_client, seen = header_recorder()
    model.push(reply("hi"))

    fragola = make_fragola(model, default_headers={"X-Fragola-Test": "yes"},
                           http_client=http_client)
    await fragola.agent(name="a").user_message("hello")

    assert seen[0]["x-fragola-test"] == "yes"
    await http_client.aclose()


def test_no_api_key_anywhere_is_bad_usage(monkeypatch: pytest.MonkeyPatch) -> None:
    # (A base URL alone needs no key: a local server, see tests/models/test_connection.py.)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)

    with pytest.raises(BadUsage, match="API key"):
        Fragola()


async def test_a_ready_openai_client_is_used_as_it_is(
    model: ScriptedModel, client: openai.AsyncOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # the client brings its own key
    model.push(reply("hi"))

    fragola = Fragola(model="m-1", client=client)
    state = await fragola.agent(name="a").user_message("hello")

    assert fragola.base_url == str(client.base_url)
    assert state.messages[-1] == {"role": "assistant", "content": "hi"}
    assert model.requests[0]["model"] == "m-1"


@pytest.mark.parametrize("bad_model", ["", 4])  # None: FRAGOLA_MODEL, else the default
def test_fragola_needs_a_model_name(bad_model: Any) -> None:
    with pytest.raises(BadUsage):
        Fragola(model=bad_model, api_key="test-key")


# -- agent metadata and defaults ------------------------------------------------------------


def test_agent_keeps_its_name_description_and_defaults(model: ScriptedModel) -> None:
    agent = make_fragola(model).agent(
        name="CustomerSupportBot",
        description="Handles initial customer inquiries and routing.",
        instructions="You are a polite customer support agent. Be concise.",
    )

    assert agent.name == "CustomerSupportBot"
    assert agent.description == "Handles initial customer inquiries and routing."
    assert agent.instructions == "You are a polite customer support agent. Be concise."
    options = agent.options
    assert options.use_developer_role is False
    assert options.model_settings == {}
    assert options.max_step == 5
    assert options.reset_step_count_after_user_message is True
    assert options.tools == []
    state = agent.state
    assert (state.messages, state.step_count, state.status, state.pending, state.outcome) == (
        [], 0, "idle", (), None,
    )


def test_agents_get_distinct_ids(model: ScriptedModel) -> None:
    fragola = make_fragola(model)

    ids = {fragola.agent(name="same").id for _ in range(20)}

    assert len(ids) == 20


# -- instructions ---------------------------------------------------------------------------


async def test_string_instructions_go_first_as_system_and_are_not_stored(
    model: ScriptedModel,
) -> None:
    model.push(reply("Paris."), reply("Berlin."))
    agent = make_fragola(model).agent(name="a", instructions="Be concise.")

    await agent.user_message("Capital of France?")
    state = await agent.user_message("Capital of Germany?")

    conversation = [
        {"role": "user", "content": "Capital of France?"},
        {"role": "assistant", "content": "Paris."},
        {"role": "user", "content": "Capital of Germany?"},
        {"role": "assistant", "content": "Berlin."},
    ]
    assert state.messages == conversation
    assert model.requests[0]["messages"] == [
        {"role": "system", "content": "Be concise."},
        conversation[0],
    ]
    assert model.requests[1]["messages"] == [
        {"role": "system", "content": "Be concise."},
        *conversation[:3],
    ]


async def test_list_instructions_are_joined_with_newlines(model: ScriptedModel) -> None:
    model.push(reply("ok"))
    agent = make_fragola(model).agent(name="a", instructions=["Be brief.", "Answer in French."])

    await agent.user_message("hi")

    assert agent.instructions == "Be brief.\nAnswer in French."
    assert model.requests[0]["messages"][0] == {
        "role": "system",
        "content": "Be brief.\nAnswer in French.",
    }


async def test_no_instructions_send_no_system_message(model: ScriptedModel) -> None:
    model.push(reply("ok"))
    agent = make_fragola(model).agent(name="a")

    await agent.user_message("hi")

    assert model.requests[0]["messages"] == [{"role": "user", "content": "hi"}]


async def test_set_instructions_changes_the_next_request(model: ScriptedModel) -> None:
    model.push(reply("1"), reply("2"), reply("3"), reply("4"))
    agent = make_fragola(model).agent(name="a")

    await agent.user_message("first")
    agent.set_instructions("Now be formal.")
    await agent.user_message("second")
    agent.context.set_instructions(["Line one.", "Line two."])
    await agent.user_message("third")
    agent.set_instructions(None)
    state = await agent.user_message("fourth")

    firsts = [request["messages"][0] for request in model.requests]
    assert firsts == [
        {"role": "user", "content": "first"},
        {"role": "system", "content": "Now be formal."},
        {"role": "system", "content": "Line one.\nLine two."},
        {"role": "user", "content": "first"},
    ]
    assert all(m["role"] in ("user", "assistant") for m in state.messages)
    assert len(state.messages) == 8


async def test_instructions_set_during_a_turn_reach_its_next_request(
    model: ScriptedModel,
) -> None:
    @tool
    def switch(context: Any) -> str:
        """Switch the persona."""
        context.set_instructions("You are a pirate.")
        return "switched"

    model.push(tool_calls(call("switch", {})), reply("Arr."))
    agent = make_fragola(model).agent(name="a", instructions="You are a clerk.", tools=[switch])

    await agent.user_message("go")

    assert [r["messages"][0]["content"] for r in model.requests] == [
        "You are a clerk.",
        "You are a pirate.",
    ]


async def test_use_developer_role_sends_instructions_as_developer(model: ScriptedModel) -> None:
    model.push(reply("ok"))
    agent = make_fragola(model).agent(name="a", instructions="Think first.",
                                      use_developer_role=True)

    state = await agent.user_message("hi")

    assert model.requests[0]["messages"] == [
        {"role": "developer", "content": "Think first."},
        {"role": "user", "content": "hi"},
    ]
    assert state.messages[0] == {"role": "user", "content": "hi"}


# -- model settings -------------------------------------------------------------------------


async def test_model_settings_are_passed_through_to_the_request_body(
    model: ScriptedModel,
) -> None:
    settings = {
        "model": "o3-mini",
        "temperature": 0.1,
        "max_tokens": 4000,
        "top_p": 0.9,
        "frequency_penalty": 0.5,
        "presence_penalty": -0.5,
        "logit_bias": {"50256": -100},
    }
    model.push(reply("ok"))
    fragola = make_fragola(model, model="gpt-6-astra")
    agent = fragola.agent(name="MathGenius", model_settings=settings)

    await agent.user_message("2 + 2?")

    request = model.requests[0]
    assert {key: request[key] for key in settings} == settings
    assert set(request) == {*settings, "messages"}
    assert agent.model == "o3-mini"
    assert fragola.model == "gpt-6-astra"


async def test_model_settings_are_copied_when_the_agent_is_made(model: ScriptedModel) -> None:
    settings: dict[str, Any] = {"temperature": 0.2}
    model.push(reply("ok"))
    agent = make_fragola(model).agent(name="a", model_settings=settings)

    settings["temperature"] = 1.5
    settings["top_p"] = 0.1
    await agent.user_message("hi")

    assert model.requests[0]["temperature"] == 0.2
    assert "top_p" not in model.requests[0]


async def test_each_agent_has_its_own_model_settings(model: ScriptedModel) -> None:
    model.push(reply("a"), reply("b"))
    fragola = make_fragola(model)
    cold = fragola.agent(name="cold", model_settings={"temperature": 0.0})
    plain = fragola.agent(name="plain")

    await cold.user_message("x")
    await plain.user_message("y")

    assert model.requests[0]["temperature"] == 0.0
    assert "temperature" not in model.requests[1]


# -- seeded messages, tools, stores ---------------------------------------------------------


async def test_seeded_messages_follow_the_instructions_and_stay_in_state(
    model: ScriptedModel,
) -> None:
    seed = [
        {"role": "user", "content": "Hi, I need help with my account."},
        {"role": "assistant", "content": "Hello! Can you provide your account ID?"},
    ]
    model.push(reply("Thanks, found it."))
    agent = make_fragola(model).agent(name="ReturningUserAgent",
                                      instructions="You are a helpful assistant.",
                                      messages=seed)
    assert agent.state.messages == seed

    state = await agent.user_message("It is 42.")

    assert model.requests[0]["messages"] == [
        {"role": "system", "content": "You are a helpful assistant."},
        *seed,
        {"role": "user", "content": "It is 42."},
    ]
    assert state.messages == [
        *seed,
        {"role": "user", "content": "It is 42."},
        {"role": "assistant", "content": "Thanks, found it."},
    ]


def test_seeded_messages_are_copied(model: ScriptedModel) -> None:
    seed = [{"role": "user", "content": "hello"}]
    agent = make_fragola(model).agent(name="a", messages=seed)

    seed.append({"role": "assistant", "content": "added later"})

    assert agent.state.messages == [{"role": "user", "content": "hello"}]


class Weather(pydantic.BaseModel):
    city: str


async def test_tools_are_offered_and_run(model: ScriptedModel) -> None:
    seen: list[Any] = []

    def get_weather(params: Weather) -> str:
        seen.append(params)
        return f"Sunny in {params.city}"

    weather = tool(name="get_weather", description="Current weather.", schema=Weather,
                   handler=get_weather)
    model.push(tool_calls(call("get_weather", {"city": "Paris"})), reply("It is sunny."))
    agent = make_fragola(model).agent(name="a", tools=[weather])

    state = await agent.user_message("Weather in Paris?")

    assert model.requests[0]["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Current weather.",
                "parameters": Weather.model_json_schema(),
            },
        }
    ]
    assert seen == [Weather(city="Paris")]
    assert state.messages[2] == {"role": "tool", "tool_call_id": "call_1",
                                 "content": "Sunny in Paris"}


async def test_an_agent_without_tools_sends_no_tools_key(model: ScriptedModel) -> None:
    model.push(reply("ok"))

    await make_fragola(model).agent(name="a").user_message("hi")

    assert "tools" not in model.requests[0]


async def test_stores_are_found_agent_first_then_fragola(model: ScriptedModel) -> None:
    shared = create_store({"hits": 0}, "shared")
    fragola_level = create_store("fragola", "who")
    agent_level = create_store("agent", "who")
    found: list[Any] = []

    @tool
    def look(context: Any) -> str:
        """Look at the stores."""
        found.append(context.get_store("who").get())
        context.get_store("shared").update(lambda v: {"hits": v["hits"] + 1})
        found.append(context.get_store("missing"))
        return "looked"

    fragola = make_fragola(model, stores=[shared, fragola_level])
    agent = fragola.agent(name="a", tools=[look], stores=[agent_level])
    other = fragola.agent(name="b")
    model.push(tool_calls(call("look", {})), reply("done"))

    await agent.user_message("look")

    assert found == ["agent", None]
    assert shared.get() == {"hits": 1}
    assert other.get_store("shared") is shared
    assert other.get_store("who") is fragola_level
    assert agent.stores == {"who": agent_level}


# -- bad options ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "options",
    [
        {"max_step": 0},
        {"max_step": -1},
        {"max_step": "3"},
        {"max_step": True},
        {"max_step": 2.5},
        {"model_settings": {"messages": []}},
        {"model_settings": {"tools": []}},
        {"model_settings": "fast"},
        {"model_settings": ["temperature"]},
        {"messages": "hello"},
        {"messages": ["hello"]},
        {"messages": [{"content": "no role"}]},
        {"messages": [{"role": "wizard", "content": "x"}]},
        {"instructions": 42},
        {"instructions": ["ok", 1]},
        {"stores": [create_store(1, "x"), create_store(2, "x")]},
        {"stores": ["not a store"]},
    ],
    ids=repr,
)
def test_bad_agent_options_are_bad_usage(model: ScriptedModel, options: dict[str, Any]) -> None:
    fragola = make_fragola(model)

    with pytest.raises(BadUsage):
        fragola.agent(name="a", **options)


@pytest.mark.parametrize("name", ["", None, 42, ["a"]])
def test_an_agent_needs_a_non_empty_string_name(model: ScriptedModel, name: Any) -> None:
    with pytest.raises(BadUsage, match="name"):
        make_fragola(model).agent(name=name)


def test_bad_tools_are_invalid_tool_definitions(model: ScriptedModel) -> None:
    @tool
    def ping() -> str:
        """Ping."""
        return "pong"

    fragola = make_fragola(model)
    with pytest.raises(InvalidToolDefinition, match="ping"):
        fragola.agent(name="a", tools=[ping, ping])
    with pytest.raises(InvalidToolDefinition):
        fragola.agent(name="a", tools=[object()])  # type: ignore[list-item]
    assert issubclass(InvalidToolDefinition, BadUsage)


# -- the request schema ---------------------------------------------------------------------


class Search(pydantic.BaseModel):
    query: str
    limit: int = 5


LOOKUP_SCHEMA = """{
    "type": "object",
    "properties": {"sku": {"type": "string"}, "warehouses": {"type": "array",
                   "items": {"type": "string"}}},
    "required": ["sku"]
}"""


async def test_a_rich_request_matches_the_openai_request_schema(model: ScriptedModel) -> None:
    """Instructions, three kinds of tool schema, multi-part content, tool results and model
    settings in one conversation; every request must be a valid CreateChatCompletionRequest
    (checked here and again by the ``model`` fixture at teardown)."""
    search = tool(name="search", description="Search the catalogue.", schema=Search,
                  handler=lambda params: [f"{params.query}-{i}" for i in range(params.limit)])
    lookup = tool(name="lookup", description="Stock of one SKU.", schema=LOOKUP_SCHEMA,
                  handler=lambda params: {"sku": params["sku"], "stock": 3})

    @tool
    def now() -> str:
        """The current time."""
        return "12:00"

    model.push(
        tool_calls(
            call("search", {"query": "lamp", "limit": 2}),
            call("lookup", {"sku": "L-1", "warehouses": ["north"]}),
            call("now", {}),
            content="Let me check.",
        ),
        reply("Two lamps; L-1 has 3 in stock."),
    )
    agent = make_fragola(model).agent(
        name="shop",
        instructions=["You run a shop.", "Use the tools."],
        model_settings={"temperature": 0.3, "max_tokens": 300, "top_p": 0.9,
                        "frequency_penalty": 0.1, "presence_penalty": 0.2,
                        "logit_bias": {"1234": 5}, "seed": 7, "stop": ["END"]},
        messages=[{"role": "user", "content": "Hello"},
                  {"role": "assistant", "content": "Hi! What do you need?"}],
        tools=[search, lookup, now],
    )

    state = await agent.user_message([
        {"type": "text", "text": "Do you have this lamp?"},
        {"type": "image_url", "image_url": {"url": "https://example.com/lamp.jpg",
                                            "detail": "low"}},
    ])

    assert state.outcome == "finished"
    assert len(model.requests) == 2
    for request in model.requests:
        validate_request(request)
    second = model.requests[1]
    assert [m["role"] for m in second["messages"]] == [
        "system", "user", "assistant", "user", "assistant", "tool", "tool", "tool",
    ]
    assert [m["content"] for m in second["messages"][-3:]] == [
        '["lamp-0", "lamp-1"]',
        '{"sku": "L-1", "stock": 3}',
        "12:00",
    ]
    assert [t["function"]["name"] for t in second["tools"]] == ["search", "lookup", "now"]


async def test_aclose_closes_the_client_and_stops_an_own_scripted_model():
    fragola = Fragola.scripted([reply("hi")])
    scripted = fragola.scripted_model
    assert scripted is not None
    base_url = scripted.base_url
    state = await fragola.agent("a").user_message("hello")
    assert state.messages[-1]["content"] == "hi"
    await fragola.aclose()
    after = openai.AsyncOpenAI(api_key="k", base_url=base_url, max_retries=0, timeout=2)
    with pytest.raises(openai.APIConnectionError):
        await after.models.list()


def test_from_env_offline_keeps_the_model_name_and_stores(monkeypatch, capsys):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    shared = create_store({"n": 1}, "shared")
    fragola = Fragola.from_env(model="gpt-4o", stores=[shared])
    try:
        assert fragola.offline and fragola.model == "gpt-4o"
        assert fragola.get_store("shared") is shared
        assert "running offline" in capsys.readouterr().err
    finally:
        assert fragola.scripted_model is not None
        fragola.scripted_model.stop()

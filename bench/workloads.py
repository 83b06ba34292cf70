"""The same agent workload written for each library.

One tool ``add(x: int)``, one user message ``"bench steps=K"``, K tool steps then a final
answer (the lean server decides from the request), a fresh conversation per run. Each
``make_*`` builds what a user would build once (client, agent definition) and returns
``run(k, stream) -> None`` running one conversation; ``await run.aclose()`` closes its
client (on the loop that used it).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import openai

MODEL = "bench-model"
Run = Callable[[int, bool], Awaitable[None]]


def prompt(k: int) -> str:
    return f"bench steps={k}"


def add(x: int) -> int:
    """Add one to x."""
    return x + 1


# 500 conversations connecting at once on a busy 2-core machine can take longer than the
# default 5 s connect timeout; every library gets the same generous timeout.
TIMEOUT = 120.0


def client(base_url: str) -> openai.AsyncOpenAI:
    """The client every library gets: same options, its own connection pool."""
    return openai.AsyncOpenAI(api_key="bench", base_url=base_url, max_retries=0,
                              timeout=TIMEOUT)


def answer_calls(messages: list[dict[str, Any]], content: str | None,
                 calls: list[dict[str, Any]]) -> None:
    """A hand-written loop's step: append the assistant message that asked for ``calls`` (no
    ``"content": null``, as fragola_nb sends it) and each call's ``add`` result."""
    assistant: dict[str, Any] = {"role": "assistant"}
    if content:
        assistant["content"] = content
    assistant["tool_calls"] = calls
    messages.append(assistant)
    for call in calls:
        result = add(**json.loads(call["function"]["arguments"]))
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": str(result)})


# -- the floor: a hand-written loop on the bare client ------------------------------------

# The floor sends the very bodies fragola_nb sends (checked by ``check_same_requests``): the
# same tool definition, and no ``"content": null`` on an assistant message that calls tools.
# (The peers send ``"content": null``, which costs them more in the openai client's
# ``maybe_transform``; see the README.)
FLOOR_TOOLS = [{
    "type": "function",
    "function": {
        "name": "add",
        "parameters": {
            "properties": {"x": {"title": "X", "type": "integer"}},
            "required": ["x"],
            "title": "add_arguments",
            "type": "object",
        },
        "description": "Add one to x.",
    },
}]


def make_floor(base_url: str) -> Run:
    bare = client(base_url)

    async def run(k: int, stream: bool) -> None:
        messages: list[dict[str, Any]] = [{"role": "user", "content": prompt(k)}]
        while True:
            if stream:
                content, calls = await _floor_stream(bare, messages)
            else:
                response = await bare.chat.completions.create(
                    model=MODEL, messages=messages, tools=FLOOR_TOOLS  # type: ignore[arg-type]
                )
                message = response.choices[0].message
                content = message.content
                calls = [
                    {"id": c.id, "type": "function",
                     "function": {"name": c.function.name, "arguments": c.function.arguments}}
                    for c in message.tool_calls or ()
                ]
            if not calls:
                return
            answer_calls(messages, content, calls)

    run.aclose = bare.close  # type: ignore[attr-defined]
    return run


async def _floor_stream(
    bare: openai.AsyncOpenAI, messages: list[dict[str, Any]]
) -> tuple[str | None, list[dict[str, Any]]]:
    # fragola_nb asks a stream for its usage (agent.usage): the floor asks the same.
    stream = await bare.chat.completions.create(
        model=MODEL, messages=messages, tools=FLOOR_TOOLS, stream=True,  # type: ignore[arg-type]
        stream_options={"include_usage": True},
    )
    text: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    async for chunk in stream:
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        if delta.content:
            text.append(delta.content)
        for part in delta.tool_calls or ():
            call = calls.setdefault(part.index, {"id": "", "type": "function",
                                                 "function": {"name": "", "arguments": ""}})
            if part.id:
                call["id"] = part.id
            if part.function is not None:
                if part.function.name:
                    call["function"]["name"] += part.function.name
                if part.function.arguments:
                    call["function"]["arguments"] += part.function.arguments
    return "".join(text) or None, [calls[i] for i in sorted(calls)]


# -- fragola_nb ---------------------------------------------------------------------------

def make_fragola(base_url: str) -> Run:
    from fragola_nb import Fragola, tool

    fragola = Fragola(model=MODEL, api_key="bench", base_url=base_url, max_retries=0,
                      timeout=TIMEOUT)
    add_tool = tool(add)

    async def run(k: int, stream: bool) -> None:
        agent = fragola.agent("bench", tools=[add_tool], max_step=k + 1,
                              model_settings={"stream": True} if stream else None)
        state = await agent.user_message(prompt(k))
        assert state.outcome == "finished", state

    run.fragola = fragola  # type: ignore[attr-defined]
    run.aclose = fragola.aclose  # type: ignore[attr-defined]
    return run


# -- openai-agents ------------------------------------------------------------------------

def make_openai_agents(base_url: str) -> Run:
    from agents import (
        Agent,
        OpenAIChatCompletionsModel,
        Runner,
        function_tool,
        set_tracing_disabled,
    )

    set_tracing_disabled(True)
    bare = client(base_url)
    model = OpenAIChatCompletionsModel(model=MODEL, openai_client=bare)
    agent = Agent(name="bench", tools=[function_tool(add)], model=model)

    async def run(k: int, stream: bool) -> None:
        if stream:
            result = Runner.run_streamed(agent, prompt(k), max_turns=k + 2)
            async for _ in result.stream_events():
                pass
        else:
            result = await Runner.run(agent, prompt(k), max_turns=k + 2)
        assert str(result.final_output).startswith("The total is"), result.final_output

    run.aclose = bare.close  # type: ignore[attr-defined]
    return run


# -- pydantic-ai --------------------------------------------------------------------------

def make_pydantic_ai(base_url: str) -> Run:
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    bare = client(base_url)
    model = OpenAIChatModel(MODEL, provider=OpenAIProvider(openai_client=bare))
    agent = Agent(model)
    agent.tool_plain(add)

    async def drain(ctx: Any, events: Any) -> None:
        async for _ in events:
            pass

    async def run(k: int, stream: bool) -> None:
        if stream:  # with an event stream handler, pydantic-ai streams every model request
            result = await agent.run(prompt(k), event_stream_handler=drain)
        else:
            result = await agent.run(prompt(k))
        assert str(result.output).startswith("The total is"), result.output

    run.aclose = bare.close  # type: ignore[attr-defined]
    return run


# -- raw httpx: the physical limit of a Python client (issue 26) --------------------------

def make_raw_httpx(base_url: str) -> Run:
    """No SDK: an ``httpx2.AsyncClient`` (what the openai client is built on), the very
    request bodies fragola_nb sends, the JSON answer or the SSE lines parsed by hand."""
    import httpx2

    http = httpx2.AsyncClient(base_url=base_url.rstrip("/") + "/", timeout=TIMEOUT,
                              headers={"Authorization": "Bearer bench"})

    async def call(messages: list[dict[str, Any]], stream: bool
                   ) -> tuple[str | None, list[dict[str, Any]]]:
        body: dict[str, Any] = {"model": MODEL, "messages": messages, "tools": FLOOR_TOOLS}
        if not stream:
            response = await http.post("chat/completions", json=body)
            response.raise_for_status()
            message = json.loads(response.content)["choices"][0]["message"]
            return message.get("content"), [
                {"id": c["id"], "type": "function",
                 "function": {"name": c["function"]["name"],
                              "arguments": c["function"]["arguments"]}}
                for c in message.get("tool_calls") or ()]
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
        text: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        async with http.stream("POST", "chat/completions", json=body) as response:
            response.raise_for_status()
            async for line in response.aiter_lines():
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    continue  # read on to the end: the connection is reused (as openai does)
                chunk = json.loads(data)
                if not chunk.get("choices"):
                    continue
                delta = chunk["choices"][0].get("delta") or {}
                if delta.get("content"):
                    text.append(delta["content"])
                for part in delta.get("tool_calls") or ():
                    c = calls.setdefault(part["index"], {
                        "id": "", "type": "function", "function": {"name": "", "arguments": ""}})
                    if part.get("id"):
                        c["id"] = part["id"]
                    function = part.get("function") or {}
                    c["function"]["name"] += function.get("name") or ""
                    c["function"]["arguments"] += function.get("arguments") or ""
        return "".join(text) or None, [calls[i] for i in sorted(calls)]

    async def run(k: int, stream: bool) -> None:
        messages: list[dict[str, Any]] = [{"role": "user", "content": prompt(k)}]
        while True:
            content, calls = await call(messages, stream)
            if not calls:
                assert content and content.startswith("The total is"), content
                return
            answer_calls(messages, content, calls)

    run.aclose = http.aclose  # type: ignore[attr-defined]
    return run


LIBRARIES: dict[str, Callable[[str], Run]] = {
    "raw httpx (limit)": make_raw_httpx,
    "bare openai (floor)": make_floor,
    "fragola_nb": make_fragola,
    "openai-agents": make_openai_agents,
    "pydantic-ai": make_pydantic_ai,
}

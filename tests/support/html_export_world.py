"""Real runs to export with ``export_html``: an agent with a fork tree, a comparison and a
batch, each made through the official ``openai`` client against the scripted server, with
hostile text (markup, bidi and zero-width controls, half an emoji) and credentials (the
client's key, credential headers in model settings, a tool argument named ``api_key``) in
every place. Shared by tests/sessions/test_export_html.py and
tests/browser/test_browser_export_html.py.
"""

from __future__ import annotations

from typing import Any

from fragola_nb import Agent, BatchResult, Comparison, Fragola, tool
from fragola_nb.models.scripted import ScriptedModel, call, fail, reply, tool_calls

KEY = "sk-proj-SECRET0123456789abcdef"
HEADER_SECRET = "SECRET-header-value-42"
ARG_SECRET = "SECRET-tool-argument-77"
LEAKS = ("SECRET",)

SCRIPT = "</script><script>alert(1)</script>"
IMAGE = "<img src=x onerror=alert(2)>"
BIDI = "file\u202egnp.exe"
ZERO_WIDTH = "pay\u200bpal"
HALF_EMOJI = "half \ud83d of an emoji"
HOSTILE = f"Look: {SCRIPT} {IMAGE} [click](javascript:alert(3)) ![x](http://t.example/p.png)"
SEPARATORS = "line\u2028para\u2029end"


@tool
def login(user: str, api_key: str) -> str:
    """Log in (the result quotes the user only)."""
    return f"logged in as {user} {IMAGE}"


def settings() -> dict[str, Any]:
    return {"temperature": 0.2, "max_tokens": 50,
            "extra_headers": {"X-Api-Key": HEADER_SECRET, "Authorization": f"Bearer {KEY}",
                              "X-Trace": "trace-7"}}


def make_fragola(model: ScriptedModel) -> Fragola:
    return Fragola(api_key=KEY, base_url=model.base_url, max_retries=0)


async def tree_agent(model: ScriptedModel) -> Agent:
    """``<b>root</b>`` with a tool call (arguments and result), two forks and a fork of a fork
    (``deeper``, whose last answer holds half an emoji)."""
    agent = make_fragola(model).agent(f"<b>root</b>{IMAGE}", tools=[login],
                                      instructions=f"Be careful {SCRIPT}",
                                      model_settings=settings())
    model.push(tool_calls(call("login", {"user": f"bob {BIDI}", "api_key": ARG_SECRET},
                               id="call_login")),
               reply(HOSTILE), reply(f"{ZERO_WIDTH} {SEPARATORS}"))
    await agent.user_message(f"Log me in {IMAGE}")
    await agent.user_message(f"and {BIDI}")
    fork = agent.fork(f"fork {SCRIPT}")
    model.push(reply("the fork's own answer"))
    await fork.user_message("fork question")
    deeper = fork.fork("deeper")
    model.push(reply(f"deeper answer, {HALF_EMOJI}"))  # stored with U+FFFD in its place
    await deeper.user_message("deeper question")
    agent.fork("second")
    return agent


async def comparison(model: ScriptedModel) -> Comparison:
    agent = make_fragola(model).agent("judge", model_settings=settings())
    model.push(reply("shared answer"))
    await agent.user_message("context first")
    model.push(reply(f"short {IMAGE}"), reply(f"long answer {BIDI}"))
    return await agent.compare(f"Which? {SCRIPT}", {
        "short": {"instructions": "Be short."},
        f"long {IMAGE}": {"instructions": "Be long."},
    }, concurrency=1)


def _batch_brain(request: dict[str, Any]) -> Any:
    text = str([m for m in request["messages"] if m["role"] == "user"][-1]["content"])
    if "fail" in text:
        return fail(500, f"the server broke, key {KEY}")
    return reply(f"answer to {text}")


async def batch(model: ScriptedModel) -> BatchResult:
    agent = make_fragola(model).agent("calc", model_settings=settings())
    model.brain = _batch_brain
    try:
        return await agent.batch(["2 + 2?", f"fail {IMAGE}", "3 + 3?", f"find {BIDI}"],
                                 concurrency=1, progress=False)
    finally:
        model.brain = None

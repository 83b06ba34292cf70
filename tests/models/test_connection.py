"""How a ``Fragola`` connects: the API key, the base URL and the model name (given or from the
environment), and the HTTP client it makes for each event loop.

A key or header that HTTP cannot carry is refused when it is given, by a ``BadUsage`` that
never holds the value; a base URL alone (a local server) needs no key.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import httpx2
import pytest
from support.helpers import make_fragola, user

from fragola_nb import BadUsage, Fragola, ModelHTTPError
from fragola_nb.core.events import ModelInvocationEvent
from fragola_nb.models.client import NO_KEY
from fragola_nb.models.scripted import ScriptedModel, fail, reply

KEY = "sk-proj-7f3a9c2e"


def header_recorder() -> tuple[httpx2.AsyncClient, list[httpx2.Headers]]:
    """A real HTTP client that notes the headers of every request it sends."""
    seen: list[httpx2.Headers] = []

    async def note(request: httpx2.Request) -> None:
        seen.append(request.headers)

    return httpx2.AsyncClient(event_hooks={"request": [note]}), seen


@pytest.fixture
def no_environment(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "FRAGOLA_MODEL"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def assert_holds_no_secret(error: BaseException, secret: str) -> None:
    """Neither the error nor anything chained to it mentions ``secret`` (or its start)."""
    seen: BaseException | None = error
    while seen is not None:
        assert secret.strip()[:8] not in f"{seen} {seen.args!r}", seen
        seen = seen.__cause__ or seen.__context__


# -- API keys --------------------------------------------------------------------------------


@pytest.mark.parametrize("written", [f"{KEY}\n", f"  {KEY}\r\n", f"\t{KEY} "])
async def test_whitespace_around_a_key_is_not_part_of_it(
    model: ScriptedModel, no_environment: pytest.MonkeyPatch, written: str
) -> None:
    # A key read from a file, or from a .env file with Windows line ends.
    model.push(reply("hi"), reply("hi again"))
    http_client, seen = header_recorder()
    given = Fragola(api_key=written, base_url=model.base_url, http_client=http_client)
    no_environment.setenv("OPENAI_API_KEY", written)
    from_env = Fragola(base_url=model.base_url, http_client=http_client)

    for fragola in (given, from_env):
        state = await fragola.agent("a").user_message("hello")
        assert state.messages[-1]["role"] == "assistant"

    assert [headers["authorization"] for headers in seen] == [f"Bearer {KEY}"] * 2
    await http_client.aclose()


@pytest.mark.parametrize("key", [
    f"{KEY[:8]}\n{KEY[8:]}", f"{KEY}é", f"{KEY[:8]}\x00{KEY[8:]}", f"{KEY[:8]}\t{KEY[8:]}",
    f"{KEY}\u200b",
], ids=["newline_inside", "non_ascii", "nul", "tab_inside", "zero_width_space"])
def test_a_key_http_cannot_carry_is_refused_when_the_fragola_is_made(
    no_environment: pytest.MonkeyPatch, key: str
) -> None:
    with pytest.raises(BadUsage, match="api_key") as given:
        Fragola(api_key=key, base_url="http://127.0.0.1:9/v1")
    caught = [given.value]
    if "\x00" not in key:  # an environment variable cannot hold one
        no_environment.setenv("OPENAI_API_KEY", key)
        with pytest.raises(BadUsage, match="OPENAI_API_KEY") as from_env:
            Fragola(base_url="http://127.0.0.1:9/v1")
        caught.append(from_env.value)

    for error in caught:
        assert_holds_no_secret(error, key)
        assert "HTTP" in str(error)


def test_a_key_that_is_not_text_is_refused(no_environment: pytest.MonkeyPatch) -> None:
    with pytest.raises(BadUsage, match="api_key must be"):
        Fragola(api_key=KEY.encode(), base_url="http://127.0.0.1:9/v1")  # type: ignore[arg-type]


def test_a_blank_key_is_no_key(no_environment: pytest.MonkeyPatch) -> None:
    with pytest.raises(BadUsage, match="no API key"):
        Fragola(api_key=" \n")


@pytest.mark.parametrize(("headers", "named"), [
    ({"X-Api-Key": f"{KEY}\n"}, "'X-Api-Key'"),
    ({"Authorization": f"Bearer {KEY}é"}, "'Authorization'"),
    ({"X Api Key": KEY}, "'X Api Key'"),
    ({"X-Api-Key": 42}, "'X-Api-Key'"),
])
def test_default_headers_http_cannot_carry_are_refused_when_the_fragola_is_made(
    headers: dict[str, Any], named: str
) -> None:
    with pytest.raises(BadUsage, match=rf"default_headers.*{named}") as caught:
        Fragola(api_key="k", base_url="http://127.0.0.1:9/v1", default_headers=headers)
    assert_holds_no_secret(caught.value, KEY)


async def test_extra_headers_http_cannot_carry_are_refused_before_anything_is_sent(
    model: ScriptedModel,
) -> None:
    fragola = make_fragola(model)
    with pytest.raises(BadUsage, match=r"extra_headers.*'X-Api-Key'") as caught:
        fragola.agent("a", model_settings={"extra_headers": {"X-Api-Key": f"{KEY}\n"}})
    assert_holds_no_secret(caught.value, KEY)

    agent = fragola.agent("b")
    agent.on_before_model_invocation(lambda event: {
        **event.config, "extra_headers": {"api-key": f"{KEY}é"}})
    with pytest.raises(BadUsage, match=r"extra_headers.*'api-key'") as caught:
        await agent.user_message("hello")
    assert_holds_no_secret(caught.value, KEY)
    assert model.requests == []
    assert agent.state.messages == [user("hello")]


async def test_a_key_from_a_key_provider_that_http_cannot_carry_never_reaches_the_error(
    model: ScriptedModel,
) -> None:
    # openai takes an async callable for api_key; what it returns is known only when sending.
    async def provider() -> str:
        return f"{KEY}\n"

    model.push(reply("unreached"))
    agent = Fragola(api_key=provider, base_url=model.base_url, max_retries=0).agent("a")

    with pytest.raises(BadUsage, match="HTTP cannot carry") as caught:
        await agent.user_message("hello")

    assert_holds_no_secret(caught.value, KEY)
    assert model.requests == []


@pytest.mark.parametrize("option", ["organization", "project"])
def test_an_organization_or_project_http_cannot_carry_is_refused(
    no_environment: pytest.MonkeyPatch, option: str
) -> None:
    # openai sends them as the OpenAI-Organization / OpenAI-Project headers.
    with pytest.raises(BadUsage, match=option):
        Fragola(api_key="k", **{option: "org-1\n"})
    variable = {"organization": "OPENAI_ORG_ID", "project": "OPENAI_PROJECT_ID"}[option]
    no_environment.setenv(variable, "org-é")
    with pytest.raises(BadUsage, match=variable):
        Fragola(api_key="k")


@pytest.mark.parametrize("url", [
    "ftp://user:hunter2@example.com/v1", "http://user:hunter2/v1@example.com",
    "http://user:hunter2@example.com\n/v1",
])
def test_a_base_url_that_is_not_http_is_refused_without_quoting_it(
    no_environment: pytest.MonkeyPatch, url: str
) -> None:
    with pytest.raises(BadUsage, match="base_url") as given:
        Fragola(base_url=url)
    no_environment.setenv("OPENAI_BASE_URL", url)
    with pytest.raises(BadUsage, match="OPENAI_BASE_URL") as from_env:
        Fragola()
    for caught in (given, from_env):
        assert_holds_no_secret(caught.value, "hunter2")


async def test_a_message_that_is_not_valid_unicode_is_bad_usage_and_nothing_is_sent(
    model: ScriptedModel,
) -> None:
    # Before, this was reported as an answer of the model API that was not usable.
    agent = make_fragola(model).agent("a")
    with pytest.raises(BadUsage, match="surrogate"):
        await agent.user_message("half an emoji: \ud83d")
    assert model.requests == []


@pytest.mark.parametrize("key", [KEY, "local-proxy-key-42"])
async def test_a_server_quoting_the_key_back_does_not_put_it_in_the_error_message(
    model: ScriptedModel, key: str
) -> None:
    model.push(fail(401, f"Incorrect API key provided: {key}. See your dashboard."))
    agent = Fragola(api_key=key, base_url=model.base_url, max_retries=0).agent("a")

    with pytest.raises(ModelHTTPError) as caught:
        await agent.user_message("hello")

    assert str(caught.value) == ("the model API answered HTTP 401: Incorrect API key "
                                 "provided: [redacted]. See your dashboard.")


# -- base URL and model name -----------------------------------------------------------------


async def test_a_base_url_alone_needs_no_key(
    model: ScriptedModel, no_environment: pytest.MonkeyPatch
) -> None:
    # Local servers (Ollama, vLLM, LM Studio, llama.cpp) take any key or none.
    http_client, seen = header_recorder()
    model.push(reply("local"), reply("local too"))
    given = Fragola(base_url=model.base_url, http_client=http_client)
    no_environment.setenv("OPENAI_BASE_URL", model.base_url)
    from_env = Fragola(http_client=http_client)

    for fragola in (given, from_env):
        assert fragola.base_url == model.base_url
        await fragola.agent("a").user_message("hello")

    assert len(model.requests) == 2
    assert [headers["authorization"] for headers in seen] == [f"Bearer {NO_KEY}"] * 2
    await http_client.aclose()


async def test_from_env_talks_to_a_base_url_given_or_set_without_a_key(
    model: ScriptedModel, no_environment: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    model.push(reply("from the argument"), reply("from the environment"))
    given = Fragola.from_env(base_url=model.base_url, max_retries=0)
    no_environment.setenv("OPENAI_BASE_URL", model.base_url)
    from_env = Fragola.from_env(max_retries=0)

    for fragola, text in ((given, "from the argument"), (from_env, "from the environment")):
        assert not fragola.offline
        state = await fragola.agent("a").user_message("hello")
        assert state.messages[-1] == {"role": "assistant", "content": text}
    assert len(model.requests) == 2
    assert "offline" not in capsys.readouterr().err


async def test_the_model_name_comes_from_fragola_model_unless_given(
    model: ScriptedModel, no_environment: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    no_environment.setenv("FRAGOLA_MODEL", " llama3.2 \n")
    model.push(reply("one"), reply("two"), reply("three"))

    for fragola in (make_fragola(model), Fragola.from_env(base_url=model.base_url),
                    make_fragola(model, model="qwen2.5")):
        await fragola.agent("a").user_message("hello")
    offline = Fragola.from_env()

    assert [r["model"] for r in model.requests] == ["llama3.2", "llama3.2", "qwen2.5"]
    try:
        assert offline.offline and offline.model == "llama3.2"
        assert "running offline" in capsys.readouterr().err
    finally:
        await offline.aclose()


def test_an_empty_fragola_model_is_unset(no_environment: pytest.MonkeyPatch) -> None:
    no_environment.setenv("FRAGOLA_MODEL", "  ")
    assert Fragola(api_key="k").model == "gpt-4o-mini"


async def test_a_listener_sees_the_model_from_the_environment(
    model: ScriptedModel, no_environment: pytest.MonkeyPatch
) -> None:
    no_environment.setenv("FRAGOLA_MODEL", "mistral")
    model.push(reply("hi"))
    agent = make_fragola(model).agent("a")
    seen: list[str] = []

    @agent.on_before_model_invocation
    def note(event: ModelInvocationEvent) -> None:
        seen.append(event.config["model"])

    await agent.user_message("hello")
    assert seen == ["mistral"]


# -- one HTTP client per event loop ------------------------------------------------------------

TURNS = textwrap.dedent("""
    import asyncio, gc, resource, sys

    resource.setrlimit(resource.RLIMIT_NOFILE, (40, 40))
    from fragola_nb import Fragola

    fragola = Fragola(api_key="test-key", base_url=sys.argv[1], max_retries=0)
    agents = [fragola.agent("plain"), fragola.agent("streamed", model_settings={"stream": True})]
    for turn in range(100):
        state = asyncio.run(agents[turn % 2].user_message(f"turn {turn}"))
        assert state.outcome == "finished", state.outcome
    del agents, fragola, state
    gc.collect()
    print("ok")
""")


def test_a_script_running_each_turn_in_asyncio_run_stays_clean(
    model: ScriptedModel, tmp_path: Path
) -> None:
    # Each asyncio.run() makes a new event loop, and the Fragola an HTTP client for it: that
    # client must be closed with its loop, or 100 turns keep 100 clients and their sockets.
    model.brain = lambda request: reply("fine")
    script = tmp_path / "turns.py"
    script.write_text(TURNS)

    done = subprocess.run(
        [sys.executable, "-X", "dev", "-W", "error", str(script), model.base_url],
        capture_output=True, text=True, timeout=120,
    )

    # asyncio's debug mode also logs any step slower than 0.1 s, which says how loaded the
    # machine is, not whether anything leaked.
    noise = [line for line in done.stderr.splitlines()
             if line.startswith("Executing <") and " took " in line]
    problems = [line for line in done.stderr.splitlines() if line not in noise]
    assert (done.returncode, done.stdout, problems) == (0, "ok\n", [])
    assert len(model.requests) == 100

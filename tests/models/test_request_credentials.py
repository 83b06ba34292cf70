"""Issue 34: the credentials of each request are known (``fragola_nb.base.inuse``) as before,
now that the client reads its own once and each tool definition once.

On the scripted model (the package's own OpenAI-compatible server, through the official
client): what a request carries under a credential's name, in its settings, its headers or a
tool's definition, is in use once the request is sent, on the first request and on later ones.
"""

from __future__ import annotations

import httpx2

from fragola_nb import Fragola, tool
from fragola_nb.base.inuse import in_use
from fragola_nb.models.scripted import ScriptedModel, reply

SCHEMA = {"type": "object", "properties": {"api_key": {"type": "string"}},
          "x-api-key": "tool-cred-Q8v1Z3kL7"}
"""A tool schema holding a credential under a credential's name (not a property's name)."""


async def test_a_credential_in_a_tool_definition_is_known_when_the_request_goes_out() -> None:
    fragola = Fragola.scripted([reply("first"), reply("second")])
    schema = dict(SCHEMA)
    lookup = tool(name="lookup", description="Look up.", schema=schema,
                  handler=lambda params: "found")
    agent = fragola.agent("bot", tools=[lookup])
    assert "tool-cred-Q8v1Z3kL7" not in in_use()
    await agent.user_message("hello")
    assert "tool-cred-Q8v1Z3kL7" in in_use()
    assert "api_key" not in in_use()  # a property's name is not a credential
    # a second tool, made from another schema, is read on its own
    other = tool(name="other", description="", handler=lambda params: "x",
                 schema={**SCHEMA, "x-api-key": "tool-cred-R4t8W2mN9"})
    agent.options.tools = [lookup, other]
    await agent.user_message("again")
    assert "tool-cred-R4t8W2mN9" in in_use()
    await fragola.aclose()


async def test_a_credential_of_each_request_and_of_a_changed_setting_is_known() -> None:
    fragola = Fragola.scripted([reply("first"), reply("second")])
    agent = fragola.agent("bot", model_settings={
        "extra_headers": {"X-Proxy-Key": "hdr-cred-P3s7V1xB5"}})
    await agent.user_message("hello")
    assert "hdr-cred-P3s7V1xB5" in in_use()
    agent.options.model_settings = {"extra_body": {"api_key": "body-cred-K6j2H9qT4"}}
    await agent.user_message("again")
    assert "body-cred-K6j2H9qT4" in in_use()
    await fragola.aclose()


async def test_default_headers_are_read_when_the_fragola_is_made() -> None:
    """The client's own credentials are read once, so what it sends is fixed then too: a
    later change to the ``default_headers`` dict given is not sent (nor left unknown)."""
    sent: list[str | None] = []

    async def heard(request: httpx2.Request) -> None:
        sent.append(request.headers.get("x-team-key"))

    with ScriptedModel([reply("hi")]) as model:
        headers = {"X-Team-Key": "team-cred-B7n3M5cX1"}
        http = httpx2.AsyncClient(event_hooks={"request": [heard]})
        fragola = Fragola(model="m", api_key="k", base_url=model.base_url, max_retries=0,
                          default_headers=headers, http_client=http)
        headers["X-Team-Key"] = "team-cred-changed-9"
        await fragola.agent("bot").user_message("hello")
        await http.aclose()
    assert sent == ["team-cred-B7n3M5cX1"]
    assert "team-cred-B7n3M5cX1" in in_use()

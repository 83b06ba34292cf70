"""Credentials never show: one rule (``fragola_nb.base.redact``) for session files, reprs, the
scripted model's records, exports and notebook views; ordinary model settings untouched."""

from __future__ import annotations

import base64
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from support.helpers import make_fragola

from fragola_nb import (
    Fragola,
    export_html,
    export_markdown,
    export_tree_markdown,
    load_session,
    save_session,
)
from fragola_nb.base.redact import is_secret_name, is_secret_value, redact_text, redacted, scrub
from fragola_nb.models.scripted import ScriptedModel, reply

KEY = "sk-proj-SECRET0123456789abcdef"
GOOGLE = "AIzaSyD-SECRET0123456789abcdefghijklmno"
BASIC = base64.b64encode(b"alice:hunter2").decode()
LEAKS = ("SECRET", "hunter2", BASIC)

# Every credential the attack found written in clear, and the usual ones.
SECRET_HEADERS = {
    "Authorization": f"Bearer {KEY}", "x-goog-api-key": GOOGLE,
    "Ocp-Apim-Subscription-Key": "SECRET-azure", "X-Token": "SECRET-x", "api-token": "SECRET-a",
    "X-Amz-Security-Token": "SECRET-amz", "Private-Token": "SECRET-gitlab",
    "X-Api-Key": "SECRET-k", "Cookie": "session=SECRET-c", "Proxy-Authorization": f"Basic {BASIC}",
    "X-Amz-Signature": "SECRET-sig", "X-Client-Secret": "SECRET-cs",
}
SECRET_QUERY = {"key": GOOGLE, "sig": "SECRET-sas", "access_token": "SECRET-at"}
SECRET_BODY = {"token": "SECRET-body", "password": "SECRET-pw",
               "auth": {"user": "alice", "passwd": "SECRET-pw2"}}
# Settings a session must carry as they are, though some look close to the rule.
ORDINARY = {
    "temperature": 0.2, "max_tokens": 9, "max_completion_tokens": 99, "top_logprobs": 2,
    "logprobs": True, "logit_bias": {"50256": -100, "1234": 5}, "prompt_cache_key": "lesson-1",
    "safety_identifier": "user-42", "user": "alice", "seed": 7, "stop": ["Basic facts:", "END"],
    "metadata": {"course": "python"},
    "response_format": {"type": "json_schema", "json_schema": {"name": "login", "schema": {
        "type": "object", "properties": {"api_key": {"type": "string"},
                                         "token": {"type": "string"}},
        "required": ["api_key", "token"]}}},
}
ORDINARY_EXTRA = {
    "extra_headers": {"X-Trace": "trace-7", "Idempotency-Key": "order-9", "api-version": "1"},
    "extra_query": {"api-version": "2024-06-01", "alt": "sse"},
    "extra_body": {"stop_token_ids": [2], "skip_special_tokens": False, "keep_alive": "5m",
                   "thinking": {"type": "enabled", "budget_tokens": 1024}, "top_k": 5},
}


def settings() -> dict[str, Any]:
    return {
        **ORDINARY,
        "extra_headers": {**ORDINARY_EXTRA["extra_headers"], **SECRET_HEADERS},
        "extra_query": {**ORDINARY_EXTRA["extra_query"], **SECRET_QUERY},
        "extra_body": {**ORDINARY_EXTRA["extra_body"], **SECRET_BODY,
                       "callback": "https://bob:SECRET-pw3@hooks.example/x",
                       "notes": ["fine", f"Bearer {KEY}"]},
    }


def assert_no_leak(text: str) -> None:
    for secret in LEAKS:
        assert secret not in text, f"{secret!r} leaks in {text[:300]!r}"


# -- the rule ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [
    *SECRET_HEADERS, *SECRET_QUERY, "token", "password", "auth", "apiKey", "APIKey", "api_key",
    "client_secret", "X-Auth-Token", "Set-Cookie", "X-Amz-Credential", "x-csrf-token", "jwt",
    "id_token", "refresh_token", "WWW-Authenticate", "private_key", "passphrase", "pwd",
])
def test_credential_names(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize("name", [
    *ORDINARY, *ORDINARY_EXTRA["extra_headers"], *ORDINARY_EXTRA["extra_body"],
    "budget_tokens", "tokenizer", "detokenize", "return_tokens_as_token_ids", "keywords",
    "author", "signal", "design", "X-Request-Id", "OpenAI-Organization", "HTTP-Referer",
    "pass_through", "n_keep", "bypass_cache",
])
def test_ordinary_setting_names(name: str) -> None:
    assert not is_secret_name(name)


@pytest.mark.parametrize(("text", "shown"), [
    (f"Bearer {KEY}", "Bearer [redacted]"),
    (f"bearer {KEY}", "bearer [redacted]"),
    (f"Basic {BASIC}", "Basic [redacted]"),
    (KEY, "[redacted]"),
    ("sk-ant-api03-SECRET0123", "[redacted]"),
    (GOOGLE, "[redacted]"),
    ("AKIAABCDEFGHIJKLMNOP", "[redacted]"),
    ("ghp_SECRET0123456789abcdef", "[redacted]"),
    ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.sig", "[redacted]"),
    ("http://user:hunter2@host/v1", "http://user:[redacted]@host/v1"),
    (f"https://h.example/v1beta?key={GOOGLE}&alt=sse", "https://h.example/v1beta?key=[redacted]&alt=sse"),
    ("https://acct.blob.example/c?sv=2022&sig=SECRET%3D&se=2030", "https://acct.blob.example/c?sv=2022&sig=[redacted]&se=2030"),
    (f"use {KEY} here", "use [redacted] here"),
])
def test_credential_values_are_found_and_redacted(text: str, shown: str) -> None:
    assert is_secret_value(text)
    assert redact_text(text) == shown
    assert redact_text(shown) == shown


@pytest.mark.parametrize("text", [
    "Basic facts:", "Basic dXNlcg==", "Bearer", "Bearer bonds", "task-force-members", "END",
    "http://host:8000/v1", "https://host/v1?api-version=2024-06-01", "user@example.com",
    "sk-short", "max 5 tokens", "2024-06-01",
])
def test_ordinary_values_are_kept(text: str) -> None:
    assert not is_secret_value(text)
    assert redact_text(text) == text


def test_scrub_drops_by_name_and_by_value_and_says_where() -> None:
    kept, dropped = scrub(settings(), "model_settings")

    assert kept == {**ORDINARY, **ORDINARY_EXTRA,
                    "extra_body": {**ORDINARY_EXTRA["extra_body"], "notes": ["fine"]}}
    assert dropped == [
        *(f"model_settings.extra_headers.{name}" for name in SECRET_HEADERS),
        *(f"model_settings.extra_query.{name}" for name in SECRET_QUERY),
        *(f"model_settings.extra_body.{name}" for name in SECRET_BODY),
        "model_settings.extra_body.callback", "model_settings.extra_body.notes[1]",
    ]
    assert_no_leak(json.dumps([kept, dropped]))


def test_redacted_keeps_the_shape_and_the_scheme() -> None:
    shown = redacted(settings())

    assert shown["extra_headers"]["Authorization"] == "Bearer [redacted]"
    assert shown["extra_headers"]["Proxy-Authorization"] == "Basic [redacted]"
    assert shown["extra_headers"]["x-goog-api-key"] == "[redacted]"
    assert shown["extra_body"]["auth"] == "[redacted]"
    assert shown["extra_body"]["callback"] == "https://bob:[redacted]@hooks.example/x"
    assert shown["max_tokens"] == 9 and shown["response_format"] == ORDINARY["response_format"]
    assert_no_leak(repr(shown))


# -- what fragola_nb shows --------------------------------------------------------------------


def test_the_repr_of_a_fragola_hides_the_url_password() -> None:
    fragola = Fragola(api_key="k", base_url="http://user:hunter2@127.0.0.1:9/v1")
    keyed = Fragola(api_key="k", base_url=f"http://127.0.0.1:9/v1beta?key={GOOGLE}")

    assert repr(fragola) == ("Fragola(model='gpt-4o-mini', "
                             "base_url='http://user:[redacted]@127.0.0.1:9/v1')")
    assert_no_leak(repr(keyed) + str(keyed))


def test_the_repr_of_agent_options_hides_credentials(model: ScriptedModel) -> None:
    agent = make_fragola(model).agent("a", model_settings=settings())

    shown = repr(agent.options)

    assert_no_leak(shown + str(agent.options))
    assert "'Authorization': 'Bearer [redacted]'" in shown
    assert "'max_tokens': 9" in shown and "name='a'" in shown
    assert agent.options.model_settings == settings()  # the settings themselves are untouched
    assert_no_leak(repr(agent.context.options) + repr(agent.fork("f").options))


async def test_the_scripted_model_records_no_credential_header(model: ScriptedModel) -> None:
    agent = make_fragola(model).agent("a", model_settings=settings())
    model.push(reply("ok"))

    await agent.user_message("hi")

    headers = model.headers[0]
    assert headers["authorization"] == "Bearer [redacted]"
    assert headers["proxy-authorization"] == "Basic [redacted]"
    for name in SECRET_HEADERS:
        assert headers[name.lower()].endswith("[redacted]"), name
    assert headers["x-trace"] == "trace-7" and headers["idempotency-key"] == "order-9"
    assert "key=[redacted]" in model.targets[0] and "alt=sse" in model.targets[0]
    assert_no_leak(repr(model.headers) + repr(model.targets))


async def test_exports_and_notebook_views_show_no_setting(model: ScriptedModel) -> None:
    agent = make_fragola(model).agent("a", instructions="Be brief.", model_settings=settings())
    model.push(reply("ok"))
    await agent.user_message("hi")

    from fragola_nb.notebook.panel.view import AgentPanel
    from fragola_nb.notebook.textviews import ForkTreeText

    panel = AgentPanel(agent)
    shown = [export_markdown(agent), export_html(agent), export_tree_markdown(agent),
             panel.html(), repr(panel), ForkTreeText(agent).text(), repr(agent), repr(agent.state)]
    assert_no_leak("\n".join(shown))


# -- session files ----------------------------------------------------------------------------


async def test_a_session_drops_every_credential_and_names_it_in_the_file(
    model: ScriptedModel, tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    agent = make_fragola(model).agent("a", model_settings=settings())
    agent.fork("child")

    save_session(tmp_path / "s.json", agent)

    text = (tmp_path / "s.json").read_text()
    assert_no_leak(text)
    records = json.loads(text)["agents"]
    _, expected = scrub(settings(), "model_settings")
    assert [record["credentials_not_saved"] for record in records] == [expected, expected]
    with caplog.at_level(logging.WARNING, logger="fragola_nb"):
        loaded = load_session(tmp_path / "s.json", make_fragola(model))
    assert loaded["a"].options.model_settings == {
        **ORDINARY, **ORDINARY_EXTRA,
        "extra_body": {**ORDINARY_EXTRA["extra_body"], "notes": ["fine"]},
    }
    assert "agent 'a' was saved without model_settings.extra_headers.Authorization" in caplog.text
    assert_no_leak(caplog.text)


async def test_a_session_without_credentials_has_no_such_field_and_round_trips(
    model: ScriptedModel, tmp_path: Path,
) -> None:
    plain = {**ORDINARY, **ORDINARY_EXTRA}
    agent = make_fragola(model).agent("a", model_settings=plain)

    save_session(tmp_path / "s.json", agent)

    assert "credentials_not_saved" not in (tmp_path / "s.json").read_text()
    assert load_session(tmp_path / "s.json", make_fragola(model))["a"].options.model_settings \
        == plain

"""Issue 21 B: credentials nowhere, under any name, in either direction.

A small API server on loopback answers as real ones do when they quote what they were sent (a
401 echoing the key, FastAPI's 422 quoting a field's ``"input"``, Ollama's "model not found"
text); spans go over OTLP/HTTP (the real exporter) to a collector on loopback that decodes
the protobuf, so what is checked is what a tracing backend would store.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import requests
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from support.echo_api import BODY_TOKEN, KEY, EchoAPI, fastapi_422, rejecting_key
from support.helpers import model_error

from fragola_nb import Fragola, load_session, save_session
from fragola_nb.base.redact import credentials_in, is_secret_name, redact_text, redacted, scrub
from fragola_nb.presets.tracing import instrument, uninstrument


class Collector:
    """An OTLP/HTTP trace collector on 127.0.0.1: keeps each export request, decoded."""

    def __init__(self) -> None:
        outer = self
        self.exports: list[ExportTraceServiceRequest] = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                request = ExportTraceServiceRequest()
                request.ParseFromString(self.rfile.read(size))
                outer.exports.append(request)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}/v1/traces"

    def spans(self) -> list[Any]:
        return [span for export in self.exports for resource in export.resource_spans
                for scope in resource.scope_spans for span in scope.spans]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def collector() -> Iterator[tuple[Collector, TracerProvider]]:
    found = Collector()
    session = requests.Session()
    session.trust_env = False  # loopback, never through a proxy of the environment
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(
        OTLPSpanExporter(endpoint=found.endpoint, session=session, timeout=5)))
    try:
        yield found, provider
    finally:
        uninstrument()
        provider.shutdown()
        found.close()


def completion(text: str) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}


# -- the rule ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [
    "access_tokens", "refresh_tokens", "id_tokens", "api_tokens", "authTokens", "sessionTokens",
    "passcode", "creds", "user_creds", "Cred",
])
def test_plural_tokens_of_a_credential_passcodes_and_creds_are_credential_names(
        name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize("name", [
    "max_tokens", "budget_tokens", "skip_special_tokens", "max_new_tokens", "prompt_tokens",
    "cached_tokens", "tokens", "credit", "credits", "incredible",
])
def test_counts_of_tokens_and_words_near_creds_are_not(name: str) -> None:
    assert not is_secret_name(name)


def test_a_known_value_is_hidden_as_a_whole_word_and_a_short_or_plain_one_never() -> None:
    slashed = "k3y/with+sl4sh=="
    text = ('model "llama3.2" not found, try pulling it first: ollama pull llama3.2 '
            f"(gateway {KEY}, {KEY}s, url ?k=k3y%2Fwith%2Bsl4sh%3D%3D, password)")
    shown = redact_text(text, known=["ollama", "Bearer " + KEY, "password", slashed])
    assert shown == ('model "llama3.2" not found, try pulling it first: ollama pull llama3.2 '
                     "(gateway [redacted], [redacted]s, url ?k=[redacted], password)")
    short = "ab12-cd34"  # under 16: hidden only as a whole word
    assert redact_text(f"x{short}y, {short}.", known=[short]) == f"x{short}y, [redacted]."
    assert redact_text(f"k={KEY}", known=[KEY]) == "k=[redacted]"


def test_credentials_in_collects_named_values_at_any_depth_without_their_scheme() -> None:
    found = credentials_in(
        {"Authorization": f"Bearer {KEY}", "X-Trace": "t-1"},
        {"extra_body": {"access_tokens": [BODY_TOKEN], "max_tokens": 5,
                        "nested": {"passcode": "pc-91827364"}}})
    assert found == {KEY, BODY_TOKEN, "pc-91827364"}


def test_redacted_and_scrub_hide_known_values_under_any_name() -> None:
    record = {"request": {"messages": [{"role": "user", "content": f"mine is {KEY}"}]},
              "body": {"detail": [{"input": KEY}]}}
    assert KEY not in json.dumps(redacted(record, known=[KEY]))
    kept, dropped = scrub(record, known=[KEY])
    assert KEY not in json.dumps(kept)
    assert dropped == ["request.messages[0].content", "body.detail[0].input"]


# -- errors -----------------------------------------------------------------------------------


async def test_a_short_key_is_not_cut_out_of_the_servers_words() -> None:
    api = EchoAPI(lambda auth, body: (404, {"error": {
        "message": 'model "llama3.2" not found, try pulling it first: ollama pull llama3.2',
        "type": "api_error"}}))
    fragola = Fragola(api_key="ollama", base_url=api.base_url, model="llama3.2", max_retries=0)
    raised = await model_error(fragola.agent(name="local"), "hi", fragola, api)
    assert "try pulling it first: ollama pull llama3.2" in str(raised.value)
    assert "[redacted]" not in str(raised.value)


def proxy_422(auth: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """A proxy's validation error that quotes the fields it refused in its message."""
    extra = {k: v for k, v in body.items() if k not in ("model", "messages", "stream")}
    return 422, {"error": {"message": f"Extra inputs are not permitted: {extra}",
                           "type": "invalid_request_error"}}


async def test_a_credential_sent_in_extra_body_is_hidden_when_an_error_quotes_it() -> None:
    api = EchoAPI(proxy_422)
    fragola = Fragola(api_key=KEY, base_url=api.base_url, model="m", max_retries=0)
    agent = fragola.agent(name="a", model_settings={
        "extra_body": {"access_tokens": BODY_TOKEN, "top_k": 5}})
    raised = await model_error(agent, "hi", fragola, api)
    assert "Extra inputs are not permitted" in str(raised.value)
    assert BODY_TOKEN not in str(raised.value)


# -- recordings and sessions ------------------------------------------------------------------


async def test_a_recording_hides_what_the_server_quotes_back_and_plural_credential_names(
        tmp_path: Path) -> None:
    path = tmp_path / "echo.jsonl"
    api = EchoAPI(fastapi_422)
    fragola = Fragola.record(path, api_key=KEY, base_url=api.base_url, model="m", max_retries=0)
    agent = fragola.agent(name="a", model_settings={"extra_body": {
        "access_tokens": [BODY_TOKEN], "refresh_tokens": "rt-0a9b8c7d6e",
        "passcode": "pc-91827364", "creds": {"user": "u", "secret": "s-5f4e3d2c1b"},
        "max_tokens": 7}})
    await model_error(agent, f"my gateway key is {KEY}", fragola, api)
    data = path.read_text()
    for secret in (KEY, BODY_TOKEN, "rt-0a9b8c7d6e", "pc-91827364", "s-5f4e3d2c1b"):
        assert secret not in data, secret
    exchange = json.loads(data.splitlines()[1])
    assert exchange["status"] == 422
    assert exchange["request"]["max_tokens"] == 7  # a count stays
    assert exchange["request"]["messages"][0]["content"] == "my gateway key is [redacted]"
    quoted = {item["loc"][1]: item["input"] for item in exchange["body"]["detail"]}
    assert quoted["access_tokens"] == ["[redacted]"]
    assert quoted["refresh_tokens"] == "[redacted]"
    assert quoted["passcode"] == "[redacted]"


async def test_a_recording_keeps_a_short_keys_word_in_the_answer(tmp_path: Path) -> None:
    path = tmp_path / "ollama.jsonl"
    api = EchoAPI(lambda auth, body: (200, completion("Run: ollama pull llama3.2")))
    fragola = Fragola.record(path, api_key="ollama", base_url=api.base_url, model="m")
    try:
        await fragola.agent(name="a").user_message("how do I get llama?")
    finally:
        await fragola.aclose()
        api.close()
    assert json.loads(path.read_text().splitlines()[1])["body"]["choices"][0]["message"][
        "content"] == "Run: ollama pull llama3.2"


def test_a_session_drops_plural_credential_names_and_keeps_counts(tmp_path: Path) -> None:
    fragola = Fragola.scripted()
    agent = fragola.agent(name="a", model_settings={"max_tokens": 9, "extra_body": {
        "access_tokens": BODY_TOKEN, "passcode": "pc-91827364", "creds": "c-1029384756",
        "budget_tokens": 100}})
    path = tmp_path / "s.json"
    save_session(path, agent)
    text = path.read_text()
    for secret in (BODY_TOKEN, "pc-91827364", "c-1029384756"):
        assert secret not in text
    assert json.loads(text)["agents"][0]["credentials_not_saved"] == [
        "model_settings.extra_body.access_tokens", "model_settings.extra_body.passcode",
        "model_settings.extra_body.creds"]
    loaded = load_session(path, Fragola.scripted())
    assert loaded["a"].options.model_settings == {"max_tokens": 9,
                                                  "extra_body": {"budget_tokens": 100}}


# -- traces -----------------------------------------------------------------------------------


def everything_in(spans: list[Any]) -> str:
    """Every text an exported span holds: name, status, attributes, events' attributes."""
    def values(attributes: Any) -> list[str]:
        return [str(a.value) for a in attributes]
    parts: list[str] = []
    for span in spans:
        parts += [span.name, span.status.message, *values(span.attributes)]
        for event in span.events:
            parts += [event.name, *values(event.attributes)]
    return "\n".join(parts)


@pytest.mark.parametrize("capture", [False, True])
async def test_a_key_a_server_echoes_never_reaches_an_exported_span(
        collector: tuple[Collector, TracerProvider], capture: bool) -> None:
    found, provider = collector
    instrument(provider, capture_content=capture)
    api = EchoAPI(rejecting_key)
    fragola = Fragola(api_key=KEY, base_url=api.base_url, model="m", max_retries=0)
    agent = fragola.agent(name="a", model_settings={
        "extra_body": {"access_tokens": BODY_TOKEN}})
    await model_error(agent, f"is {KEY} right?", fragola, api)
    spans = found.spans()
    assert sorted(span.name for span in spans) == ["chat m", "invoke_agent a"]
    text = everything_in(spans)
    assert KEY not in text and BODY_TOKEN not in text
    chat = next(span for span in spans if span.name == "chat m")
    [event] = chat.events
    stacktrace = next(a.value.string_value for a in event.attributes
                      if a.key == "exception.stacktrace")
    # The chained openai error is there, what it quoted redacted.
    assert "AuthenticationError" in stacktrace
    assert "Incorrect API key provided: [redacted]" in stacktrace
    if capture:
        assert "is [redacted] right?" in text

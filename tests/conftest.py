"""Shared fixtures: a scripted OpenAI-compatible model behind the real ``openai`` client.

``model`` is a started :class:`~fragola_nb.models.scripted.ScriptedModel` with an empty script (push
items with ``model.push(...)``). At teardown every request it received is checked against the
official ``CreateChatCompletionRequest`` schema, and every completion and stream chunk it sent
against the response/chunk schemas, so a test that drifts from the real wire format fails.

The tests live in folders that mirror the package's layers (tests/base, tests/models,
tests/core, tests/sessions, tests/presets, tests/experiments, tests/notebook, with the
experiments' and the notebook's families in folders of their own as in the code), folders
named by subject for what crosses the layers (tests/security: no credential in any writer,
view, trace or error; tests/robustness: errors, files, threads) and tests/package for the
whole package; the modules they share (helpers, kernel_harness, invariants, ...) are
the ``support`` package, tests/support/, imported as ``support.<module>`` (tests/ is put on
``sys.path`` below for every folder). Test files import from those modules, never from each
other, and keep unique names (pytest imports each by its name).
"""

from __future__ import annotations

import signal
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
import pytest_asyncio

from fragola_nb.models.scripted import ScriptedModel

# pytest's default import mode puts this folder on the path when it imports this file; said
# here too, so that the shared modules import whatever the mode.
# A shell without job control starts a background command (`bash scripts/test.sh &`, some CI
# runners) with SIGINT ignored, and every script and kernel the tests start inherits that:
# the Ctrl-C tests would then wait for an interrupt that never comes. Heard again here, and so
# in every process the tests start (an ignored signal is inherited, a handler is not).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

TESTS = str(Path(__file__).resolve().parent)
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)

from support.openai_schema import (  # noqa: E402
    SchemaMismatch,
    validate_chunk,
    validate_request,
    validate_response,
)
from support.quoting_api import QuotingAPI  # noqa: E402


def _mismatches(
    what: str, bodies: list[dict[str, Any]], validate: Callable[[Any], None]
) -> list[str]:
    problems = []
    for index, body in enumerate(bodies):
        try:
            validate(body)
        except SchemaMismatch as exc:
            problems.append(f"{what} #{index}: {exc}")
    return problems


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    """A started scripted model; its traffic is schema-checked at teardown."""
    scripted = ScriptedModel().start()
    try:
        yield scripted
    finally:
        scripted.stop()
    problems = [
        *_mismatches("request", scripted.requests, validate_request),
        *_mismatches("response", scripted.responses, validate_response),
        *_mismatches("stream chunk", scripted.chunks, validate_chunk),
    ]
    if problems:
        pytest.fail(
            "the scripted model saw traffic that breaks the OpenAI schema:\n\n"
            + "\n\n".join(problems),
            pytrace=False,
        )


@pytest_asyncio.fixture
async def client(model: ScriptedModel) -> AsyncIterator[openai.AsyncOpenAI]:
    """``model.client()``: a real ``openai.AsyncOpenAI`` with ``max_retries=0``, closed after."""
    async_client = model.client()
    try:
        yield async_client
    finally:
        await async_client.close()


@pytest.fixture
def api() -> Iterator[QuotingAPI]:
    """A model API that quotes back every credential it was sent (``quoting_api``), for the
    tests that no view, file or repr shows one; ``quoting_api.fragola_on`` makes a Fragola
    on it with a given key. (A module may define an ``api`` of its own.)"""
    server = QuotingAPI()
    yield server
    server.close()

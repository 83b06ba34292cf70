"""Shared fixtures: a scripted OpenAI-compatible model behind the real ``openai`` client.

``model`` is a started :class:`~fragola_nb.models.scripted.ScriptedModel` with an empty script (push
items with ``model.push(...)``). At teardown every request it received is checked against the
official ``CreateChatCompletionRequest`` schema, and every completion and stream chunk it sent
against the response/chunk schemas, so a test that drifts from the real wire format fails.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import openai
import pytest
import pytest_asyncio
from openai_schema import SchemaMismatch, validate_chunk, validate_request, validate_response

from fragola_nb.models.scripted import ScriptedModel


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

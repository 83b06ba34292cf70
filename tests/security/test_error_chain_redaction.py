"""Issue 21 B follow-up: the ``openai`` error a ``ModelHTTPError`` chains holds no credential.

A server that echoes the key it was sent (a 401) or quotes a field of the body (a 422) puts it
in the raw body the ``openai`` error keeps: its message, ``body``, ``response`` and the
``request`` it was made for. The chain stays whole (``%tb``, a logged traceback), redacted in
place. Checked in process (``traceback.format_exception``) and in a real kernel, where a cell
that calls such a server ends as an error and ``%tb`` prints the whole chain.
"""

from __future__ import annotations

import json
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from support.echo_api import BODY_TOKEN, KEY, EchoAPI, fastapi_422, rejecting_key
from support.helpers import model_error

from fragola_nb import Fragola, ModelHTTPError
from fragola_nb.base.redact import redact_exception


def echoing_both(auth: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """A 401 that quotes the key and the body's fields, in its message and elsewhere."""
    return 401, {"error": {"message": f"Incorrect API key provided: {auth}; body {body}",
                           "type": "auth", "code": "invalid_api_key"},
                 "you_sent": {"key": auth, "extra": body.get("access_tokens")}}


async def raised_by(answer: Any) -> ModelHTTPError:
    api = EchoAPI(answer)
    fragola = Fragola(api_key=KEY, base_url=api.base_url, model="m", max_retries=0)
    agent = fragola.agent(name="a", model_settings={
        "extra_body": {"access_tokens": BODY_TOKEN}, "extra_headers": {"x-goog-api-key": KEY}})
    raised = await model_error(agent, "hi", fragola, api)
    return raised.value


@pytest.mark.parametrize("answer", [rejecting_key, fastapi_422, echoing_both])
async def test_the_chained_openai_error_holds_no_credential_and_stays_chained(
        answer: Any) -> None:
    err = await raised_by(answer)
    cause = err.__cause__
    assert isinstance(cause, openai.APIStatusError)  # the chain is kept, not cut
    assert cause.status_code == err.status_code
    shown = [
        "".join(traceback.format_exception(err)), str(cause), repr(cause), cause.message,
        json.dumps(cause.body), cause.response.text, str(cause.response.headers),
        str(cause.request.headers), cause.request.content.decode(), str(cause.request.url),
        str(cause.response.request.headers), cause.response.request.content.decode(),
    ]
    for text in shown:
        assert KEY not in text and BODY_TOKEN not in text, text
    assert "[redacted]" in shown[5]  # what was hidden says so
    # openai >= 3.60 drops Authorization from the request it keeps; older ones keep it, and we
    # redact it. A credential header openai does not know is ours to redact in every version.
    assert cause.request.headers.get("Authorization") in (None, "Bearer [redacted]")
    assert cause.request.headers["x-goog-api-key"] == "[redacted]"
    assert cause.response.status_code == cause.status_code


async def test_what_the_server_said_besides_the_key_stays_in_the_chain() -> None:
    err = await raised_by(rejecting_key)
    cause = err.__cause__
    assert isinstance(cause, openai.AuthenticationError)
    assert cause.body == {"message": "Incorrect API key provided: [redacted]", "type": "auth",
                          "code": "invalid_api_key"}
    assert cause.code == "invalid_api_key"
    assert "Incorrect API key provided: [redacted]" in "".join(traceback.format_exception(err))


def test_redact_exception_walks_cause_and_suppressed_context_and_notes() -> None:
    def raising() -> None:
        try:
            try:
                raise json.JSONDecodeError("bad", f"key={KEY}", 0)
            except ValueError:
                raise LookupError(f"found {KEY}", {"token": "abc"}) from None
        except LookupError as exc:
            exc.add_note(f"note {KEY}")
            raise RuntimeError("outer") from exc

    with pytest.raises(RuntimeError) as raised:
        raising()
    redact_exception(raised.value, known=[KEY])
    inner = raised.value.__cause__
    assert inner is not None and inner.args == ("found [redacted]", {"token": "[redacted]"})
    assert inner.__notes__ == ["note [redacted]"]
    decode = inner.__context__
    assert isinstance(decode, json.JSONDecodeError) and KEY not in decode.doc
    assert KEY not in "".join(traceback.format_exception(raised.value))


# -- in a real kernel -------------------------------------------------------------------------


@pytest.fixture
def api() -> Iterator[EchoAPI]:
    server = EchoAPI(echoing_both)
    try:
        yield server
    finally:
        server.close()


def everything(result: Any) -> str:
    """All a cell printed or showed: streams, outputs (every mime type), its error."""
    parts = [result.stdout, result.stderr, json.dumps(result.outputs)]
    if result.error is not None:
        parts.append(json.dumps(result.error))
    return "\n".join(parts)


def test_a_cell_calling_a_server_that_echoes_the_key_shows_it_nowhere(
        api: EchoAPI, tmp_path: Path) -> None:
    from support.kernel_harness import Kernel, startup_profile

    with Kernel(env=startup_profile(tmp_path / "ipython")) as kernel:
        kernel.execute(
            "from fragola_nb import Fragola\n"
            f"fragola = Fragola(api_key={KEY!r}, base_url={api.base_url!r}, model='m', "
            "max_retries=0)\n"
            "agent = fragola.agent(name='a', model_settings={'extra_body': "
            f"{{'access_tokens': {BODY_TOKEN!r}}}}})")
        cells = [
            ("await agent.user_message('hi')", True),
            ("%tb", False),  # the whole chain, as IPython prints it
            ("%%fragola\nhi again", True),
            ("%tb", False),
            ("import traceback, sys\n"
             "try:\n    await agent.user_message('once more')\n"
             "except Exception as e:\n    traceback.print_exception(e)\n"
             "    print(repr(e.__cause__), e.__cause__.body, e.__cause__.response.text)", False),
        ]
        for code, fails in cells:
            result = kernel.execute(code, allow_error=True)
            text = everything(result)
            assert (result.error is not None) == fails or code == "%tb", (code, text)
            assert KEY not in text and BODY_TOKEN not in text, (code, text)
            if fails:
                assert result.error is not None
                assert result.error["ename"] == "ModelHTTPError"
            if code == "%tb":  # the chain is there, redacted
                assert "AuthenticationError" in text and "[redacted]" in text, text

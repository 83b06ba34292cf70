"""Rate limits and 429s: requests are paced for the whole Fragola, and a 429 is waited out
(its Retry-After, else a backoff) and heard as a ``throttled`` event, failing only once the
retries are spent. Timings are read from when the scripted server saw each request."""

from __future__ import annotations

import asyncio
import email.utils
import time
from typing import Any

import pytest
from support.helpers import make_fragola
from support.invariants import check_agent

from fragola_nb import BadUsage, Fragola, ModelHTTPError, RateLimit
from fragola_nb.models.client.ratelimit import Limiter, retry_delay
from fragola_nb.models.scripted import ScriptedModel, fail, reply


async def test_rpm_spaces_the_requests_of_every_agent_and_fork(model: ScriptedModel) -> None:
    model.push(*[reply(f"answer {i}") for i in range(4)])
    fragola = make_fragola(model, rate_limit=RateLimit(rpm=240))  # one every 0.25 s
    first = fragola.agent("first")
    agents = [first, first.fork("fork"), fragola.agent("second"), fragola.agent("third")]

    states = await asyncio.gather(*(a.user_message("hi") for a in agents))

    assert [s.outcome for s in states] == ["finished"] * 4
    gaps = [b - a for a, b in zip(model.arrived, model.arrived[1:], strict=False)]
    assert len(gaps) == 3 and min(gaps) > 0.2, gaps  # 0.25 s apart, less the clocks' jitter
    await fragola.aclose()


def test_tpm_waits_for_the_tokens_and_gives_back_what_was_not_used() -> None:
    limiter = Limiter(RateLimit(tpm=60))  # a bucket of 60 tokens, refilled at 1 a second
    assert limiter.reserve(60) == 0
    assert limiter.reserve(30) == pytest.approx(30, abs=0.5)
    limiter.settle(60, 10)  # the first used 10 of the 60 it took: 50 come back
    assert limiter.reserve(20) == pytest.approx(30, abs=0.5)  # no wait beyond the second's


def test_a_request_bigger_than_a_minute_of_tokens_still_goes() -> None:
    limiter = Limiter(RateLimit(tpm=10))
    assert limiter.reserve(1_000) == 0
    assert limiter.reserve(1) > 59  # the bucket is deep in debt, then refills


async def test_a_429_is_waited_out_after_its_retry_after_and_heard(model: ScriptedModel
                                                                    ) -> None:
    model.push(fail(429, "slow down", headers={"Retry-After": "1"}), reply("made it"))
    fragola = Fragola(api_key="test-key", base_url=model.base_url, max_retries=2)
    agent = fragola.agent("patient")
    heard: list[float] = []
    agent.on_throttled(lambda event: heard.append(event.seconds))

    state = await agent.user_message("hi")

    assert (state.outcome, state.messages[-1]["content"]) == ("finished", "made it")
    assert heard == [1.0]
    assert len(model.requests) == 2 and model.arrived[1] - model.arrived[0] >= 0.95
    check_agent(agent)
    await fragola.aclose()


async def test_429s_fail_once_the_retries_are_spent_with_one_clear_line(model: ScriptedModel
                                                                         ) -> None:
    slow = fail(429, "slow down", headers={"retry-after-ms": "10"})
    model.push(slow, slow, reply("next time"))
    fragola = Fragola(api_key="test-key", base_url=model.base_url, max_retries=1)
    agent = fragola.agent("hasty")
    heard: list[float] = []
    agent.on_throttled(lambda event: heard.append(event.seconds))

    with pytest.raises(ModelHTTPError) as caught:
        await agent.user_message("hi")

    assert caught.value.status_code == 429
    assert str(caught.value) == "the model API answered HTTP 429: slow down (after 1 retry)"
    assert heard == [0.01] and len(model.requests) == 2
    assert (await agent.step()).messages[-1]["content"] == "next time"
    await fragola.aclose()


@pytest.mark.parametrize(("headers", "expected"), [
    ({"Retry-After": "3"}, 3.0),
    ({"retry-after-ms": "250"}, 0.25),
    ({"Retry-After": "0"}, 0.0),
])
def test_retry_after_is_read_in_seconds_or_milliseconds(headers: dict[str, str],
                                                         expected: float) -> None:
    assert retry_delay(429, headers, 0) == expected


def test_retry_after_may_be_an_http_date() -> None:
    when = email.utils.formatdate(time.time() + 5, usegmt=True)
    assert retry_delay(429, {"Retry-After": when}, 0) == pytest.approx(5, abs=1.1)


@pytest.mark.parametrize(("status", "headers", "retried"), [
    (400, {}, False), (429, {}, True), (503, {}, True), (None, {}, True),
    (500, {"x-should-retry": "false"}, False), (400, {"x-should-retry": "true"}, True),
    (429, {"Retry-After": "3600"}, True),  # too long to honour: a backoff instead
])
def test_what_is_retried_and_the_backoff(status: int | None, headers: dict[str, str],
                                         retried: bool) -> None:
    delay = retry_delay(status, headers, 1)
    assert (delay is not None) == retried
    if retried and "Retry-After" not in headers:
        assert 0.75 <= delay <= 1.0  # type: ignore[operator]  # 0.5 s doubled, less jitter
    if "Retry-After" in headers:
        assert delay is not None and delay <= 1.0


@pytest.mark.parametrize("bad", [{}, {"rpm": 0}, {"tpm": -5}, {"rpm": "60"}, {"rpm": True}])
def test_a_rate_limit_that_makes_no_sense_is_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(BadUsage, match="RateLimit"):
        RateLimit(**bad)


def test_rate_limit_must_be_a_rate_limit() -> None:
    with pytest.raises(BadUsage, match="rate_limit must be a RateLimit"):
        Fragola.scripted(rate_limit=60)  # type: ignore[arg-type]


def test_a_rate_limit_is_split_across_workers_and_kept_in_the_client_settings() -> None:
    fragola = Fragola.scripted(rate_limit=RateLimit(rpm=100, tpm=1_000))
    try:
        assert fragola.client_settings().rate_limit == RateLimit(rpm=100, tpm=1_000)
        assert RateLimit(rpm=100, tpm=1_000).split(4) == RateLimit(rpm=25, tpm=250)
    finally:
        assert fragola.scripted_model is not None
        fragola.scripted_model.stop()


async def test_tpm_takes_the_estimate_then_keeps_only_the_reported_tokens(
    model: ScriptedModel,
) -> None:
    # Each request may ask for up to 500 tokens, so it takes about that from a bucket of
    # 600; the server reports a few, and the rest comes back at once: the second request,
    # which would otherwise wait most of a minute for the bucket to refill, goes straight on.
    model.push(reply("short"), reply("short again"))
    fragola = make_fragola(model, rate_limit=RateLimit(tpm=600))
    agent = fragola.agent("frugal", model_settings={"max_tokens": 500})

    await agent.user_message("hi")
    await agent.user_message("hi again")

    assert len(model.requests) == 2 and model.arrived[1] - model.arrived[0] < 5
    await fragola.aclose()


@pytest.mark.parametrize("when", [
    "Fri, 01 Jan 99999 00:00:00 GMT",  # a year no clock holds
    "Mon, 01 Jan 0001 00:00:00 GMT",  # long past
    "not a date at all",
])
async def test_a_retry_after_date_that_cannot_be_waited_for_is_backed_off_and_retried(
        model: ScriptedModel, when: str) -> None:
    assert 0.375 <= retry_delay(429, {"Retry-After": when}, 0) <= 0.5  # type: ignore[operator]
    model.push(fail(429, "slow down", headers={"Retry-After": when}), reply("made it"))
    fragola = Fragola(api_key="test-key", base_url=model.base_url, max_retries=2)
    agent = fragola.agent("patient")

    state = await agent.user_message("hi")

    assert (state.outcome, state.messages[-1]["content"]) == ("finished", "made it")
    assert len(model.requests) == 2
    check_agent(agent)
    await fragola.aclose()


async def test_a_cache_miss_refused_after_a_budget_stop_gives_its_tokens_back(
        model: ScriptedModel, tmp_path: Any) -> None:
    """On ``Fragola.cached`` with its budget spent, a miss is not sent (``NotCached``): the
    tokens it reserved under ``tpm`` come back, so the hits after it do not wait for them."""
    from fragola_nb import Budget

    model.brain = lambda request: reply("ok")
    fragola = Fragola.cached(tmp_path / "cache.jsonl", "m", api_key="k",
                             base_url=model.base_url, max_retries=0,
                             rate_limit=RateLimit(tpm=600), budget=Budget(tokens=1))
    try:
        agent = fragola.agent("a")
        first = await agent.user_message("x" * 1_600)  # sent: spends the budget
        assert first.outcome == "finished" and len(model.requests) == 1
        limiter = fragola._model._limiter
        assert limiter is not None
        for n in range(3):  # each a miss: not sent, each reserving about 400 tokens
            refused = await fragola.agent(f"b{n}").user_message(str(n) * 1_600)
            assert refused.outcome == "budget"
        assert len(model.requests) == 1
        # the bucket holds its 600 tokens (less the first call's reported use, refilled
        # since at 10 a second): a request of 500 goes at once
        assert limiter.reserve(500) == 0
    finally:
        await fragola.aclose()

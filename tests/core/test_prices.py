"""Prices as a user gives them: models named under their provider (LiteLLM's and OpenRouter's
"provider/model"), prices of any real number type and one short line for the rest, and a
``Fragola.from_env`` offline that keeps its prices (priced, not paid).

Against the scripted model behind the real ``openai`` client. (The main cases of usage and
cost: tests/core/test_usage.py.)
"""

from __future__ import annotations

from decimal import Decimal

import genai_prices
import pytest

from fragola_nb import BadUsage, Fragola, Usage
from fragola_nb.core.usage import CallUsage, check_prices


def listed(model: str, prompt: int, completion: int) -> float:
    usage = genai_prices.Usage(input_tokens=prompt, output_tokens=completion)
    return float(genai_prices.calc_price(usage, model).total_price)


def test_a_model_named_under_its_provider_is_priced_as_the_bare_model() -> None:
    # LiteLLM and OpenRouter spell models "provider/model": genai-prices knows them so.
    for name in ("openai/gpt-4o-mini", "openrouter/openai/gpt-4o-mini"):
        cost = Usage((CallUsage(name, 1000, 500, 1500),)).cost
        assert cost == pytest.approx(listed("gpt-4o-mini", 1000, 500))
    # A prefix genai-prices does not know as a provider is not a guess at another's price.
    assert Usage((CallUsage("ollama/llama3.2", 1000, 500, 1500),)).cost is None
    assert Usage((CallUsage("mine/gpt-4o-mini", 1000, 500, 1500),)).cost is None


def test_prices_take_any_real_number_and_refuse_the_rest_in_one_short_line() -> None:
    import numpy as np

    checked = check_prices({"m": {"input": Decimal("0.15"), "output": np.float64(0.6),
                                  "cached_input": np.int64(0)}})
    assert (checked["m"].input, checked["m"].output, checked["m"].cached_input) == (0.15, 0.6, 0)
    for bad in (Decimal("sNaN"), Decimal("NaN"), 10**400, "0.15", True, -1, float("inf")):
        with pytest.raises(BadUsage) as caught:
            check_prices({"m": {"input": bad, "output": 1}})
        message = str(caught.value)
        assert message.startswith("prices['m']['input'] must be a number >= 0, not ")
        assert "\n" not in message and len(message) < 120


async def test_from_env_offline_keeps_the_prices(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(variable, raising=False)
    fragola = Fragola.from_env(model="house-model",
                               prices={"house-model": {"input": 1.0, "output": 2.0}})
    try:
        agent = fragola.agent("a")
        await agent.user_message("Hello.")
        usage = agent.usage
        assert usage.unpaid == pytest.approx(  # offline: priced, not paid
            (usage.prompt_tokens * 1.0 + usage.completion_tokens * 2.0) / 1e6)
        assert usage.cost == 0.0 and "not paid" in usage.summary()
    finally:
        await fragola.aclose()

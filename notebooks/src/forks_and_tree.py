# %% active="py"
# The source of ../forks_and_tree.ipynb: ../build.py writes the notebook from it.
# A cell marked active="py", such as this one, is not in the notebook: it is for ruff and mypy.
# Right in a notebook, not in a module:
# - await at the top level (F704);
# - cells import as they go (E402).
# ruff: noqa: E402, F704

# %% [markdown]
# # Forks and the fork tree
#
# A fork is a new agent that starts where another one is and then goes its own way, like a
# branch in git. Use forks to try several continuations of one conversation and compare
# them. This notebook shows what a fork copies and what it shares, how to see the tree
# and what each branch added, and how to keep the work: export a branch, save and load a
# whole session.
#
# Runs offline on the scripted demo model when `OPENAI_API_KEY` is not set.

# %%
# %load_ext fragola_nb

# %%
from fragola_nb import Fragola, create_store, tool

fragola = Fragola.from_env()

# %% [markdown]
# ## 1. A trip planner with two kinds of store
#
# Stores are small named values that tools and listeners share through the context:
#
# - `trip`, given to the agent (`fragola.agent(stores=[...])`): **each fork gets its own
#   copy**, so one branch's bookings do not appear in another;
# - `budget`, given to the `Fragola` (`fragola.add_store(...)`): **shared** by every agent
#   and every fork, like a real bank account.

# %%
PRICES = {"Paris": 180, "Rome": 140, "Lisbon": 110}

budget = create_store({"spent": 0}, "budget")
fragola.add_store(budget)


@tool
def book_hotel(city: str, nights: int, context) -> str:
    """Book a hotel room.

    Args:
        city: the city
        nights: how many nights
    """
    cost = PRICES.get(city, 100) * nights
    trip, budget = context.get_store("trip"), context.get_store("budget")
    trip.update(lambda value: {"hotels": [*value["hotels"], f"{city} x{nights}"]})
    budget.update(lambda value: {"spent": value["spent"] + cost})
    return f"booked {city} x{nights} for {cost} EUR"


planner = fragola.agent(
    name="planner",
    instructions="You plan trips. Use your tools.",
    tools=[book_hotel],
    stores=[create_store({"hotels": []}, "trip")],
)


# %% [markdown]
# A listener is copied to forks too, and **re-bound**: in a fork, `event.context` is the
# fork. This one names the agent whose tool ran:

# %%
def announce(event):
    print(f"[{event.context.agent.name}] {event.name} -> {event.result}")


subscription = planner.on_after_tool_call(announce)

# %% active="ipynb"
# %%fragola planner
# We start in Paris. Book hotel in Paris for 2 nights.

# %% [markdown]
# The panel lists the agent's stores at the bottom: `trip` with one hotel.
#
# ## 2. Two forks from the same point
#
# `--fork NAME` forks the agent, binds the fork to `NAME` and sends the cell to it.
# Both forks start from the same four messages.

# %% active="ipynb"
# %%fragola planner --fork rome
# Then book hotel in Rome for 3 nights.

# %% active="py"
# What the %%fragola cell above binds, in Python (for ruff and mypy; never run).
rome = planner.fork("rome")

# %% active="ipynb"
# %%fragola planner --fork lisbon
# Then book hotel in Lisbon for 4 nights.

# %% active="py"
# What the %%fragola cell above binds, in Python (for ruff and mypy; never run).
lisbon = planner.fork("lisbon")

# %% [markdown]
# A fork can be forked again. In code, `agent.fork(name)` does what `--fork` does:

# %%
rome_long = rome.fork("rome_long")
state = await rome_long.user_message("Book hotel in Rome for 2 more nights.")

# %% [markdown]
# ## 3. What is copied, what is shared
#
# Each branch has its own `trip` store, holding what *it* booked; the `budget` store is
# the same object for all of them and adds everything up.

# %%
for branch in (planner, rome, lisbon, rome_long):
    print(f"{branch.name:10} hotels: {branch.get_store('trip').get()['hotels']}")
print("shared budget:", budget.get())

assert planner.get_store("trip").get() == {"hotels": ["Paris x2"]}
assert rome_long.get_store("trip").get() == {"hotels": ["Paris x2", "Rome x3", "Rome x2"]}
assert budget.get() == {"spent": 2 * 180 + 3 * 140 + 4 * 110 + 2 * 140}

# %% [markdown]
# Tools are per agent too: take them away from one fork and the others keep theirs.
# Without a tool to call, the demo model just echoes.

# %%
lisbon.context.update_tools([])
state = await lisbon.user_message("Book hotel in Porto for 1 night.")
print(state.messages[-1]["content"])

print("planner's tools:", [t.name for t in planner.options.tools])
print("lisbon's tools: ", [t.name for t in lisbon.options.tools])
assert [t.name for t in planner.options.tools] == ["book_hotel"]


# %% [markdown]
# ## 4. The tree
#
# `%fragola_tree` draws the tree from its root, whichever agent you name. Each node shows
# the agent's name, id, message count, status and how many messages it **added since its
# fork**. Click a node (or move with the arrow keys and press Enter) to open that branch's
# panel below; type in its message box to talk to that branch. The panel's *Fork* button
# makes a new fork, binds it to a variable (the panel says which; `%fragola_agents` lists
# it) and selects it in the tree.

# %%
# %fragola_tree rome

# %% [markdown]
# The same facts are on the agents: `forks`, `parent`, `root`, `fork_of` (the parent's id)
# and `fork_point` (how many messages it inherited).

# %%
def draw(agent, depth=0):
    count = agent.message_count
    added = "" if agent.parent is None else f", +{count - agent.fork_point} since its fork"
    print("    " * depth + f"{agent.name} [{agent.id}] {count} messages{added}")
    for fork in agent.forks:
        draw(fork, depth + 1)


draw(rome_long.root)
assert rome_long.root is planner and rome_long.parent is rome

# %% [markdown]
# What a branch added is the slice of its history after its fork point. The history is
# shared with the parent up to there (a fork costs nothing however long the conversation
# is), so the slices are all that differ:

# %%
for message in rome.state.messages[rome.fork_point:]:
    text = message.get("content") or message["tool_calls"][0]["function"]
    print(f"{message['role']:9} {text}")

# %% [markdown]
# ## 5. Exports
#
# `export_markdown(agent)` writes an agent's branch, from the root to its last message, as
# Markdown. `export_html(agent)` writes one page to browse offline: the agent's whole fork
# tree, its branch open, drawn by one small inline script (the page loads nothing from the
# network: its Content-Security-Policy forbids it). `export_tree_markdown` writes the root's
# conversation, then each fork's additions (`export_tree_html`: the same as a static page,
# with no script at all). Each returns the text, and
# writes it to a file when given a path. Here, into a temporary folder. Shown in a notebook,
# the text is a compact box that scrolls (the file keeps its headings); `print()` it for the
# Markdown source:

# %%
import tempfile
from pathlib import Path

from fragola_nb import export_html, export_markdown, export_tree_markdown

workdir = Path(tempfile.mkdtemp(prefix="fragola-guide-"))
export_html(rome, workdir / "rome.html")
export_markdown(rome, workdir / "rome.md")

# %%
export_tree_markdown(planner)

# %% [markdown]
# ## 6. Save the session, load it back
#
# `save_session(path, agent)` writes the whole tree the agent belongs to (every fork),
# the agents' own stores and the `Fragola`'s stores, to one JSON file. No API key is ever
# written, and no code: tools and listeners are saved **by name** and must be given back
# when loading.

# %%
import json

from fragola_nb import SessionError, load_session, save_session

path = save_session(workdir / "trip.json", planner)
saved = json.loads(path.read_text())
print(f"{path.name}: {path.stat().st_size} bytes, {len(saved['agents'])} agents")
print("top-level keys:", list(saved))

# %% [markdown]
# Tomorrow, in a new kernel, you would make a `Fragola` again (it brings the key) and load
# the file into it. Forget a tool or a listener and nothing is loaded; the error says
# what is missing:

# %%
tomorrow = Fragola.from_env()
try:
    load_session(path, tomorrow, tools=[book_hotel])
except SessionError as exc:
    print("SessionError:", exc)

# %%
session = load_session(path, tomorrow, tools=[book_hotel], listeners=[announce])
print(session)
print("roots:", [agent.name for agent in session.roots])

rome_again = session["rome"]
assert rome_again.state.messages == rome.state.messages
assert rome_again.get_store("trip").get() == rome.get_store("trip").get()
assert tomorrow.get_store("budget").get() == budget.get()

# %% [markdown]
# The loaded agents carry on where they were; the tree is the same.

# %% active="ipynb"
# %%fragola rome_again
# Book hotel in Rome for 1 more night.

# %%
# %fragola_tree rome_again

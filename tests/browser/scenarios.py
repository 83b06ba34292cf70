"""Scenario notebooks for the browser tests, written with nbformat into the lab's root dir.

Each one starts with a setup cell: the extension, a scripted model (offline, deterministic)
and an agent. A script entry may be a callable ``(request) -> item``: the final answers below
quote what the model received, so the panel showing them proves the tool result (or the
rejection, or the injected text) really reached the model.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

SETUP = '''\
%load_ext fragola_nb
from fragola_nb import Fragola, tool
from fragola_nb.models.scripted import call, hang, reply, tool_calls

def last_tool_text(request):
    """The content of the last tool message the model received."""
    tools = [m for m in request["messages"] if m["role"] == "tool"]
    return tools[-1]["content"] if tools else "(none)"
'''

ADD_TOOL = '''\
@tool(require_approval=True)
def add(x: int, y: int) -> int:
    """Add two whole numbers.

    Args:
        x: the first number
        y: the second number
    """
    return x + y
'''


def write(path: Path, *cells: str, title: str = "") -> Path:
    """A notebook of code cells (a markdown title first when given)."""
    nb_cells = [new_markdown_cell(f"# {title}")] if title else []
    nb_cells += [new_code_cell(source) for source in cells]
    nb = new_notebook(
        cells=nb_cells,
        metadata={
            "kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)",
                           "language": "python"},
            "language_info": {"name": "python"},
        },
    )
    nbformat.validate(nb)
    nbformat.write(nb, str(path))
    return path


APPROVERS = ("approver", "rejecter", "editor", "injector")


def approvals(root: Path, name: str) -> Path:
    """Four agents (one per way to decide), each of whose first turn pauses on
    ``add(x=2, y=3)``, which needs approval; each agent's next reply quotes the tool message
    it got. Cells: title, setup, then one ``%%fragola AGENT`` cell per agent."""
    script = '''\
def calculator(name):
    fragola = Fragola.scripted([
        tool_calls(call("add", {"x": 2, "y": 3})),
        lambda request: reply("Final answer, the tool said: " + last_tool_text(request)),
    ])
    return fragola.agent(name=name, instructions="Use your tools.", tools=[add])

''' + "".join(f"{agent} = calculator({agent!r})\n" for agent in APPROVERS)
    turns = [f"%%fragola {agent}\nPlease add 2 and 3" for agent in APPROVERS]
    return write(root / name, SETUP + "\n" + ADD_TOOL + "\n" + script, *turns,
                 title="Approval by clicking")


def streaming(root: Path, name: str, text: str, chunk_delay: float, interval: float) -> Path:
    """A reply streamed 4 characters per chunk, ``chunk_delay`` seconds apart, sent to the
    browser at most once per ``interval`` seconds (``Stream.interval``, the throttle)."""
    script = f'''\
from fragola_nb.notebook.stream import Stream
Stream.interval = {interval!r}
fragola = Fragola.scripted([reply({text!r})], chunk_delay={chunk_delay!r})
agent = fragola.agent(name="streamer")
'''
    return write(root / name, SETUP + "\n" + script, "%%fragola\nTell me a long story",
                 title="Streaming")


def stop(root: Path, name: str) -> Path:
    """Two agents whose model never answers once they run: ``stepper`` has a first turn
    (cell 2) and hangs on its next model call, made by its panel's Step button; ``sleepy``
    hangs in its ``%%fragola`` cell (cell 3, the last: Run All stays on it)."""
    script = '''\
stepper = Fragola.scripted([reply("First answer."), hang()]).agent(name="stepper")
sleepy = Fragola.scripted([hang()]).agent(name="sleepy")
'''
    return write(root / name, SETUP + "\n" + script, "%%fragola stepper\nHello",
                 "%%fragola sleepy\nAre you there?", title="Stop")


HOSTILE_SCRIPT = "<script>window.__pwned=1;alert(1)</script>"
HOSTILE_IMG = '<img src=x onerror="window.__pwned=1;alert(2)">'
HOSTILE = (HOSTILE_SCRIPT + " " + HOSTILE_IMG
           + " file\u202egnp.exe pay\u200bpal " + "T" * 5000
           + " https://example.invalid/" + "a" * 600)
# As a reader must see it: the direction override and the zero-width space written out.
HOSTILE_SHOWN = HOSTILE.replace("\u202e", "\\u202e").replace("\u200b", "\\u200b")


def hostile(root: Path, name: str) -> Path:
    """A tool result and a model reply that carry markup which would set ``window.__pwned``
    if it were ever parsed as HTML (cell 2: the turn; cell 3: the agent's fork tree)."""
    script = f'''\
HOSTILE = {HOSTILE!r}

@tool
def fetch_page(url: str) -> str:
    """Fetch a web page.

    Args:
        url: the address
    """
    return "page body: " + HOSTILE

fragola = Fragola.scripted([
    tool_calls(call("fetch_page", {{"url": "http://example.invalid/"}})),
    reply("The page says:\\n\\n" + HOSTILE + "\\n\\nand that is all."),
], chunk_delay=0.01)
agent = fragola.agent(name="reader", tools=[fetch_page])
'''
    return write(root / name, SETUP + "\n" + script, "%%fragola\nWhat is on the page?",
                 "%fragola_tree agent", title="Hostile text")


def fork_tree(root: Path, name: str) -> Path:
    """A root agent with one turn (cell 2) and its tree (cell 3); cell 4, run again after a
    fork was made from the panel, sends a message to that fork."""
    script = '''\
fragola = Fragola.scripted([
    reply("Root answer: the trunk of the tree."),
    reply("Branch answer: only this fork knows it."),
])
agent = fragola.agent(name="trunk")
'''
    branch = '''\
if agent.forks:  # run again once a fork was made from the panel
    branch = agent.forks[-1]
    state = await branch.user_message("A question asked only on the branch")
    print("BRANCH", branch.id, branch.name, len(state.messages))
else:
    print("NO FORK YET")
'''
    return write(root / name, SETUP + "\n" + script, "%%fragola\nHello root",
                 "%fragola_tree agent", branch, title="Fork tree")


def saved(root: Path, name: str) -> Path:
    """A finished conversation with a tool call (cell 2), then the agent's tree (cell 3)."""
    script = '''\
@tool
def capital(country: str) -> str:
    """The capital of a country.

    Args:
        country: its name
    """
    return {"France": "Paris"}.get(country, "unknown")

fragola = Fragola.scripted([
    tool_calls(call("capital", {"country": "France"})),
    lambda request: reply("The capital of France is " + last_tool_text(request) + "."),
])
agent = fragola.agent(name="geographer", tools=[capital])
'''
    return write(root / name, SETUP + "\n" + script,
                 "%%fragola\nWhat is the capital of France?", "%fragola_tree agent",
                 title="Saved state")


# -- the panel, second version (issue 11) -------------------------------------------------------

HOSTILE_NAME = '<img src=x onerror="alert(3)">\u202egnp.exe'
HOSTILE_TOOL = '<svg onload="alert(6)">'  # a name no tool has: the call fails, shown as text
MARKDOWN = (
    "# Findings\n\n" + HOSTILE_SCRIPT + " and " + HOSTILE_IMG + "\n\n"
    "[safe](https://example.org) [js](javascript:alert(4)) "
    "[data](data:text/html;base64,PHNjcmlwdD5hbGVydCg1KTwvc2NyaXB0Pg==)\n\n"
    "| name | state |\n|---|---|\n| file\u202egnp.exe | ~~old~~ new |\n\n"
    "```python\nprint('copy me')\n```\n\n"
    + "T" * 5000 + " https://example.invalid/" + "a" * 600 + "\n"
)


def hostile_everywhere(root: Path, name: str) -> Path:
    """Hostile text in every place a panel shows text: the agent's name, a store's name and
    value, the user message (cell 2's body), a tool's arguments (the card) and result, a call
    to a tool named like markup, the assistant's Markdown, and (cell 3) an error's message.
    Cell 2 pauses on ``fetch_page``; cell 3 runs once it is approved."""
    script = f'''\
from fragola_nb import create_store
HOSTILE = {HOSTILE!r}

@tool(require_approval=True)
def fetch_page(url: str) -> str:
    """Fetch a web page.

    Args:
        url: the address
    """
    return "page body: " + HOSTILE

fragola = Fragola.scripted([
    tool_calls(call("fetch_page",
                    {{"url": "http://example.invalid/file\\u202egnp.exe " + HOSTILE}}),
               call({HOSTILE_TOOL!r}, {{"a": HOSTILE}})),
    reply({MARKDOWN!r}),
    fail(500, "upstream said: " + HOSTILE),
], chunk_delay=0.001)
notes = create_store({{"note": HOSTILE}}, "<b>notes</b>\\u202e")
agent = fragola.agent(name={HOSTILE_NAME!r}, tools=[fetch_page], stores=[notes])
'''
    setup = SETUP.replace("import call, hang,", "import call, fail, hang,")
    user = "%%fragola\nRead this: " + HOSTILE
    return write(root / name, setup + "\n" + script, user, "%%fragola\nOnce more",
                 title="Hostile text everywhere")


def cards(root: Path, name: str) -> Path:
    """Cell 2: ``mixed`` pauses on four ``add`` calls (one per way to decide) beside a ``boom``
    call that fails. Cell 3: ``stopper`` pauses on one call. Cell 4: ``budget`` (max_step 1)
    uses its step budget. Cell 5: ``budget``'s tree (it has a fork). Cell 6, the last:
    ``sleepy`` hangs, with ``--model other-model``."""
    script = '''\
@tool
def boom(why: str) -> str:
    """A tool that fails.

    Args:
        why: the reason
    """
    raise ValueError("boom: " + why)

@tool
def noop() -> str:
    """Does nothing."""
    return "nothing done"

mixed = Fragola.scripted([
    tool_calls(*[call("add", {"x": n, "y": n}, id=f"c_{way}")
                 for n, way in enumerate(["approve", "reject", "edit", "inject"], 1)],
               call("boom", {"why": "on purpose"}, id="c_boom")),
    lambda request: reply("All answered: " + " | ".join(
        m["content"] for m in request["messages"] if m["role"] == "tool")),
]).agent(name="mixed", tools=[add, boom])
stopper = Fragola.scripted([tool_calls(call("add", {"x": 1, "y": 2}))]).agent(
    name="stopper", tools=[add])
budget = Fragola.scripted([tool_calls(call("noop", {})), reply("never reached")]).agent(
    name="budget", tools=[noop], max_step=1)
budget_fork = budget.fork("budget-twin")
sleepy = Fragola.scripted([hang()]).agent(name="sleepy")
'''
    return write(root / name, SETUP + "\n" + ADD_TOOL + "\n" + script,
                 "%%fragola mixed\nAdd these up", "%%fragola stopper\nAdd 1 and 2",
                 "%%fragola budget\nDo nothing, once", "%fragola_tree budget",
                 "%%fragola sleepy --model other-model\nAre you there?", title="Cards")


def reset(root: Path, name: str) -> Path:
    """``agent``: cell 2 a finished turn, cell 3 a turn paused on ``add``, cell 4 its full
    panel; cells 5 and 6 (run later, one by one) a new turn and ``%fragola_reset``."""
    script = '''\
fragola = Fragola.scripted([
    reply("First answer, kept in its panel."),
    tool_calls(call("add", {"x": 2, "y": 3})),
    reply("Second answer."),
    reply("Third answer, before the magic reset."),
])
agent = fragola.agent(name="resettable", tools=[add])
'''
    return write(root / name, SETUP + "\n" + ADD_TOOL + "\n" + script,
                 "%%fragola\nFirst question", "%%fragola\nSecond question",
                 "%fragola_panel agent", "%%fragola\nThird question", "%fragola_reset agent",
                 title="Reset")


def big(root: Path, name: str, count: int) -> Path:
    """``agent`` with ``count`` messages made in code (cell 1), its full panel (cell 2); cell 3
    (run later) adds 12 turns, one every 0.4 s, on the scripted demo model."""
    script = f'''\
import asyncio
history = []
for i in range({count} // 2):
    history.append({{"role": "user", "content": f"question {{2 * i}}"}})
    history.append({{"role": "assistant",
                    "content": f"answer {{2 * i + 1}}: " + "words " * (i % 7)}})
fragola = Fragola.scripted()
agent = fragola.agent(name="long-talker", messages=history)
'''
    more = '''\
for n in range(12):
    await agent.user_message(f"more {n}")
    await asyncio.sleep(0.4)
print("ADDED", agent.message_count)
'''
    return write(root / name, SETUP + "\n" + script, "%fragola_panel agent", more,
                 title="A long conversation")


def chat(root: Path, name: str) -> Path:
    """``agent`` on the demo model: cell 2 a turn; cells 3 and 4 (run after a fork was made
    from the panel) list the agents and talk to the fork's variable ``branchy``."""
    script = '''\
fragola = Fragola.scripted()
agent = fragola.agent(name="chatty")
'''
    return write(root / name, SETUP + "\n" + script, "%%fragola\nHello there",
                 "%fragola_agents", "%%fragola branchy\nHello fork", title="Message box")


def stop_stream(root: Path, name: str, text: str) -> Path:
    """A long reply streamed slowly (about 15 s), to be stopped half way."""
    script = f'''\
fragola = Fragola.scripted([reply({text!r})], chunk_delay=0.05)
agent = fragola.agent(name="talker")
'''
    return write(root / name, SETUP + "\n" + script, "%%fragola\nTalk for a while",
                 title="Stop a stream")

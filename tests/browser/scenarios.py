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
from fragola_nb.scripted import call, hang, reply, tool_calls

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


def streaming(root: Path, name: str, text: str, chunk_delay: float, part_size: int) -> Path:
    """A reply streamed 4 characters per chunk, ``chunk_delay`` seconds apart, shown in parts
    of ``part_size`` characters."""
    script = f'''\
from fragola_nb.notebook.blocks import StreamView
StreamView.part_size = {part_size!r}
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


HOSTILE = ('<script>window.__pwned=1</script> <img src=x onerror="window.__pwned=1">'
           " file\u202egnp.exe pay\u200bpal " + "T" * 5000
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

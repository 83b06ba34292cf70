# %% active="py"
# The source of ../system.ipynb: ../build.py writes the notebook from it.
# A cell marked active="py", such as this one, is not in the notebook: it is for ruff and mypy.
# Right in a notebook, not in a module:
# - await at the top level (F704);
# - a cell's last expression is its output (B018);
# - cells import as they go (E402);
# - a `;` hides a cell's output (E703);
# - a cell imports a name for the text below (F401);
# - a cell's imports are in its own order, one blank line after them (I001).
# ruff: noqa: B018, E402, E703, F401, F704, I001

# %% [markdown]
# # The rest of the Fragola system: MCP tools, guardrails, orchestration, traces
#
# Four optional modules on top of the core: tools served by an MCP server, guards on
# what enters an agent, agents that message each other, and OpenTelemetry traces of
# every turn. Each runs offline here: the MCP server is a small local process, the
# model is the scripted demo model, and traces go to an in-memory exporter.

# %%
# %load_ext fragola_nb
from fragola_nb import Fragola

# The model API the environment names, else the scripted model (and a line saying
# so). The sections below use scripted models of their own, to show fixed answers.
fragola = Fragola.from_env()

# %% [markdown]
# ## 1. MCP tools: the tools of an MCP server
#
# An MCP server offers tools to any agent that connects to it. `mcp_tools(server)`
# (from `fragola_nb`, the `fragola_nb[mcp]` extra) connects with the official
# `mcp` SDK, lists the server's tools and gives them back as fragola_nb tools: the
# remote name, description and JSON Schema (the model's arguments are checked against
# it before the call is sent), and a handler that forwards the call.
#
# `server` is a command that starts the server (a list of strings: stdio), or the URL
# of a server already running (Streamable HTTP, with `headers=` such as an
# `Authorization`). Here we write a small notes server with the same `mcp` package
# and start it as a process.

# %%
import sys
import tempfile
from pathlib import Path

SERVER = """
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("notes", log_level="WARNING")
notes: list[str] = []


@server.tool(description="Keep a note.")
def add_note(text: str) -> str:
    notes.append(text)
    return f"note {len(notes)} kept"


@server.tool(description="All the notes, numbered.")
def list_notes() -> str:
    return "; ".join(f"{i}. {n}" for i, n in enumerate(notes, 1)) or "no notes"


@server.tool(description="Delete a note by its number.")
def delete_note(number: int) -> str:
    if not 1 <= number <= len(notes):
        raise ToolError(f"there is no note {number}")
    return f"deleted: {notes.pop(number - 1)}"


server.run("stdio")
"""
server_file = Path(tempfile.mkdtemp()) / "notes_server.py"
server_file.write_text(SERVER);

# %% [markdown]
# Connect, and ask for a person's approval before `delete_note` runs
# (`require_approval=True` would ask for all of them). `filter=` (a function of the
# remote tool) and `prefix=` choose and rename the tools.

# %%
from fragola_nb import mcp_tools

notes_server = await mcp_tools([sys.executable, str(server_file)],
                               require_approval=["delete_note"])
for item in notes_server.tools:
    print(f"{item.name:12} {item.description:28} {item.parameters['properties']}")

# %% [markdown]
# The tools go to an agent like any others. Its model is scripted here, to show a
# fixed conversation: it keeps two notes, lists them, then asks to delete one.

# %%
from fragola_nb.testing import call, reply, tool_calls

lab = Fragola.scripted()
notes = lab.agent("notes", "Keeps notes.", "Use the notes tools.",
                  tools=notes_server.tools)
lab.script(notes, [
    tool_calls(call("add_note", {"text": "buy strawberries"}),
               call("add_note", {"text": "call Ada"})),
    tool_calls(call("list_notes", {})),
    tool_calls(call("delete_note", {"number": 2})),
    reply("Done: the call to Ada is off the list."),
    tool_calls(call("delete_note", {"number": 9})),
    reply("There is no note 9."),
])

# %% active="ipynb"
# %%fragola notes
# Note: buy strawberries, and call Ada. Then drop the second one.

# %% [markdown]
# The panel shows each MCP call and its result as it runs, then stops on
# `delete_note`: it needs an approval. 👉 **Click Approve.** (The next cell waits for
# the click, under *Run All* too, at most 2 minutes; headless, or if nobody clicks, it
# approves in code.)

# %%
from fragola_nb.notebook import wait_for_decisions

if not await wait_for_decisions(notes):  # nobody clicked: approved in code
    for pending in notes.state.pending:
        if pending.decision is None:
            notes.approve(pending.id)
    await notes.step()

for message in notes.state.messages:
    if message["role"] == "tool":
        print(message["content"])
assert notes.state.status == "idle"

# %% [markdown]
# A tool that fails on the server (an `isError` result), a server that dies during a
# call, or a call that takes longer than `timeout=` (60 s by default): the model reads
# what happened as the tool's result, and the run goes on.

# %% active="ipynb"
# %%fragola notes
# Delete note 9.

# %% [markdown]
# `delete_note` waits for an approval again; approve it (here in code) to see what
# the server answers.

# %%
for pending in notes.state.pending:
    if pending.decision is None:
        notes.approve(pending.id)
if notes.state.status == "waiting":
    await notes.step()

failed = notes.state.messages[-2]["content"]
print(failed)
assert "there is no note 9" in failed

# %% [markdown]
# `remove_from(agent)` takes exactly these tools out of the agent (its other tools
# stay), and `close()` (or `await aclose()`, or `async with`) ends the connection and
# the server's process. A call after the close gets an error the model reads.

# %%
notes_server.remove_from(notes)
await notes_server.aclose()
print(notes_server)
print([t.name for t in notes.options.tools])

# %% [markdown]
# ## 2. Guardrails
#
# `guardrail(agent, *guards)` checks each new user message before the agent uses it. A
# *guard* is a plain function (sync or async) of the message's text: it returns `None`
# (or `True`) to let it through, or a reason to refuse it (a string, `False`, or a
# `Rejection` that also names the guard). The first guard that refuses ends the turn
# **before any model call**, and the call raises `GuardrailRejected`.
#
# Here a cooking assistant gets two guards: no API keys, and cooking only (async, as a
# guard that asks a classifier model would be). Its answers are scripted; the last one
# says what the model was sent.

# %%
from fragola_nb import Fragola, GuardrailRejected, Rejection, guardrail
from fragola_nb.testing import reply


def what_was_sent(request):
    users = [m["content"] for m in request["messages"] if m["role"] == "user"]
    return reply(f"I was sent these user messages: {users}")


kitchen = Fragola.scripted()
cook = kitchen.agent(name="cook", instructions="You answer cooking questions.")
kitchen.script(cook, [reply("Seven minutes in boiling water."), what_was_sent])


def no_secrets(text):
    return "it holds an API key" if "sk-" in text else None


async def on_topic(text):
    if "football" in text.lower():
        return Rejection("this assistant only talks about cooking", guard="topic")
    return None


rails = guardrail(cook, no_secrets, on_topic)
rails

# %% active="ipynb"
# %%fragola cook
# How long for a soft-boiled egg?

# %% [markdown]
# Now two messages the guards refuse. Each call raises `GuardrailRejected` (in a
# `%%fragola` cell, the cell fails in one line); here we catch it to look at it. No
# model call was made: the agent's usage still counts one request.

# %%
for text in ["Remember my key sk-live-1234 for later", "Who won the football?"]:
    try:
        await cook.user_message(text)
    except GuardrailRejected as error:
        print(f"{error}   (guard={error.guard!r}, role={error.role!r})")

print("model requests so far:", cook.usage.requests, "| status:", cook.status)

# %% [markdown]
# With `on_reject="annotate"` (the default) the refused messages stay in the history,
# marked `{"fragola_nb": {"rejected": {...}}}`, with any credential in their text
# `[redacted]` (the key above is not kept), and the panel shows each one as
# **rejected by GUARD: REASON**. A marked message is never sent to the model: the next
# turn's request is what it would have been without them, so the scripted model's
# answer below lists only the two messages that passed.

# %%
assert "sk-live" not in str(cook.state.messages)  # the refused key was not kept
cook.state.messages[2:]

# %%
# %fragola_panel cook

# %% active="ipynb"
# %%fragola cook
# And for pasta?

# %%
print(cook.state.messages[-1]["content"])

# %% [markdown]
# `on_reject="remove"` keeps nothing of a refused message (choose it when the text must
# not stay in the history or in a saved session, a pasted password say).
# `check_replies=True` also checks the model's replies before they are stored: a reply
# that fails is not kept, and none of its tool calls runs. `rails.remove()` takes the
# guards off again (off the forks that inherited them too: a fork keeps its parent's
# guards).

# %%
rails.remove()


def no_promises(text):
    return "it promises a refund" if "refund" in text.lower() else None


desk = kitchen.agent(name="desk")
kitchen.script(desk, [reply("Sure, you get a full refund!"), reply("Let me ask a person.")])
guardrail(desk, no_promises, on_reject="remove", check_replies=True)
try:
    await desk.user_message("My cake burnt. Money back?")
except GuardrailRejected as error:
    print(error, "| the reply was not stored:", desk.state.messages)

(await desk.user_message("So?")).messages[-1]["content"]

# %% [markdown]
# ## 3. Orchestration: agents that message each other
#
# `orchestrate(lead, participants, flow)` lets agents ask each other for help. Each
# agent that may send gets a `message_agent(id, message)` tool, limited to the agents
# the flow lets it reach, and the list of those agents (name, id, description, tools)
# is appended to its instructions. A message is a normal turn of the target
# (`target.user_message(message)`), and the target's answer is the tool's result.
#
# The flow is a list of edges: `{"from": a, "to": b}`, where an end is an agent (or
# its name), a list of agents, or `"*"` for every other participant;
# `"bidirectional": True` adds the way back.

# %%
from fragola_nb import Fragola, Veto, orchestrate, tool
from fragola_nb.testing import call, reply, tool_calls

office = Fragola.scripted()


@tool
def search(query: str) -> str:
    """Search the library."""
    return f"3 books on {query}"


lead = office.agent("lead", "Plans the work.", "You lead a small team.")
researcher = office.agent("researcher", "Finds facts.", "You research.", tools=[search])
writer = office.agent("writer", "Writes short notes.", "You write clearly.")

team = orchestrate(lead, [lead, researcher, writer], [
    {"from": lead, "to": "*"},
    {"from": researcher, "to": writer, "bidirectional": True},
])
print(team.graph())
print()
print(lead.instructions)

# %% [markdown]
# Offline, each agent gets its own scripted answers (`office.script(agent, [...])`):
# the lead asks the researcher, then the writer; the researcher uses its `search` tool.
# With a real model, the model chooses whom to message from the list in its
# instructions.

# %%
office.script(lead, [
    tool_calls(call("message_agent", {"id": researcher.id,
                                      "message": "What causes the tides?"})),
    tool_calls(call("message_agent", {"id": writer.id,
                                      "message": "Write one line: the Moon's pull."})),
    reply("Done: the researcher found it, the writer wrote it."),
])
office.script(researcher, [
    tool_calls(call("search", {"query": "tides"})),
    reply("The Moon's gravity pulls the oceans."),
])
office.script(writer, [reply("The Moon tugs, the sea follows.")]);

# %% [markdown]
# Each agent's panel shows its own part. Open the researcher's and the writer's panels,
# then send the lead a message: the two panels above follow the turns the lead's
# messages start.

# %%
# %fragola_panel researcher

# %%
# %fragola_panel writer

# %% active="ipynb"
# %%fragola lead
# Write a note on the tides.

# %% [markdown]
# Who messaged whom: `team.graph()` counts the messages per route, `team.log` keeps
# each one (`source`, `target`, `message`, `status`, `result`, `depth`), and showing
# `team` prints both.

# %%
assert [(m.source.name, m.target.name, m.status) for m in team.log] == [
    ("lead", "researcher", "answered"), ("lead", "writer", "answered")]
assert writer.state.messages[-1]["content"] == "The Moon tugs, the sea follows."
team

# %% [markdown]
# An `on_message=` hook sees each message before it goes: it returns `None` to send it
# as is, a string to send instead, or `Veto(reason)` to refuse it (the sender is told
# why). Loops are refused too: an agent that waits for its own answer cannot be
# messaged back (`lead → researcher → lead`), and a chain deeper than `max_depth`
# (default 3) is not sent. The model reads each refusal as the tool's result, and the
# run goes on.
#
# `team.remove()` takes the tool and the added instructions away again.

# %%
team.remove()
assert lead.instructions == "You lead a small team."
assert lead.tool_named("message_agent") is None
print(lead.instructions)

# %% [markdown]
# ## 4. Traces: OpenTelemetry spans of every turn
#
# `instrument()` (from `fragola_nb`) turns tracing on for every agent, with
# one call; `uninstrument()` turns it off. Each turn (`user_message`, `step`, `json`)
# is a span `invoke_agent NAME`; inside it, each model call is a span `chat MODEL`
# and each tool that runs is a span `execute_tool NAME`. Their attributes follow the
# OpenTelemetry GenAI semantic conventions: `gen_ai.operation.name`,
# `gen_ai.request.model`, `gen_ai.response.model`, `gen_ai.usage.input_tokens` and
# `output_tokens`, `gen_ai.tool.name`, `gen_ai.tool.call.id`, `gen_ai.agent.name`...
# Message contents are recorded only with `capture_content=True`.
#
# Here the spans go to the OpenTelemetry SDK's in-memory exporter, so we can print
# them; the README shows how to send them to Jaeger, Phoenix, Langfuse or Logfire
# (any OTLP backend).

# %%
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from fragola_nb import Fragola, instrument, tool, uninstrument
from fragola_nb.testing import call, reply, tool_calls

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
instrument(provider)


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


lab = Fragola.scripted()
calc = lab.agent("calc", "Adds numbers.", "Use the add tool.", tools=[add])
lab.script(calc, [tool_calls(call("add", {"a": 2, "b": 3})), reply("2 + 3 = 5")])
state = await calc.user_message("What is 2 + 3?")
state.messages[-1]["content"]


# %% [markdown]
# The turn made four spans. Drawn as a tree (a child under its parent), with a few of
# their attributes:

# %%
def show(spans):
    children = {}
    for span in spans:
        parent = span.parent.span_id if span.parent else None
        children.setdefault(parent, []).append(span)
    keys = ("gen_ai.request.model", "gen_ai.usage.input_tokens",
            "gen_ai.usage.output_tokens", "gen_ai.tool.call.id", "fragola.outcome",
            "error.type")

    def draw(parent, depth):
        for span in sorted(children.get(parent, []), key=lambda s: s.start_time):
            shown = {k.removeprefix("gen_ai."): span.attributes[k]
                     for k in keys if k in span.attributes}
            print("    " * depth + span.name, shown)
            draw(span.context.span_id, depth + 1)

    draw(None, 0)


show(exporter.get_finished_spans())

# %% [markdown]
# A tool that raises is an `execute_tool` span with status ERROR and `error.type` (the
# run goes on: the model reads the error as the tool's result); a model call that
# fails ends its `chat` span and the turn's span the same way. A paused turn
# (a tool waiting for approval) ends its span with `fragola.outcome` "paused": the
# `step()` that resumes it is a new span.
#
# With `capture_content=True`, the chat spans also carry the messages sent and the
# reply (`gen_ai.input.messages`, `gen_ai.output.messages`, as JSON), and the tool
# spans the arguments and the result. Calling `instrument()` again replaces the
# settings.

# %%
import json

@tool
def divide(a: float, b: float) -> float:
    """Divide a by b."""
    return a / b


exporter.clear()
instrument(provider, capture_content=True)
calc.context.update_tools([add, divide])
lab.script(calc, [tool_calls(call("divide", {"a": 1, "b": 0})),
                  reply("You cannot divide by zero.")])
await calc.user_message("What is 1 / 0?")
show(exporter.get_finished_spans())

failed = next(s for s in exporter.get_finished_spans() if s.name == "execute_tool divide")
print(failed.status.status_code, failed.status.description)
print(failed.attributes["gen_ai.tool.call.arguments"])
last_chat = [s for s in exporter.get_finished_spans() if s.name.startswith("chat")][-1]
print(json.loads(last_chat.attributes["gen_ai.output.messages"]))

# %% [markdown]
# `uninstrument()` turns tracing off; turns made after it make no spans.

# %%
uninstrument()
exporter.clear()
lab.script(calc, [reply("Untraced.")])
await calc.user_message("Anything")
len(exporter.get_finished_spans())

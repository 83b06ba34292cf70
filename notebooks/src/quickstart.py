# %% active="py"
# The source of ../quickstart.ipynb: ../build.py writes the notebook from it.
# A cell marked active="py", such as this one, is not in the notebook: it is for ruff and mypy.
# Right in a notebook, not in a module:
# - await at the top level (F704);
# - a cell's last expression is its output (B018);
# - a line of markdown is longer than 100 characters (E501);
# - cells import as they go (E402).
# ruff: noqa: B018, E402, E501, F704

# %% [markdown]
# # fragola_nb quickstart
#
# Make an agent with a tool, watch a turn run in a live panel, approve a tool call by
# clicking, fork the conversation and browse the branches.
#
# It all runs **offline**: without `OPENAI_API_KEY`, fragola_nb answers with a small
# scripted model shipped in the package (it calls the tool whose name you use, and reports
# what the tool returned). With a key, the same cells talk to the real API.
#
# JupyterLab saves a notebook's outputs into its file as it runs. `bash scripts/guide.sh`
# opens copies of the guide's notebooks (in `build/guide/`, ignored by git), so the ones in
# `notebooks/` stay as the repository keeps them.

# %% [markdown]
# ## 1. Load the notebook layer
#
# `%load_ext fragola_nb` adds the `%%fragola` cell magic and the `%fragola_*` line magics.

# %%
# %load_ext fragola_nb

# %% [markdown]
# ## 2. Connect to a model
#
# `Fragola.from_env()` uses the real API when `OPENAI_API_KEY` is set, or a local server
# (Ollama, vLLM, llama.cpp) when `OPENAI_BASE_URL` is; `FRAGOLA_MODEL` names the model.
# Here there is neither, so it says (in red, on stderr) that it runs offline on the
# scripted demo model.

# %%
from fragola_nb import Fragola, tool

fragola = Fragola.from_env()
fragola


# %% [markdown]
# ## 3. A tool
#
# A tool is a Python function. `@tool` builds the JSON Schema the model sees from the
# signature (types, defaults) and the docstring (summary and `Args:`). The output below is
# exactly what is sent to the model.

# %%
@tool
def add(x: int, y: int) -> int:
    """Add two whole numbers.

    Args:
        x: the first number
        y: the second number
    """
    return x + y

add.definition

# %% [markdown]
# ## 4. An agent
#
# An agent is one conversation: instructions, tools, a message history and a status.

# %%
calculator = fragola.agent(
    name="calculator",
    instructions="You are a careful calculator. Use your tools.",
    tools=[add],
)
calculator

# %% [markdown]
# ## 5. A turn, with a live panel
#
# `%%fragola calculator` sends the text of the cell to the agent bound to `calculator` and
# shows a panel that follows the turn as it runs:
#
# - the header: name, id, model, the steps used out of the budget (`max_step`), and a
#   status badge: **generating** while it works, **idle** when done;
# - the status strip: what happens now (`calling scripted… 1 s`, `running add`) and what
#   needs you;
# - the messages, in a box that scrolls: your message, the model's call to `add` on one
#   line (✓, its arguments, its result; click it for the details), and the final reply
#   (it streams in as it is written);
# - Stop, Step, Reset and Fork, and a message box: type there and press Enter to talk to
#   the agent from the panel.
#
# The cell finishes when the turn does, so *Run All* goes top to bottom.

# %% active="ipynb"
# %%fragola calculator
# Please add 2 and 3

# %% [markdown]
# The panel is a view; the agent holds the facts. Its state says how the turn ended:

# %%
state = calculator.state
print("status:", state.status, "| outcome:", state.outcome, "| model calls:", state.step_count)
print("reply:", state.messages[-1]["content"])
assert state.status == "idle" and state.outcome == "finished"
call_id = state.messages[1]["tool_calls"][0]["id"]
assert state.messages[2] == {"role": "tool", "tool_call_id": call_id, "content": "5"}

# %% [markdown]
# ## 6. A tool that needs your approval
#
# Some tools should not run without a person saying yes. With `require_approval=True` the
# run **pauses** before the call: the agent's status becomes `waiting` and the call is
# listed in `agent.state.pending`.
#
# `transfer` only pretends to send money: it appends to the list `sent`.
# `context.update_tools` gives the agent its new tool list.

# %%
sent = []

@tool(require_approval=True)
def transfer(amount: int, to: str) -> str:
    """Send money to someone.

    Args:
        amount: how much to send
        to: who receives it
    """
    sent.append((to, amount))
    return f"sent {amount} to {to}"

calculator.context.update_tools([add, transfer])

# %% active="ipynb"
# %%fragola calculator
# Please transfer 5 to Alice

# %% [markdown]
# The cell ended with the agent **waiting**, and the panel shows a card for the pending
# call to `transfer`, with its arguments and the controls to decide it:
#
# - **Approve** runs it as the model asked;
# - **Reject** asks for a reason, then tells the model the call was refused;
# - **Edit arguments** opens the JSON: **Approve edited arguments** runs it with what you
#   typed (checked against the tool's schema; a mistake is shown and nothing happens);
# - **Answer by hand** answers the call with text you type, without running the tool.
#
# 👉 **Click Approve now.** The run resumes in the same panel: the tool runs, the model
# reports the result, and the badge goes back to *idle*. No new cell is needed.
#
# Under *Run All* the next cell waits for your click (at most 2 minutes; a line under it
# says so), then goes on. Where nobody can click (the notebook runs headless, as in the
# tests: nothing draws the panel) or nobody did, it approves in code and prints
# `approved in code: ...`; the card then says *approved in code*.

# %%
from fragola_nb.notebook import wait_for_decisions

if not await wait_for_decisions(calculator):  # nobody clicked Approve: decide in code
    for pending in calculator.state.pending:
        if pending.decision is None:
            print("approved in code:", pending.name, pending.arguments)
            calculator.approve(pending.id)
    await calculator.step()  # resume the run (the panel above follows it too)

print(calculator.state.messages[-1]["content"])
print("sent:", sent)
assert calculator.state.status == "idle"

# %% [markdown]
# ## 7. Fork: try another path
#
# `%%fragola calculator --fork what_if` copies the agent (its history, tools, stores and
# settings), binds the copy to `what_if`, and sends the message to the copy. The original
# `calculator` is untouched: forks are cheap, so use them to try things.

# %% active="ipynb"
# %%fragola calculator --fork what_if
# Now add 40 and 2

# %% active="py"
# What the %%fragola cell above binds, in Python (for ruff and mypy; never run).
what_if = calculator.fork("what_if")

# %%
print(f"calculator: {calculator.message_count} messages")
print(f"what_if:    {what_if.message_count} messages")
# Numbered as every view numbers them: it shares its parent's messages #0 to #fork_point-1.
print(f"what_if is a fork of {what_if.fork_of} at message #{what_if.fork_point}")
assert what_if.fork_of == calculator.id
assert what_if.state.messages[:what_if.fork_point] == calculator.state.messages

# %% [markdown]
# ## 8. Browse the tree
#
# `%fragola_tree calculator` draws the agent and all its forks, with each one's message
# count, status, and how many messages it added since it was forked. **Click a node** to
# show that branch's panel below the tree.

# %%
# %fragola_tree calculator

# %% [markdown]
# `%fragola_agents` lists the agents bound to variables in this notebook:

# %%
# %fragola_agents

# %% [markdown]
# ## Next
#
# - `tools_and_approvals.ipynb`: schemas, validation, dynamic tools, approvals in depth.
# - `forks_and_tree.ipynb`: what a fork copies and shares, exports, saving a session.
# - `json_and_streaming.ipynb`: structured output (on any server: `json_mode`), streaming,
#   `{var}` in cells.
# - `teaching_example.ipynb`: a lesson, step by step, with a trace of the events.
# - `experiments.ipynb`: prompt experiments: token usage and cost, compare, batch (here or on Ray), replay.
# - `system.ipynb`: MCP tools, guardrails, orchestration, OpenTelemetry traces.

# %% active="py"
# The source of ../tools_and_approvals.ipynb: ../build.py writes the notebook from it.
# A cell marked active="py", such as this one, is not in the notebook: it is for ruff and mypy.
# Right in a notebook, not in a module:
# - await at the top level (F704);
# - a cell's last expression is its output (B018);
# - cells import as they go (E402).
# ruff: noqa: B018, E402, F704

# %% [markdown]
# # Tools and approvals
#
# What a tool is made of (a name, a description, a JSON Schema for its arguments, a
# handler), the ways to write the schema, what happens when the model gets the
# arguments wrong, and every way a person can step in: approve, approve with edited
# arguments, reject with a reason, or answer a call by hand.
#
# Runs offline on the scripted demo model (no `OPENAI_API_KEY` needed). Where a lesson
# needs the model to say something exact (a mistake, several calls at once), the model's
# replies are scripted with `Fragola.scripted([...])`.

# %%
# %load_ext fragola_nb

# %%
from typing import Literal

from pydantic import BaseModel, Field

from fragola_nb import Fragola, InvalidArguments, InvalidToolDefinition, tool

fragola = Fragola.from_env()


# %% [markdown]
# ## 1. A schema from a pydantic model
#
# `tool(name=, description=, schema=, handler=)` is the long form, as in the Fragola docs.
# With a pydantic model as the schema, the model's arguments are **validated before the
# handler runs** and the handler receives a model instance, not a dict.

# %%
class WeatherQuery(BaseModel):
    city: str = Field(description="a city name, e.g. Paris")
    unit: Literal["celsius", "fahrenheit"] = "celsius"


def weather_report(params: WeatherQuery, context) -> str:
    degrees = 21 if params.unit == "celsius" else 70
    return f"Sunny, {degrees} degrees {params.unit} in {params.city}"


get_weather = tool(
    name="get_weather",
    description="The current weather in a city.",
    schema=WeatherQuery,
    handler=weather_report,
)
get_weather.parameters  # the JSON Schema the model sees

# %%
desk = fragola.agent(
    name="desk",
    instructions="You are an office assistant. Use your tools.",
    tools=[get_weather],
)

# %% active="ipynb"
# %%fragola desk
# What is the weather in Paris?

# %% [markdown]
# In the panel: the model called `get_weather` with `{"city": "Paris", "unit": "celsius"}`
# (click its line, *✓ get_weather*, to unfold the arguments), the handler's string came
# back as the tool's result, and the model answered from it.

# %%
tool_message = desk.state.messages[2]
print(tool_message)
assert tool_message["content"] == "Sunny, 21 degrees celsius in Paris"

# %% [markdown]
# ## 2. A schema from a function: `@tool`
#
# `@tool` reads the signature (types, defaults) and the docstring (the summary becomes the
# description, `Args:` the argument descriptions). The handler is called with keyword
# arguments. It may return anything: a string is sent as is, anything else as JSON.
# A handler that **raises** does not crash the run: the error becomes the tool's result,
# so the model can read it and react.

# %%
RATES = {"EUR": 1.0, "USD": 1.08, "JPY": 162.0}


@tool
def convert_currency(amount: float, to: str = "USD") -> dict:
    """Convert an amount of euros to another currency.

    Args:
        amount: how many euros
        to: the currency code to convert to, such as USD or JPY
    """
    if to not in RATES:
        raise ValueError(f"unknown currency {to!r}; known: {', '.join(RATES)}")
    return {"amount": round(amount * RATES[to], 2), "currency": to}


convert_currency.definition["function"]

# %%
desk.context.update_tools([get_weather, convert_currency])

state = await desk.user_message('Please convert 20 euros to "JPY" currency')
print("result:", state.messages[-2]["content"])
state = await desk.user_message('Please convert 5 euros to "XYZ" currency')
print("result:", state.messages[-2]["content"])
print("reply: ", state.messages[-1]["content"])
assert state.messages[-2]["content"].startswith("Error: the tool 'convert_currency' raised")

# %% [markdown]
# ## 3. A raw JSON Schema
#
# A JSON Schema (a dict or a JSON string) is checked when the tool is made: a broken one
# is an error right away, not when the model first calls the tool.

# %%
try:
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": "zero"}}}
    tool(name="broken", schema=schema, handler=print)
except InvalidToolDefinition as exc:
    print("InvalidToolDefinition:", exc)

# %% [markdown]
# As in the Fragola docs, the handler then receives the arguments as a plain dict, **not
# validated**, unless the tool is made with `validate=True`. Here is the same catalog
# lookup both ways; the model sends an ISBN that is too short.

# %%
ISBN = {
    "type": "object",
    "properties": {"isbn": {"type": "string", "pattern": "^[0-9]{13}$"}},
    "required": ["isbn"],
    "additionalProperties": False,
}
CATALOG = {"9780262510875": "Structure and Interpretation of Computer Programs"}


def find_book(params: dict, context) -> str:
    return CATALOG.get(params["isbn"], f"no book with ISBN {params['isbn']}")


about = "Find a book by its ISBN."
loose = tool(name="find_book", description=about, schema=ISBN, handler=find_book)
strict = tool(name="find_book", description=about, schema=ISBN, handler=find_book,
              validate=True)

librarian = fragola.agent(name="librarian", tools=[loose])
await librarian.user_message('Please find the book "978"')
print("not validated:", librarian.state.messages[2]["content"])

librarian.reset()
librarian.context.update_tools([strict])
await librarian.user_message('Please find the book "978"')
print("validated:    ", librarian.state.messages[2]["content"])

# %% [markdown]
# Two more forms, not shown: `schema=None` for a tool that takes no arguments, and a
# `pydantic.v1` model, which works like a v2 one.
#
# ## 4. Wrong arguments go back to the model
#
# With a validating schema, arguments that do not fit never reach the handler: the model
# gets a tool result that says what is wrong, and the run goes on so it can correct
# itself. To show that, the model's three replies are scripted: a call with a wrong
# argument name, the corrected call, and the answer.

# %%
from fragola_nb.testing import call, reply, tool_calls

rehearsal = Fragola.scripted([
    tool_calls(call("get_weather", {"town": "Paris"})),  # wrong: the field is "city"
    tool_calls(call("get_weather", {"city": "Paris"})),  # corrected after reading the error
    reply("It is sunny, 21 degrees, in Paris."),
])
forecaster = rehearsal.agent(name="forecaster", tools=[get_weather])

# %% active="ipynb"
# %%fragola forecaster
# Weather in Paris?

# %%
for message in forecaster.state.messages:
    if message["role"] == "tool":
        print(message["content"])
assert forecaster.state.messages[2]["content"].startswith("Error: invalid arguments")
assert forecaster.state.outcome == "finished"

# %% [markdown]
# ## 5. Approval: always, or when a rule says so
#
# `require_approval=True` pauses the run before **every** call of the tool.
# `require_approval=` a function `(params, context) -> bool` pauses only when it returns
# true: here, invoices over 100.
#
# A paused agent is `waiting`; its calls are in `agent.state.pending` (`id`, `name`,
# `params`, `arguments`, `reason`). Nothing runs until each one is decided.

# %%
emails, payments = [], []


@tool(require_approval=True)
def send_email(to: str, subject: str) -> str:
    """Send an email.

    Args:
        to: the address
        subject: the subject line
    """
    emails.append((to, subject))
    return f"email to {to} sent"


def over_100(params, context) -> bool:
    return params.amount > 100


@tool(require_approval=over_100)
def pay_invoice(amount: float, to: str) -> str:
    """Pay a supplier's invoice.

    Args:
        amount: how much to pay, in euros
        to: the supplier
    """
    payments.append((to, amount))
    return f"paid {amount} EUR to {to}"


desk.context.update_tools([get_weather, convert_currency, send_email, pay_invoice])

# %% active="ipynb"
# %%fragola desk
# Please send an email to "bob@example.com" with the subject "Lunch at noon"

# %% [markdown]
# The panel shows the pending `send_email` call and its controls. 👉 **Click Approve.**
# The run resumes in the panel and the badge returns to *idle*. The card stays, as decided:
# *approved by a click*.
#
# The cell after each paused turn waits for your click, under *Run All* too (at most 2
# minutes; a line under it says so), then goes on. Where nobody can click (the notebook
# runs headless, as in the tests: nothing draws the panel) or nobody did, it makes the
# decision the text asks you to click, in code, and the card says so: *approved in code*.

# %%
from fragola_nb.notebook import wait_for_decisions

if not await wait_for_decisions(desk):  # nobody clicked: the panel says "in code"
    for pending in desk.state.pending:
        if pending.decision is None:
            desk.approve(pending.id)
    await desk.step()

print("emails:", emails)
assert desk.state.status == "idle"

# %% [markdown]
# A small invoice runs at once: the rule said no approval needed.

# %% active="ipynb"
# %%fragola desk
# Pay invoice of 40 to "ACME"

# %%
assert desk.state.status == "idle" and payments[-1] == ("ACME", 40.0)

# %% [markdown]
# ## 6. Edit the arguments, then approve
#
# A bigger invoice pauses. Say you agreed on 200, not 250: click **Edit arguments**, edit
# the JSON, then **Approve edited arguments**. They are validated like the model's: try
# `"amount": "a lot"` first and the error appears on the card, with nothing changed.
#
# 👉 Change `250` to `200` and click **Approve edited arguments**. The card then reads
# *approved with edited arguments by a click* (if nobody clicks, the next cell edits and
# approves in code: *... in code*).

# %% active="ipynb"
# %%fragola desk
# Pay invoice of 250 to "ACME"

# %%
if not await wait_for_decisions(desk):  # nobody clicked: the same edit, in code
    for pending in desk.state.pending:
        if pending.decision is None:
            try:
                desk.approve(pending.id, params={"amount": "a lot", "to": "ACME"})
            except InvalidArguments as exc:
                print(exc, "\n(nothing changed: the call is still pending)\n")
            desk.approve(pending.id, params={"amount": 200, "to": "ACME"})
    await desk.step()

call_message, result = desk.state.messages[-3], desk.state.messages[-2]
print("the model asked for:", call_message["tool_calls"][0]["function"]["arguments"])
print("the tool ran with:  ", result["content"])
assert desk.state.status == "idle"

# %% [markdown]
# The history keeps what the model asked for; the handler received your edit.
#
# ## 7. Reject, with a reason
#
# A rejected call does not run; the model is told it was refused, and why.
#
# 👉 Type a reason (for example *Mallory is not one of our suppliers*) and click
# **Reject**. The card keeps the reason: *rejected by a click: ...* (if nobody clicks, the
# next cell rejects: *rejected in code: ...*).

# %% active="ipynb"
# %%fragola desk
# Pay invoice of 900 to "Mallory"

# %%
if not await wait_for_decisions(desk):  # nobody clicked: the panel says "in code"
    for pending in desk.state.pending:
        if pending.decision is None:
            desk.reject(pending.id, "Mallory is not one of our suppliers")
    await desk.step()

print("the model read:", desk.state.messages[-2]["content"])
assert desk.state.status == "idle"


# %% [markdown]
# ## 8. Dynamic tools: a person (or your code) supplies the result
#
# `handler="dynamic"` makes a tool with no handler at all: when the model calls it, the
# run pauses until someone answers with `agent.inject(call_id, result)`. Useful for a
# question only a person can answer, or a result that comes from outside.

# %%
class Question(BaseModel):
    question: str


ask_manager = tool(
    name="ask_manager",
    description="Ask the manager a question; a person answers.",
    schema=Question,
    handler="dynamic",
)
desk.context.update_tools([get_weather, convert_currency, send_email, pay_invoice, ask_manager])

# %% active="ipynb"
# %%fragola desk
# Please ask the manager "Can I take Friday off?"

# %% [markdown]
# A dynamic call has no Approve button (there is nothing to run): only **Answer by hand**
# and **Reject**. 👉 Click **Answer by hand**, type the manager's answer and click
# **Send result**. The card then says *answered by hand* (if nobody answers, the next cell
# does: *answered in code*).

# %%
if not await wait_for_decisions(desk):  # nobody answered: the panel says "in code"
    for pending in desk.state.pending:
        if pending.decision is None:
            print(pending.name, pending.reason, pending.params)
            desk.inject(pending.id, "Yes, enjoy your long weekend.")
    await desk.step()

print(desk.state.messages[-1]["content"])
assert desk.state.status == "idle"


# %% [markdown]
# Code can answer a dynamic tool too, without pausing: a `before_tool_call` listener that
# sets `event.config.inject_response` skips the handler (or the pause) and uses that as
# the result. `on_*` returns a subscription; call it to remove the listener.

# %%
def manager_on_holiday(event):
    if event.config.tool.name == "ask_manager":
        event.config.inject_response = "The manager is away until Monday."
    return event.config


unsubscribe = desk.on_before_tool_call(manager_on_holiday)
state = await desk.user_message('Please ask the manager "Can I buy a new chair?"')
unsubscribe()

print(state.outcome, "|", state.messages[-2]["content"])
assert state.outcome == "finished"

# %% [markdown]
# ## 9. Several calls in one reply, each decided on its own
#
# When one reply holds several calls, those that need no decision run at once, and each
# paused call gets its own controls. The run resumes when the **last** one is decided.
# Scripted again, for an exact reply with three calls:

# %%
week = Fragola.scripted([
    tool_calls(
        call("pay_invoice", {"amount": 30, "to": "ACME"}),
        call("pay_invoice", {"amount": 120, "to": "Globex"}),
        call("pay_invoice", {"amount": 5000, "to": "Mallory"}),
    ),
    reply("Paid ACME and Globex; the payment to Mallory was refused."),
])
clerk = week.agent(name="clerk", tools=[pay_invoice])

# %% active="ipynb"
# %%fragola clerk
# Pay this week's invoices.

# %% [markdown]
# ACME (30) was paid already. 👉 **Approve** Globex and **Reject** Mallory, in either
# order: after the first click nothing runs yet; after the second the run goes on. Both
# cards stay, each saying what was decided and by whom (if nobody decides them, the next
# cell decides both: *approved in code*, *rejected in code: not a supplier*).

# %%
print("pending:", [(pending.name, pending.arguments) for pending in clerk.state.pending])
if not await wait_for_decisions(clerk):  # a card nobody decided: decided in code
    for pending in clerk.state.pending:
        if pending.decision is None:
            if pending.arguments["to"] == "Mallory":
                clerk.reject(pending.id, "not a supplier")
            else:
                clerk.approve(pending.id)
    await clerk.step()

print("payments:", payments)
assert clerk.state.status == "idle" and ("ACME", 30.0) in payments

# %% [markdown]
# ## Recap
#
# - **a validated schema**: `schema=` a pydantic model, or `@tool` on a typed function;
# - **a raw JSON Schema**: `schema={...}`, plus `validate=True` to check the arguments;
# - **a person approves**: `require_approval=True`, or a rule `(params, context) -> bool`;
# - **a result from outside**: `handler="dynamic"`, answered with `agent.inject(id, result)`;
# - **decide in code**: `agent.approve(id, params=None)`, `agent.reject(id, reason)` or
#   `agent.inject(id, result)` for each pending call, then `await agent.step()`.

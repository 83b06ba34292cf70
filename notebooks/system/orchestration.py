"""Orchestration: this part's cells of ``notebooks/system.ipynb`` (see ``notebooks/build.py``)."""

from __future__ import annotations

from collections.abc import Callable

Cell = tuple[str, str]


def cells(md: Callable[[str], Cell], code: Callable[[str], Cell]) -> list[Cell]:
    return [
        md("""
        ## 3. Orchestration: agents that message each other

        `orchestrate(lead, participants, flow)` lets agents ask each other for help. Each
        agent that may send gets a `message_agent(id, message)` tool, limited to the agents
        the flow lets it reach, and the list of those agents (name, id, description, tools)
        is appended to its instructions. A message is a normal turn of the target
        (`target.user_message(message)`), and the target's answer is the tool's result.

        The flow is a list of edges: `{"from": a, "to": b}`, where an end is an agent (or
        its name), a list of agents, or `"*"` for every other participant;
        `"bidirectional": True` adds the way back.
        """),
        code('''
        from fragola_nb import Fragola, tool
        from fragola_nb.orchestration import Veto, orchestrate
        from fragola_nb.scripted import call, reply, tool_calls

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
        '''),
        md("""
        Offline, each agent gets its own scripted answers (`office.script(agent, [...])`):
        the lead asks the researcher, then the writer; the researcher uses its `search` tool.
        With a real model, the model chooses whom to message from the list in its
        instructions.
        """),
        code("""
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
        """),
        md("""
        Each agent's panel shows its own part. Open the researcher's and the writer's panels,
        then send the lead a message: the two panels above follow the turns the lead's
        messages start.
        """),
        code("""
        %fragola_panel researcher
        """),
        code("""
        %fragola_panel writer
        """),
        code("""
        %%fragola lead
        Write a note on the tides.
        """),
        md("""
        Who messaged whom: `team.graph()` counts the messages per route, `team.log` keeps
        each one (`source`, `target`, `message`, `status`, `result`, `depth`), and showing
        `team` prints both.
        """),
        code("""
        assert [(m.source.name, m.target.name, m.status) for m in team.log] == [
            ("lead", "researcher", "answered"), ("lead", "writer", "answered")]
        assert writer.state.messages[-1]["content"] == "The Moon tugs, the sea follows."
        team
        """),
        md("""
        An `on_message=` hook sees each message before it goes: it returns `None` to send it
        as is, a string to send instead, or `Veto(reason)` to refuse it (the sender is told
        why). Loops are refused too: an agent that waits for its own answer cannot be
        messaged back (`lead → researcher → lead`), and a chain deeper than `max_depth`
        (default 3) is not sent. The model reads each refusal as the tool's result, and the
        run goes on.

        `team.remove()` takes the tool and the added instructions away again.
        """),
        code("""
        team.remove()
        assert lead.instructions == "You lead a small team."
        assert lead.tool_named("message_agent") is None
        print(lead.instructions)
        """),
    ]

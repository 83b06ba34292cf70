"""MCP tools: this part's cells of ``notebooks/system.ipynb`` (see ``notebooks/build.py``)."""

from __future__ import annotations

from collections.abc import Callable

Cell = tuple[str, str]


def cells(md: Callable[[str], Cell], code: Callable[[str], Cell]) -> list[Cell]:
    return [
        md("""
        ## 1. MCP tools: the tools of an MCP server

        An MCP server offers tools to any agent that connects to it. `mcp_tools(server)`
        (from `fragola_nb.mcptools`, the `fragola_nb[mcp]` extra) connects with the official
        `mcp` SDK, lists the server's tools and gives them back as fragola_nb tools: the
        remote name, description and JSON Schema (the model's arguments are checked against
        it before the call is sent), and a handler that forwards the call.

        `server` is a command that starts the server (a list of strings: stdio), or the URL
        of a server already running (Streamable HTTP, with `headers=` such as an
        `Authorization`). Here we write a small notes server with the same `mcp` package
        and start it as a process.
        """),
        code('''
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
        '''),
        md("""
        Connect, and ask for a person's approval before `delete_note` runs
        (`require_approval=True` would ask for all of them). `filter=` (a function of the
        remote tool) and `prefix=` choose and rename the tools.
        """),
        code("""
        from fragola_nb.mcptools import mcp_tools

        notes_server = await mcp_tools([sys.executable, str(server_file)],
                                       require_approval=["delete_note"])
        for item in notes_server.tools:
            print(f"{item.name:12} {item.description:28} {item.parameters['properties']}")
        """),
        md("""
        The tools go to an agent like any others. Its model is scripted here, to show a
        fixed conversation: it keeps two notes, lists them, then asks to delete one.
        """),
        code("""
        from fragola_nb.scripted import call, reply, tool_calls

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
        """),
        code("""
        %%fragola notes
        Note: buy strawberries, and call Ada. Then drop the second one.
        """),
        md("""
        The panel shows each MCP call and its result as it runs, then stops on
        `delete_note`: it needs an approval. 👉 **Click Approve.** (Headless, or with
        *Run All*, the next cell approves in code if nobody clicked.)
        """),
        code("""
        for pending in notes.state.pending:
            if pending.decision is None:  # nobody clicked
                notes.approve(pending.id)
        if notes.state.status == "waiting":
            await notes.step()

        for message in notes.state.messages:
            if message["role"] == "tool":
                print(message["content"])
        assert notes.state.status == "idle"
        """),
        md("""
        A tool that fails on the server (an `isError` result), a server that dies during a
        call, or a call that takes longer than `timeout=` (60 s by default): the model reads
        what happened as the tool's result, and the run goes on.
        """),
        code("""
        %%fragola notes
        Delete note 9.
        """),
        md("""
        `delete_note` waits for an approval again; approve it (here in code) to see what
        the server answers.
        """),
        code("""
        for pending in notes.state.pending:
            if pending.decision is None:
                notes.approve(pending.id)
        if notes.state.status == "waiting":
            await notes.step()

        failed = notes.state.messages[-2]["content"]
        print(failed)
        assert "there is no note 9" in failed
        """),
        md("""
        `remove_from(agent)` takes exactly these tools out of the agent (its other tools
        stay), and `close()` (or `await aclose()`, or `async with`) ends the connection and
        the server's process. A call after the close gets an error the model reads.
        """),
        code("""
        notes_server.remove_from(notes)
        await notes_server.aclose()
        print(notes_server)
        print([t.name for t in notes.options.tools])
        """),
    ]

"""Traces: this part's cells of ``notebooks/system.ipynb`` (see ``notebooks/build.py``)."""

from __future__ import annotations

from collections.abc import Callable

Cell = tuple[str, str]


def cells(md: Callable[[str], Cell], code: Callable[[str], Cell]) -> list[Cell]:
    return [
        md("""
        ## 4. Traces: OpenTelemetry spans of every turn

        `instrument()` (from `fragola_nb.tracing`) turns tracing on for every agent, with
        one call; `uninstrument()` turns it off. Each turn (`user_message`, `step`, `json`)
        is a span `invoke_agent NAME`; inside it, each model call is a span `chat MODEL`
        and each tool that runs is a span `execute_tool NAME`. Their attributes follow the
        OpenTelemetry GenAI semantic conventions: `gen_ai.operation.name`,
        `gen_ai.request.model`, `gen_ai.response.model`, `gen_ai.usage.input_tokens` and
        `output_tokens`, `gen_ai.tool.name`, `gen_ai.tool.call.id`, `gen_ai.agent.name`...
        Message contents are recorded only with `capture_content=True`.

        Here the spans go to the OpenTelemetry SDK's in-memory exporter, so we can print
        them; the README shows how to send them to Jaeger, Phoenix, Langfuse or Logfire
        (any OTLP backend).
        """),
        code('''
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        from fragola_nb import Fragola, tool
        from fragola_nb.scripted import call, reply, tool_calls
        from fragola_nb.tracing import instrument, uninstrument

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
        '''),
        md("""
        The turn made four spans. Drawn as a tree (a child under its parent), with a few of
        their attributes:
        """),
        code('''
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
        '''),
        md("""
        A tool that raises is an `execute_tool` span with status ERROR and `error.type` (the
        run goes on: the model reads the error as the tool's result); a model call that
        fails ends its `chat` span and the turn's span the same way. A paused turn
        (a tool waiting for approval) ends its span with `fragola.outcome` "paused": the
        `step()` that resumes it is a new span.

        With `capture_content=True`, the chat spans also carry the messages sent and the
        reply (`gen_ai.input.messages`, `gen_ai.output.messages`, as JSON), and the tool
        spans the arguments and the result. Calling `instrument()` again replaces the
        settings.
        """),
        code('''
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
        '''),
        md("""
        `uninstrument()` turns tracing off; turns made after it make no spans.
        """),
        code('''
        uninstrument()
        exporter.clear()
        lab.script(calc, [reply("Untraced.")])
        await calc.user_message("Anything")
        len(exporter.get_finished_spans())
        '''),
    ]

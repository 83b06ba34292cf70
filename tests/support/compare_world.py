"""The model and tool the compare tests share: ``by_instructions``, a scripted model's brain
that answers from each variant's instructions (HANG hangs, FAIL fails, TOOL calls ``add``), and
``add``, a tool that asks for approval. Shared by tests/experiments/compare/test_compare.py and
tests/notebook/compare/test_compare_view.py.

    model.brain = by_instructions
    agent = make_agent(model, add, instructions="TOOL")
"""

from __future__ import annotations

from typing import Any

from fragola_nb import tool
from fragola_nb.models.scripted import Item, call, fail, hang, reply, tool_calls


def system_text(request: dict[str, Any]) -> str:
    first = request["messages"][0]
    return str(first["content"]) if first["role"] == "system" else "no instructions"


def by_instructions(request: dict[str, Any]) -> Item:
    """The model answers from what it was told; instructions with HANG or FAIL hang or fail,
    and with TOOL it calls the approval tool ``add`` (then answers)."""
    text = system_text(request)
    if "FAIL" in text:
        return fail(500, "the server broke")
    if "HANG" in text:
        return hang(then=reply(f"late: {text}"))
    if "TOOL" in text and request["messages"][-1]["role"] == "user":
        return tool_calls(call("add", {"a": 2, "b": 3}))
    return reply(f"[{request['model']}] following: {text}")


@tool(require_approval=True)
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b

"""A scripted model that refuses what some servers refuse, to show and test ``json_mode``.

``ScriptedModel(refuse={"json_schema"})`` answers a request asking for structured outputs as
llama-cpp-python's server does: HTTP 500 with its request validation error, which names
``response_format`` and the refused ``json_schema``. ``"json_object"`` is
refused as LM Studio does (HTTP 400), and ``"tool_choice"`` (a forced tool) with HTTP 400. A
refused request is recorded, and takes nothing from the script.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fragola_nb.models.scripted.items import Fail, fail

__all__ = ["REFUSABLE", "check_refuse", "refusal"]

REFUSABLE = ("json_schema", "json_object", "tool_choice")


def check_refuse(refuse: Iterable[str]) -> frozenset[str]:
    if isinstance(refuse, str):
        refuse = (refuse,)
    chosen = frozenset(refuse)
    unknown = chosen - set(REFUSABLE)
    if unknown:
        raise ValueError(f"refuse takes {', '.join(REFUSABLE)}; not {', '.join(sorted(unknown))}")
    return chosen


def refusal(request: dict[str, Any], refuse: frozenset[str]) -> Fail | None:
    """The error a server that refuses ``refuse`` answers ``request`` with, if any."""
    response_format = request.get("response_format")
    kind = response_format.get("type") if isinstance(response_format, dict) else None
    if kind == "json_schema" and kind in refuse:
        allowed = "'text' or 'json_object'" if "json_object" not in refuse else "'text'"
        return fail(500, "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', "
                         f"'response_format', 'type'), 'msg': \"Input should be {allowed}\", "
                         f"'input': '{kind}'}}", type="internal_server_error")
    if kind == "json_object" and kind in refuse:
        allowed = "'json_schema' or 'text'" if "json_schema" not in refuse else "'text'"
        return fail(400, f"'response_format.type' must be {allowed}")
    if "tool_choice" in refuse and isinstance(request.get("tool_choice"), dict):
        return fail(400, "tool_choice: forcing a named tool is not supported by this server")
    return None

"""Session files that are corrupted, truncated or hostile: a clear ``SessionError``, always.

Agents 0-3 of the valid file are ``teacher`` (idle), ``waiting`` (two calls pending: ``t1``
needs approval, ``d1`` is dynamic) and its forks ``decided`` and ``rejected``; histories 0-3
are theirs, 1 based on 0 (4 messages), 2 and 3 on 1 (6 messages).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.session_world import Bank, Log, snapshot, valid_session_text

from fragola_nb import Fragola, Session, SessionError
from fragola_nb.sessions import session_from_json, session_to_json

Doc = dict[str, Any]


def load(data: bytes | str) -> Session:
    fragola = Fragola(api_key="k", base_url="http://127.0.0.1:9")
    return session_from_json(data, fragola, tools=Bank().tools(), listeners=Log().listeners())


def edited(change: Callable[[Doc], Any]) -> str:
    document = json.loads(valid_session_text())
    change(document)
    return json.dumps(document)


def agent(index: int) -> Callable[[Doc], Doc]:
    return lambda document: document["agents"][index]


def setter(get: Callable[[Doc], Any], key: str, value: Any) -> Callable[[Doc], None]:
    return lambda document: get(document).__setitem__(key, value)


def both_arguments(document: Doc) -> None:
    """Arguments that no longer fit the tool's schema, in the call and in the pending entry."""
    document["histories"][1]["messages"][1]["tool_calls"][0]["function"]["arguments"] = (
        '{"to": "bob", "amount": "lots"}')
    for record in document["agents"][1:]:
        record["pending"][0]["arguments"]["amount"] = "lots"


def valid_text() -> str:
    return valid_session_text()


TEXT_CASES: list[tuple[str, Callable[[], str | bytes], str]] = [
    ("empty", lambda: "", "invalid or truncated JSON"),
    ("truncated", lambda: valid_text()[: len(valid_text()) // 2], "invalid or truncated JSON"),
    ("not utf-8", lambda: b"\xff\xfe" + valid_text().encode(), "not UTF-8"),
    ("a list", lambda: "[]", "not a session file"),
    ("NaN", lambda: valid_text().replace("0.2", "NaN"), "NaN is not a JSON number"),
    ("infinite", lambda: valid_text().replace("0.2", "1e999"), "too large"),
    ("huge integer", lambda: valid_text().replace("0.2", "9" * 5000), "invalid or truncated"),
    ("deep nesting", lambda: valid_text().replace('"visits": 1',
                                                   '"visits": ' + "[" * 50000 + "]" * 50000),
     "nested too deeply"),
]

DOC_CASES: list[tuple[str, Callable[[Doc], Any], str]] = [
    ("wrong format", setter(lambda d: d, "format", "pickle"), "not a session file"),
    ("future version", setter(lambda d: d, "version", 2), "version 2 is not supported"),
    ("version as text", setter(lambda d: d, "version", "1"), "version '1' is not supported"),
    ("unknown top key", setter(lambda d: d, "extra", 1), "at (top): Additional properties"),
    ("__class__ in an agent", setter(agent(0), "__class__", "os.system"), "at agents/0"),
    ("__reduce__ in options", setter(lambda d: d["agents"][0]["options"], "__reduce__", []),
     "at agents/0/options"),
    ("__class__ in a decision",
     setter(lambda d: d["agents"][2]["pending"][0]["decision"], "__class__", "x"),
     "at agents/2/pending/0/decision"),
    ("__class__ in a message",
     setter(lambda d: d["histories"][0]["messages"][0], "__class__", "x"),
     "at histories/0/messages/0: '__class__' does not match"),
    ("__init__ in model settings",
     setter(lambda d: d["agents"][0]["options"]["model_settings"], "__init__", 1),
     "at agents/0/options/model_settings: '__init__' does not match"),
    ("negative count", setter(agent(0), "step_count", -1), "agents/0/step_count"),
    ("fractional count", setter(agent(0), "step_count", 1.5), "agents/0/step_count"),
    ("count as float", setter(agent(0), "step_count", 3.0), "agents/0/step_count"),
    ("huge count", setter(agent(0), "step_count", 2**60), "agents/0/step_count"),
    ("count as bool", setter(agent(0), "max_step", True), "agents/0"),
    ("generating", setter(agent(0), "status", "generating"), "agents/0/status"),
    ("bad role", setter(lambda d: d["histories"][0]["messages"][0], "role", "hacker"),
     "histories/0/messages/0/role"),
    ("content a number", setter(lambda d: d["histories"][0]["messages"][0], "content", 7),
     "histories/0/messages/0/content"),
    ("tool call without id",
     lambda d: d["histories"][0]["messages"][1]["tool_calls"][0].pop("id"),
     "histories/0/messages/1/tool_calls/0"),
    ("unknown decision", setter(lambda d: d["agents"][2]["pending"][0], "decision",
                                {"kind": "run", "code": "rm -rf"}), "agents/2/pending/0/decision"),
    ("bad tool name", setter(lambda d: d["agents"][0]["options"], "tools", ["no spaces"]),
     "agents/0/options/tools/0"),
    ("unknown event", setter(agent(0), "listeners", {"boom": ["Log.status"]}), "agents/0"),
    ("fork_of cycle", setter(agent(0), "fork_of", "ID1"), "fork_of makes a cycle"),
    ("fork_of itself", setter(agent(1), "fork_of", "ID1"), "fork_of makes a cycle"),
    ("fork_of nobody", setter(agent(1), "fork_of", "nobody"), "is a fork of 'nobody', which"),
    ("fork_point off", setter(agent(1), "fork_point", 99), "fork_point 99 but shares 4"),
    ("root with a fork_point", setter(agent(0), "fork_point", 1), "no fork but has a fork_point"),
    ("base_length past the base", setter(lambda d: d["histories"][1], "base_length", 500),
     "starts after message 500 of histories[0], which holds only 6"),
    ("base after itself", setter(lambda d: d["histories"][1], "base", 3), "an earlier history"),
    ("base_length without base", setter(lambda d: d["histories"][0], "base_length", 1),
     "has a base_length but no base"),
    ("two agents on one history", setter(agent(2), "history", 1), "shares histories[1]"),
    ("history that is not there", setter(agent(2), "history", 99), "histories[99], which"),
    ("history of nobody", lambda d: d["histories"].append(
        {"base": None, "base_length": 0, "messages": []}), "histories [4] belong to no agent"),
    ("two agents, one id", setter(agent(3), "id", "ID2"), "two agents have the id"),
    ("tool message for no call",
     setter(lambda d: d["histories"][0]["messages"][2], "tool_call_id", "zzz"),
     "message 2 answers tool call 'zzz'"),
    ("a call never answered", lambda d: d["histories"][0]["messages"].pop(2),
     "tool call(s) 'a1' of message 1 are never answered"),
    ("pending arguments changed",
     lambda d: d["agents"][1]["pending"][0]["arguments"].__setitem__("amount", 500),
     "pending call 't1' differs from the call the model made"),
    ("pending name changed", setter(lambda d: d["agents"][1]["pending"][0], "name", "add"),
     "differs from the call"),
    ("idle with pending", lambda d: d["agents"][1].update(status="idle", outcome="finished"),
     "is idle but has pending calls"),
    ("waiting on nothing", setter(agent(1), "pending", []), "are not the open tool calls"),
    ("status and outcome disagree", setter(agent(1), "outcome", "finished"),
     "status 'waiting' does not go with outcome 'finished'"),
    ("settings holding messages",
     setter(lambda d: d["agents"][0]["options"], "model_settings", {"messages": []}),
     "model_settings cannot hold messages"),
    ("one namespace twice", lambda d: d["agents"][0]["stores"].append(d["agents"][0]["stores"][0]),
     "use one namespace twice"),
    ("approving a dynamic call", setter(lambda d: d["agents"][1]["pending"][1], "decision",
                                        {"kind": "approve", "params": None}), "cannot be approved"),
    ("arguments that no longer fit", both_arguments, "no longer fit the tool 'transfer'"),
    ("credentials_not_saved not a list of paths",
     setter(agent(0), "credentials_not_saved", {"extra_headers": "Bearer x"}),
     "at agents/0/credentials_not_saved"),
    ("credentials_not_saved holding a number",
     setter(agent(0), "credentials_not_saved", [7]), "at agents/0/credentials_not_saved/0"),
    ("a listener named like code",
     lambda d: d["agents"][0]["listeners"].__setitem__("tool_call", ["os.system"]),
     "listener 'os.system' (on_tool_call of 'teacher')"),
]


def with_ids(change: Callable[[Doc], Any]) -> Callable[[Doc], Any]:
    """``ID1`` etc. in a case stand for the real (random) id of agent 1."""
    def apply(document: Doc) -> Any:
        ids = {f"ID{i}": record["id"] for i, record in enumerate(document["agents"])}
        change(document)
        for record in document["agents"]:
            for key in ("id", "fork_of"):
                record[key] = ids.get(record[key], record[key])
    return apply


@pytest.mark.parametrize(("make", "message"), [case[1:] for case in TEXT_CASES],
                         ids=[case[0] for case in TEXT_CASES])
def test_a_broken_file_is_a_clear_session_error(make: Callable[[], Any], message: str) -> None:
    with pytest.raises(SessionError, match=re.escape(message)):
        load(make())


@pytest.mark.parametrize(("change", "message"), [case[1:] for case in DOC_CASES],
                         ids=[case[0] for case in DOC_CASES])
def test_a_hostile_document_is_a_clear_session_error(change: Callable[[Doc], Any],
                                                     message: str) -> None:
    with pytest.raises(SessionError, match=re.escape(message)):
        load(edited(with_ids(change)))


def test_the_valid_file_loads() -> None:
    assert [a.name for a in load(valid_session_text())] == [
        "teacher", "waiting", "decided", "rejected"]


# -- random mutations -------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 10**6) | st.text(max_size=6)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                               max_size=3),
    max_leaves=6,
)


def all_paths(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path]
    if isinstance(node, dict):
        for key, value in node.items():
            out += all_paths(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            out += all_paths(value, (*path, index))
    return out


def at(document: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        document = document[part]
    return document


@st.composite
def mutated_documents(draw: st.DrawFn) -> str:
    document = json.loads(valid_session_text())
    for _ in range(draw(st.integers(1, 3))):
        paths = all_paths(document)
        # Below the top keys: "format" and "version" have cases of their own above.
        path = draw(st.sampled_from([p for p in paths if len(p) > 1] or paths[1:]))
        parent, key = at(document, path[:-1]), path[-1]
        operation = draw(st.sampled_from(["replace", "copy", "delete", "insert"]))
        if operation == "replace":
            parent[key] = draw(json_values)
        elif operation == "copy":  # a value from elsewhere in the file: plausible, often wrong
            parent[key] = copy.deepcopy(at(document, draw(st.sampled_from(paths))))
        elif operation == "delete":
            del parent[key]
        elif isinstance(parent, list):
            parent.insert(key, draw(json_values))
        else:
            parent[draw(st.text(max_size=8))] = draw(json_values)
    return json.dumps(document)


def assert_valid(session: Session) -> None:
    """A state a live agent could be in, that saves and loads back to itself."""
    for loaded in session:
        state = loaded.state
        assert state.status in ("idle", "waiting")
        assert (state.status == "waiting") == bool(state.pending)
        open_calls: set[str] = set()
        for message in state.messages:
            if message["role"] == "tool":
                open_calls.remove(message["tool_call_id"])  # answers an open call, once
            else:
                assert not open_calls
                open_calls = {c["id"] for c in message.get("tool_calls") or ()}
        if state.status == "waiting":
            assert open_calls == {p.id for p in state.pending}
        assert loaded.parent is None or loaded in loaded.parent.forks
    again = load(session_to_json(session))
    assert [snapshot(a) for a in again] == [snapshot(a) for a in session]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_documents())
def test_a_mutated_file_loads_valid_or_raises_session_error(text: str) -> None:
    try:
        session = load(text)
    except SessionError:
        return
    assert_valid(session)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_random_byte_edits_load_valid_or_raise_session_error(data: st.DataObject) -> None:
    raw = bytearray(valid_session_text().encode())
    for _ in range(data.draw(st.integers(1, 4))):
        start = data.draw(st.integers(0, len(raw)))
        end = data.draw(st.integers(start, min(len(raw), start + 8)))
        raw[start:end] = data.draw(st.binary(max_size=4))
    try:
        session = load(bytes(raw))
    except SessionError:
        return
    assert_valid(session)

"""Sessions keep what ``fork(at=...)`` and ``edit()`` made: each agent's history exactly as
the agent reads it (edits included, the parent's untouched), each fork's ``fork_at``, the
tree's sharing; and exports of a loaded session show the edited history as the live one does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.helpers import answered, asked, assert_valid_history, make_agent, make_fragola, user
from support.html_checks import data_of

from fragola_nb import (
    Agent,
    SessionError,
    export_html,
    export_tree_markdown,
    load_session,
    save_session,
    tool,
)
from fragola_nb.base.checks import FACTS
from fragola_nb.models.scripted import ScriptedModel, reply
from fragola_nb.sessions import session_from_json, session_to_json


def _lookup(q: str) -> str:
    """Look ``q`` up."""
    return f"{q} found"


lookup = tool(_lookup, name="lookup")
HOSTILE = 'not found </script><img src=x onerror=alert(1)> "\u202egnp.exe'


def history(turns: int = 1) -> list[dict[str, Any]]:
    """0 user, 1 calls c1+c2, 2-3 their answers, 4 answer; then ``turns - 1`` more user and
    assistant pairs (so 5 + 2 * (turns - 1) messages)."""
    out = [
        user("Find x and y."),
        asked(("c1", "lookup", {"q": "x"}), ("c2", "lookup", {"q": "y"})),
        answered("c1", "x found"),
        answered("c2", "y found"),
        {"role": "assistant", "content": "Both found."},
    ]
    for n in range(1, turns):
        out += [user(f"Question {n}?"), {"role": "assistant", "content": f"Answer {n}."}]
    return out


def reload(model: ScriptedModel, tmp_path: Path, agent: Agent) -> dict[str, Agent]:
    """Save ``agent``'s tree, load it into a new Fragola: the agents by name."""
    save_session(tmp_path / "s.json", agent)
    session = load_session(tmp_path / "s.json", make_fragola(model), tools=[lookup])
    return {loaded.name: loaded for loaded in session}


async def test_an_edited_tool_result_of_a_fork_survives_save_and_load(
    model: ScriptedModel, tmp_path: Path,
) -> None:
    root = make_agent(model, lookup, name="root", messages=history())
    original = root.state.messages
    fork = root.fork("what-if", at=4)
    fork.edit(3, result={"y": HOSTILE})
    model.push(reply("y is missing."))
    await fork.step()
    live = fork.state.messages

    loaded = reload(model, tmp_path, root)

    assert loaded["what-if"].state.messages == live
    edited = json.dumps({"y": HOSTILE}, ensure_ascii=False)
    assert live[3] == {"role": "tool", "tool_call_id": "c2", "content": edited,
                       FACTS: {"edited": True}}
    assert loaded["root"].state.messages == original == history()
    assert (loaded["what-if"].fork_at, loaded["what-if"].fork_point) == (4, 4)
    assert loaded["what-if"].parent is loaded["root"]
    # Still shared, not copied: the fork reads its parent's dicts but for the edited one.
    mine, theirs = loaded["what-if"].state.messages, loaded["root"].state.messages
    assert [a is b for a, b in zip(mine[:4], theirs, strict=False)] == [True, True, True, False]
    # The file holds the conversation once, and the edit once.
    text = (tmp_path / "s.json").read_text(encoding="utf-8")
    assert text.count("Find x and y.") == 1 and text.count("\\u202egnp.exe") == 1

    # The loaded fork runs on from the edited result: the model is shown it.
    model.push(reply("Still missing."))
    await loaded["what-if"].user_message("And now?")
    assert model.requests[-1]["messages"][3] == {
        "role": "tool", "tool_call_id": "c2", "content": edited}
    assert_valid_history(loaded["what-if"].state.messages)
    assert loaded["root"].state.messages == original


async def test_a_branch_forked_at_7_round_trips(model: ScriptedModel, tmp_path: Path) -> None:
    root = make_agent(model, lookup, name="root", messages=history(turns=4))  # 11 messages
    branch = root.fork("branch", at=7)
    model.push(reply("Another answer."))
    await branch.user_message("A different question?")
    end = root.fork("end")

    loaded = reload(model, tmp_path, root)

    for name, live in (("root", root), ("branch", branch), ("end", end)):
        assert loaded[name].state.messages == live.state.messages, name
    assert (loaded["branch"].fork_at, loaded["branch"].fork_point) == (7, 7)
    assert (loaded["end"].fork_at, loaded["end"].fork_point) == (None, 11)
    assert loaded["root"].forks == (loaded["branch"], loaded["end"])
    assert len(loaded["branch"].state.messages) == 9 and len(loaded["root"].state.messages) == 11


async def test_edits_on_both_sides_of_a_fork_and_twice_round_trip(
    model: ScriptedModel, tmp_path: Path,
) -> None:
    root = make_agent(model, lookup, name="root", messages=history(turns=2))
    fork = root.fork("fork")
    root.edit(5, content="Question one, reworded?")  # after the fork: the fork keeps the old
    fork.edit(2, result="x moved")
    fork.edit(2, result="x moved again")  # the nearest edit wins
    fork.edit(-1, content="Answer, edited.")
    grandchild = fork.fork("grandchild", at=5)

    loaded = reload(model, tmp_path, root)

    for name, live in (("root", root), ("fork", fork), ("grandchild", grandchild)):
        assert loaded[name].state.messages == live.state.messages, name
    assert loaded["fork"].state.messages[5] == user("Question 1?")
    assert loaded["grandchild"].state.messages[2]["content"].endswith("x moved again")
    assert loaded["grandchild"].fork_at == 5
    # Saved again, it is the same file: nothing is lost or added on the way round.
    assert session_to_json(loaded["root"]) == session_to_json(root)


OLD_FILE = {  # as fragola_nb wrote sessions before edits and fork_at were saved
    "format": "fragola_nb.session", "version": 1, "stores": [],
    "histories": [
        {"base": None, "base_length": 0, "messages": [user("hi"), {"role": "assistant",
                                                                   "content": "hello"}]},
        {"base": 0, "base_length": 2, "messages": [user("more")]},
    ],
    "agents": [
        {"id": "root1", "fork_of": None, "fork_point": 0, "history": 0, "step_count": 1,
         "status": "idle", "outcome": "finished", "options": {
             "name": "root", "description": "", "instructions": None,
             "use_developer_role": False, "model_settings": {}, "max_step": 5,
             "reset_step_count_after_user_message": True, "tools": []},
         "stores": [], "pending": [], "listeners": {}},
        {"id": "fork1", "fork_of": "root1", "fork_point": 2, "history": 1, "step_count": 1,
         "status": "idle", "outcome": "finished", "options": {
             "name": "fork", "description": "", "instructions": None,
             "use_developer_role": False, "model_settings": {}, "max_step": 5,
             "reset_step_count_after_user_message": True, "tools": []},
         "stores": [], "pending": [], "listeners": {}},
    ],
}


def test_a_file_from_before_edits_and_fork_at_loads(model: ScriptedModel) -> None:
    session = session_from_json(json.dumps(OLD_FILE), make_fragola(model))

    assert [(a.name, a.fork_at, a.fork_point) for a in session] == [
        ("root", None, 0), ("fork", None, 2)]
    assert session["fork"].state.messages == [
        user("hi"), {"role": "assistant", "content": "hello"}, user("more")]


def _edited_file(change: str) -> str:
    document: dict[str, Any] = json.loads(json.dumps(OLD_FILE))
    edit = {"index": 0, "message": user("hi, edited")}
    if change == "edit past the base":
        document["histories"][1]["edits"] = [{**edit, "index": 2}]
    elif change == "edit twice":
        document["histories"][1]["edits"] = [edit, edit]
    elif change == "edit without a base":
        document["histories"][0]["edits"] = [edit]
    elif change == "edit that leaves a call unanswered":
        document["histories"][1]["edits"] = [{"index": 1, "message": asked(
            ("c9", "lookup", {"q": "z"}))}]
    elif change == "fork_at off its fork_point":
        document["agents"][1]["fork_at"] = 1
    elif change == "fork_at on a root":
        document["agents"][0]["fork_at"] = 0
    return json.dumps(document)


@pytest.mark.parametrize(("change", "message"), [
    ("edit past the base", "edits message 2, which is not one of the 2 it reads"),
    ("edit twice", "edits message 0 twice"),
    ("edit without a base", "edits message 0, which is not one of the 0 it reads"),
    ("edit that leaves a call unanswered", "'c9' of message 1 are never answered"),
    ("fork_at off its fork_point", "has fork_at 1 but holds 2 of its parent's messages"),
    ("fork_at on a root", "has fork_at 0 but is no fork"),
])
def test_edits_and_fork_at_a_live_agent_could_not_have_are_refused(
    model: ScriptedModel, change: str, message: str,
) -> None:
    with pytest.raises(SessionError, match=message):
        session_from_json(_edited_file(change), make_fragola(model), tools=[lookup])


@pytest.mark.parametrize("export", [export_tree_markdown, export_html])
async def test_a_loaded_session_exports_the_edited_history(
    model: ScriptedModel, tmp_path: Path, export: Any,
) -> None:
    root = make_agent(model, lookup, name="root", messages=history())
    fork = root.fork("what-if", at=4)
    fork.edit(3, result="y moved to z")

    loaded = reload(model, tmp_path, root)
    text = export(loaded["root"])

    assert text == export(root)
    # The parent's section has the result the tool gave, the fork's section the edited one.
    assert text.count("y found") == 1 and text.count("y moved to z") == 1
    assert text.index("y found") < text.index("y moved to z")
    # Marked "edited by hand": the fork's result, not the parent's.
    if export is export_html:
        marked = [m for node in data_of(text)["nodes"] for m in node["messages"] if m.get("ed")]
        assert [m["t"] for m in marked] == ["y moved to z"]
    else:
        assert text.count("edited by hand") == 1
        assert "### #3 · Result of lookup · *edited by hand*" in text

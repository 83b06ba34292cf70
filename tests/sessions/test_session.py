"""Sessions: save a tree of agents to one JSON file, load it back, and carry on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from support.session_world import SECRET, Bank, Log, add, grow_tree, snapshot, walk

from fragola_nb import (
    Agent,
    BadUsage,
    Fragola,
    Session,
    SessionError,
    create_store,
    load_session,
    save_session,
    tool,
)
from fragola_nb.models.scripted import ScriptedModel, call, reply, tool_calls


def fresh(model: ScriptedModel, **options: Any) -> Fragola:
    return Fragola(api_key="other-key", base_url=model.base_url, max_retries=0, **options)


async def saved_tree(model: ScriptedModel, tmp_path: Path) -> tuple[Agent, Path]:
    """The ``session_world`` tree, grown on ``model`` and saved to ``tmp_path / "s.json"``."""
    _, root = await grow_tree(model, Bank(), Log())
    path = tmp_path / "s.json"
    save_session(path, root)
    return root, path


async def saved_and_loaded(model: ScriptedModel, tmp_path: Path) -> tuple[Agent, Session, Bank,
                                                                          Log, Fragola]:
    root, path = await saved_tree(model, tmp_path)
    bank, log = Bank(), Log()
    fragola = fresh(model)
    session = load_session(path, fragola, tools=bank.tools(), listeners=log.listeners())
    return root, session, bank, log, fragola


# -- round trips ------------------------------------------------------------------------------


async def test_a_loaded_session_equals_the_saved_one_agent_by_agent(
    model: ScriptedModel, tmp_path: Path,
) -> None:
    root, session, _, _, fragola = await saved_and_loaded(model, tmp_path)

    assert [snapshot(a) for a in session.agents] == [snapshot(a) for a in walk(root)]
    assert [a.name for a in session.roots] == ["teacher"]
    assert [a.name for a in session] == ["teacher", "waiting", "decided", "rejected"]
    shared = fragola.get_store("shared")
    assert shared is not None and shared.get() == {"visits": 1}


async def test_the_tree_shape_and_statuses_survive(model: ScriptedModel, tmp_path: Path) -> None:
    _, session, _, _, _ = await saved_and_loaded(model, tmp_path)
    teacher, waiting = session["teacher"], session["waiting"]

    assert session["decided"].parent is waiting and waiting.parent is teacher
    assert teacher.forks == (waiting,)
    assert waiting.forks == (session["decided"], session["rejected"])
    assert (teacher.status, waiting.status) == ("idle", "waiting")
    assert waiting.fork_point == 4 and session["decided"].fork_point == 6
    assert [p.reason for p in waiting.state.pending] == ["approval", "dynamic"]


async def test_forks_share_their_parents_messages_after_loading(
    model: ScriptedModel, tmp_path: Path,
) -> None:
    _, session, _, _, _ = await saved_and_loaded(model, tmp_path)
    teacher, waiting = session["teacher"], session["waiting"]

    assert waiting.conversation.history._base is teacher.conversation.history
    for mine, theirs in zip(waiting.state.messages[:4], teacher.state.messages, strict=False):
        assert mine is theirs


async def test_a_tree_of_forks_does_not_multiply_the_file(
    model: ScriptedModel, tmp_path: Path,
) -> None:
    fragola = fresh(model)
    root = fragola.agent("long", messages=[{"role": "user", "content": f"line {i} " * 20}
                                          for i in range(200)])
    save_session(tmp_path / "one.json", root)
    for index in range(30):
        root.fork(f"f{index}")

    save_session(tmp_path / "many.json", root)

    one, many = (os.path.getsize(tmp_path / name) for name in ("one.json", "many.json"))
    assert many - one < 30 * 1_000  # a fork costs its own record, not another 200 messages


async def test_a_fork_of_a_parent_reset_since_keeps_only_what_it_sees(
    model: ScriptedModel, tmp_path: Path,
) -> None:
    fragola = fresh(model)
    root = fragola.agent("root", messages=[{"role": "user", "content": f"m{i}"} for i in range(6)])
    fork = root.fork("fork")
    root.reset([{"role": "user", "content": "new start"}])

    save_session(tmp_path / "s.json", root)
    document = json.loads((tmp_path / "s.json").read_text())
    session = load_session(tmp_path / "s.json", fresh(model))

    assert [len(h["messages"]) for h in document["histories"]] == [1, 6, 0]
    assert [snapshot(a) for a in session] == [snapshot(root), snapshot(fork)]


async def test_save_takes_a_fork_a_list_or_a_session_and_saves_whole_trees(
    model: ScriptedModel, tmp_path: Path,
) -> None:
    fragola = fresh(model)
    first, second = fragola.agent("first"), fragola.agent("second")
    fork = first.fork("fork")

    save_session(tmp_path / "a.json", fork)
    save_session(tmp_path / "b.json", [second, fork])
    loaded = load_session(tmp_path / "b.json", fresh(model))
    loaded.save(tmp_path / "c.json")

    assert [a.name for a in load_session(tmp_path / "a.json", fresh(model))] == ["first", "fork"]
    assert [a.name for a in loaded] == ["second", "first", "fork"]
    assert (tmp_path / "b.json").read_text() == (tmp_path / "c.json").read_text()


async def test_session_lookup_by_id_then_unique_name(model: ScriptedModel, tmp_path: Path) -> None:
    fragola = fresh(model)
    root = fragola.agent("same")
    twin = root.fork("same")
    save_session(tmp_path / "s.json", root)
    session = load_session(tmp_path / "s.json", fresh(model))

    assert session[twin.id].id == twin.id
    with pytest.raises(KeyError, match="2 agents are named 'same'"):
        session["same"]
    with pytest.raises(KeyError, match="no agent"):
        session["nobody"]


# -- carrying on after a load -----------------------------------------------------------------


async def test_a_loaded_pending_call_is_approved_and_runs(
    model: ScriptedModel, tmp_path: Path,
) -> None:
    _, session, bank, log, _ = await saved_and_loaded(model, tmp_path)
    waiting = session["waiting"]
    log.events.clear()
    model.push(reply("Paid."))

    waiting.approve("t1")
    waiting.inject("d1", "remote done")
    state = await waiting.step()

    assert [(r.to, r.amount) for r in bank.runs] == [("bob", 5)]
    assert state.status == "idle" and state.outcome == "finished"
    assert state.messages[-3:] == [
        {"role": "tool", "tool_call_id": "t1", "content": "sent 5 to bob"},
        {"role": "tool", "tool_call_id": "d1", "content": "remote done"},
        {"role": "assistant", "content": "Paid."},
    ]
    assert "tool_call transfer" in log.events and "status idle" in log.events
    assert session["teacher"].state.messages[-1] == {"role": "assistant", "content": "Bye!"}


async def test_decisions_made_before_saving_are_carried_out_after_loading(
    model: ScriptedModel, tmp_path: Path,
) -> None:
    _, session, bank, _, _ = await saved_and_loaded(model, tmp_path)
    decided, rejected = session["decided"], session["rejected"]
    model.push(reply("Sent to carol."), reply("Understood."))

    await decided.step()
    rejected.inject("d1", "later")
    await rejected.step()

    assert [(r.to, r.amount) for r in bank.runs] == [("carol", 7)]
    assert decided.state.messages[6:8] == [
        {"role": "tool", "tool_call_id": "t1",
         "content": '(The user edited the arguments before this call ran: '
                    '{"to": "carol", "amount": 7})\nsent 7 to carol'},
        {"role": "tool", "tool_call_id": "d1", "content": '{"ok": true}'},
    ]
    assert rejected.state.messages[6] == {
        "role": "tool", "tool_call_id": "t1",
        "content": "The user rejected this call to transfer. Reason: too much",
    }


async def test_a_loaded_agent_keeps_its_options_talking_to_the_model(
    model: ScriptedModel, tmp_path: Path,
) -> None:
    _, session, _, _, _ = await saved_and_loaded(model, tmp_path)
    teacher = session["teacher"]
    model.push(tool_calls(call("add", {"x": 1, "y": 1}, id="a2")), reply("2"))

    state = await teacher.user_message("1 + 1?")
    fork = teacher.fork()

    request = model.requests[-1]
    assert request["messages"][0] == {"role": "developer", "content": "Be brief.\nBe kind."}
    assert request["temperature"] == 0.2 and request["max_tokens"] == 50
    assert [t["function"]["name"] for t in request["tools"]] == ["transfer", "remote", "add"]
    assert state.step_count == 5  # a lifetime budget: the saved count (3) goes on
    assert fork.name == "teacher-fork2" and fork.fork_of == teacher.id


async def test_stores_are_restored_and_the_fragola_store_updated_in_place(
    model: ScriptedModel, tmp_path: Path,
) -> None:
    _, path = await saved_tree(model, tmp_path)
    mine = create_store({"visits": 0}, "shared")
    seen: list[Any] = []
    mine.on_change(seen.append)

    session = load_session(path, fresh(model, stores=[mine]),
                           tools=Bank().tools(), listeners=Log().listeners())

    assert seen == [{"visits": 1}]
    assert session["rejected"].stores["notes"].get() == {"notes": ["first", "rejected"]}
    assert session["teacher"].stores["notes"].get() == {"notes": ["first"]}
    assert session["teacher"].stores["notes"] is not session["waiting"].stores["notes"]


# -- tools and listeners are re-bound by name -------------------------------------------------


async def test_a_missing_tool_or_listener_is_named_and_nothing_is_loaded(
    model: ScriptedModel, tmp_path: Path,
) -> None:
    _, path = await saved_tree(model, tmp_path)
    mine = create_store({"visits": 0}, "shared")
    fragola = fresh(model, stores=[mine])

    with pytest.raises(SessionError) as caught:
        load_session(path, fragola, tools=[add], listeners=[Log().status])

    message = str(caught.value)
    assert "tool 'transfer'" in message and "tool 'remote'" in message
    assert "listener 'Log.tool_call'" in message and "'add'" not in message
    assert mine.get() == {"visits": 0}


async def test_listeners_by_name_and_none_drops_one(model: ScriptedModel, tmp_path: Path) -> None:
    fragola = fresh(model)
    agent = fragola.agent("a")
    agent.on_ai_message(lambda event: None)
    save_session(tmp_path / "s.json", agent)
    heard: list[str] = []

    session = load_session(tmp_path / "s.json", fresh(model),
                           listeners={"test_listeners_by_name_and_none_drops_one.<locals>."
                                      "<lambda>": None})
    agent = session["a"]
    agent.on_status_change(lambda event: heard.append(event.status))
    model.push(reply("hi"))
    await agent.user_message("hello")

    assert heard == ["generating", "idle"]
    assert not agent.deps.listeners.has("ai_message")


async def test_two_different_listeners_with_one_name_cannot_be_saved(
    model: ScriptedModel, tmp_path: Path,
) -> None:
    agent = fresh(model).agent("a")
    agent.on_ai_message(lambda event: None)
    agent.on_after_step(lambda event: None)

    with pytest.raises(SessionError, match="two different listeners are named"):
        save_session(tmp_path / "s.json", agent)
    save_session(tmp_path / "s.json", agent, listeners=False)

    loaded = load_session(tmp_path / "s.json", fresh(model))["a"]
    assert not loaded.deps.listeners.has("ai_message")


async def test_a_generating_agent_cannot_be_saved(model: ScriptedModel, tmp_path: Path) -> None:
    errors: list[BaseException] = []

    @tool
    def snapshot_now(context: Any) -> str:
        """Save the session."""
        try:
            save_session(tmp_path / "s.json", context.agent)
        except BadUsage as exc:
            errors.append(exc)
        return "tried"

    agent = fresh(model).agent("busy", tools=[snapshot_now])
    model.push(tool_calls(call("snapshot_now", {})), reply("done"))
    await agent.user_message("save")

    assert "generating" in str(errors[0])
    assert not (tmp_path / "s.json").exists()
    save_session(tmp_path / "s.json", agent)  # idle again: fine


# -- atomic writes ----------------------------------------------------------------------------


def files_in(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


async def test_a_value_that_is_not_json_fails_the_save_and_keeps_the_old_file(
    model: ScriptedModel, tmp_path: Path,
) -> None:
    agent = fresh(model).agent("a", stores=[create_store({"ok": 1}, "data")])
    save_session(tmp_path / "s.json", agent)
    before = (tmp_path / "s.json").read_bytes()
    agent.stores["data"].set({"ok": 2, "bad": object()})

    with pytest.raises(SessionError, match=r"in agent 'a' .* stores: a object is not a JSON"):
        save_session(tmp_path / "s.json", agent)

    assert (tmp_path / "s.json").read_bytes() == before
    assert files_in(tmp_path) == ["s.json"]


async def test_a_failure_while_writing_keeps_the_old_file(
    model: ScriptedModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    agent = fresh(model).agent("a")
    save_session(tmp_path / "s.json", agent)
    before = (tmp_path / "s.json").read_bytes()
    agent.set_instructions("changed")

    def broken_fsync(fd: int) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(OSError, match="disk full"):
        save_session(tmp_path / "s.json", agent)

    assert (tmp_path / "s.json").read_bytes() == before
    assert files_in(tmp_path) == ["s.json"]


async def test_saving_to_a_symlink_replaces_the_link_and_never_writes_its_target(
    model: ScriptedModel, tmp_path: Path,
) -> None:
    target = tmp_path / "elsewhere" / "precious.txt"
    target.parent.mkdir()
    target.write_text("not yours to overwrite\n")
    target.chmod(0o644)
    link = tmp_path / "s.json"
    link.symlink_to(target)
    agent = fresh(model).agent("a")

    written = save_session(link, agent)

    assert target.read_text() == "not yours to overwrite\n"
    assert oct(target.stat().st_mode & 0o777) == "0o644"
    assert written == link and not link.is_symlink()
    assert oct(link.stat().st_mode & 0o777) == "0o600"  # a new file: the target's mode not copied
    assert [a.name for a in load_session(link, fresh(model))] == ["a"]
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to(tmp_path / "nowhere" / "x.json")
    save_session(dangling, agent)
    assert not dangling.is_symlink() and not (tmp_path / "nowhere").exists()


def test_a_process_killed_between_write_and_rename_leaves_the_old_file(tmp_path: Path) -> None:
    script = textwrap.dedent("""
        import os, sys
        from fragola_nb import Fragola, save_session
        fragola = Fragola(api_key="k", base_url="http://127.0.0.1:9")
        path = sys.argv[1]
        save_session(path, fragola.agent("old"))
        os.replace = lambda *args: os._exit(9)   # the process dies right before the rename
        save_session(path, fragola.agent("new"))
    """)
    path = tmp_path / "s.json"

    result = subprocess.run([sys.executable, "-c", script, str(path)], timeout=60)

    assert result.returncode == 9
    session = load_session(path, Fragola(api_key="k", base_url="http://127.0.0.1:9"))
    assert [a.name for a in session] == ["old"]
    assert oct(path.stat().st_mode & 0o777) == "0o600"


# -- secrets ----------------------------------------------------------------------------------


async def test_api_keys_and_secret_settings_are_never_written(
    model: ScriptedModel, tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    fragola = Fragola(api_key=SECRET, base_url=model.base_url, max_retries=0,
                      default_headers={"Authorization": f"Bearer {SECRET}"})
    agent = fragola.agent("a", model_settings={
        "temperature": 0.1, "max_tokens": 9, "prompt_cache_key": "lesson-1",
        "extra_headers": {"Authorization": f"Bearer {SECRET}", "X-Api-Key": SECRET,
                          "X-Trace": "trace-7", "X-Custom": f"Bearer {SECRET}"},
        "extra_body": {"api_key": SECRET, "client_secret": SECRET, "nested": [SECRET]},
    })
    agent.fork("child")

    save_session(tmp_path / "s.json", agent)

    text = (tmp_path / "s.json").read_text()
    assert SECRET not in text and "SECRET" not in text
    loaded = load_session(tmp_path / "s.json", fresh(model))["a"].options.model_settings
    assert loaded == {"temperature": 0.1, "max_tokens": 9, "prompt_cache_key": "lesson-1",
                      "extra_headers": {"X-Trace": "trace-7"},
                      "extra_body": {"nested": []}}
    assert "extra_headers.Authorization of agent 'a' was not saved" in caplog.text
    assert SECRET not in caplog.text
    # client options are not model settings: refused by name, the value never echoed
    with pytest.raises(BadUsage, match="'api_key', 'default_headers'") as refused:
        fragola.agent("b", model_settings={"api_key": SECRET, "default_headers": {"a": SECRET}})
    assert SECRET not in str(refused.value)


async def test_save_and_load_refuse_what_they_cannot_use(
    model: ScriptedModel, tmp_path: Path,
) -> None:
    one, other = fresh(model).agent("one"), fresh(model).agent("other")

    with pytest.raises(BadUsage, match="one Fragola instance"):
        save_session(tmp_path / "s.json", [one, other])
    with pytest.raises(BadUsage, match="takes an Agent"):
        save_session(tmp_path / "s.json", ["one"])  # type: ignore[list-item]
    save_session(tmp_path / "s.json", one)
    with pytest.raises(BadUsage, match="needs the Fragola instance"):
        load_session(tmp_path / "s.json", None)  # type: ignore[arg-type]
    with pytest.raises(FileNotFoundError):
        load_session(tmp_path / "missing.json", fresh(model))


# -- where the code lives ---------------------------------------------------------------------


def test_sessions_and_exports_live_in_one_subpackage() -> None:
    import fragola_nb
    import fragola_nb.sessions as sessions

    public = ["Session", "load_session", "save_session", "export_html", "export_markdown",
              "export_tree_html", "export_tree_markdown"]
    for name in public:
        assert getattr(fragola_nb, name) is getattr(sessions, name)
        # defined in a module of the subpackage (its __module__ says the face: fragola_nb)
        assert [m for m, module in list(sys.modules.items())
                if m.startswith("fragola_nb.sessions.")
                and vars(module).get(name) is getattr(sessions, name)], name
    assert callable(sessions.session_to_json) and callable(sessions.session_from_json)
    package = Path(fragola_nb.__file__).parent
    assert not [p.name for p in package.glob("session_*.py")]
    assert not (package / "export.py").exists() and not (package / "session.py").exists()

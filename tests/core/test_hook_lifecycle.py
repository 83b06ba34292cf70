"""Hooks at their edges: a hook that forks its agent while it starts (never re-entered by its
own forks), a hook that takes itself off and then puts more on (refused, nothing left owned
by nobody), ``dispose()`` whose undos raise (every hook off, one error naming them), two
unnamed hooks of one factory in a session (saved and loaded as two), and a session file that
lists one hook twice (refused first, with the session error, before any hook runs)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from support.helpers import make_agent, make_fragola

from fragola_nb import BadUsage, ListenerError, SessionError, load_session, save_session
from fragola_nb.models.scripted import ScriptedModel, reply


async def test_an_async_hook_forking_its_agent_while_it_starts_is_not_started_on_the_fork(
        model: ScriptedModel) -> None:
    agent = make_agent(model)
    started: list[str] = []

    async def forking(agent: Any) -> None:
        started.append(agent.name)
        agent.on_ai_message(lambda event: None)
        agent.fork(f"{agent.name}-made-while-starting")
        await asyncio.sleep(0)

    agent.use(forking, name="forking")
    await agent.hooks_ready()
    await asyncio.sleep(0.05)  # anything it started would have run by now

    assert started == [agent.name]
    [fork] = agent.forks
    assert fork.has_hook("forking")  # what the hook had put on when it forked
    assert len(fork.own_listeners().get("ai_message", [])) == 0  # the hook's, not the fork's
    assert fork.forks == ()

    # A fork someone else makes while a hook starts still gets the hook started on it.
    gate = asyncio.Event()

    async def slow(agent: Any) -> None:
        started.append(agent.name)
        await gate.wait()

    agent.use(slow, name="slow")
    await asyncio.sleep(0)
    other = agent.fork("by-the-user")
    gate.set()
    await agent.hooks_ready()
    await other.hooks_ready()
    assert started == [agent.name, agent.name, other.name]


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_a_hook_that_took_itself_off_cannot_put_listeners_on(
        model: ScriptedModel, kind: str) -> None:
    agent = make_agent(model)
    refused: list[str] = []

    def after_removal(agent: Any) -> None:
        agent.remove_hook("gone")
        try:
            agent.on_ai_message(lambda event: {**event.message, "content": "hijacked"})
        except BadUsage as exc:
            refused.append(str(exc))

    async def async_after_removal(agent: Any) -> None:
        await asyncio.sleep(0)
        after_removal(agent)

    agent.use(after_removal if kind == "sync" else async_after_removal, name="gone")
    await agent.hooks_ready()

    assert refused and "was taken off while it started" in refused[0]
    assert not agent.has_hook("gone") and agent.own_listeners().get("ai_message", []) == []
    model.push(reply("mine"))
    assert (await agent.user_message("hi")).messages[-1]["content"] == "mine"


def test_dispose_takes_every_hook_off_then_names_every_undo_that_raised(
        model: ScriptedModel) -> None:
    agent = make_agent(model)
    undone: list[str] = []

    def hook(name: str, fails: bool) -> Any:
        def put_on(agent: Any) -> Any:
            agent.set_instructions(f"{name} on", scope=name)

            def undo() -> None:
                agent.remove_instructions(name)
                undone.append(name)
                if fails:
                    raise RuntimeError(f"{name} could not undo")
            return undo
        return put_on

    for name, fails in (("first", False), ("second", True), ("third", True)):
        agent.use(hook(name, fails), name=name)

    with pytest.raises(ListenerError) as caught:
        agent.dispose()

    assert undone == ["third", "second", "first"]  # every undo ran, the last put on first
    assert agent.hooks_used() == []
    assert [agent.instructions_for(n) for n in ("first", "second", "third")] == [None] * 3
    assert "'third' (RuntimeError: third could not undo)" in str(caught.value)
    assert "'second' (RuntimeError: second could not undo)" in str(caught.value)


def polite(word: str) -> Any:
    """A hook factory: every hook it makes has one ``__qualname__``."""
    def hook(agent: Any) -> None:
        agent.set_instructions(f"Say {word}.", scope=word)
    return hook


def test_two_unnamed_hooks_of_one_factory_are_saved_and_loaded_as_two(
        model: ScriptedModel, tmp_path: Path) -> None:
    agent = make_agent(model)
    agent.use(polite("please"))
    agent.use(polite("thanks"))
    path = save_session(tmp_path / "s.json", agent)

    saved = json.loads(path.read_text())["agents"][0]["hooks"]
    assert [h["hook"] for h in saved] == ["polite.<locals>.hook", "polite.<locals>.hook#2"]
    with pytest.raises(SessionError, match=r"hook 'polite.<locals>.hook#2'"):
        load_session(path, make_fragola(model), hooks={"polite.<locals>.hook": polite("x")})
    [loaded] = load_session(path, make_fragola(model), hooks={
        "polite.<locals>.hook": polite("please"),
        "polite.<locals>.hook#2": polite("thanks")}).agents
    assert loaded.instructions_for("please") == "Say please."
    assert loaded.instructions_for("thanks") == "Say thanks."


def test_a_session_listing_one_hook_twice_is_refused_before_any_hook_runs(
        model: ScriptedModel, tmp_path: Path) -> None:
    agent = make_agent(model)
    agent.use(polite("please"), name="polite")
    path = save_session(tmp_path / "s.json", agent)
    document = json.loads(path.read_text())
    document["agents"][0]["hooks"] *= 2
    path.write_text(json.dumps(document))
    ran: list[str] = []

    def counting(agent: Any) -> None:
        ran.append(agent.name)

    with pytest.raises(SessionError, match="lists the hook 'polite' twice"):
        load_session(path, make_fragola(model), hooks={"polite": counting})
    assert ran == []

"""``agent.fork``: a new agent that starts where its parent is and goes on independently."""

from __future__ import annotations

import tracemalloc
from typing import Any

import pytest
from support.helpers import make_fragola, user

from fragola_nb import Agent, BadUsage, create_store, tool
from fragola_nb.models.scripted import call, hang, reply, tool_calls


@tool
def ping() -> str:
    """Answer pong."""
    return "pong"


@tool
def echo(text: str) -> str:
    """Echo the text."""
    return text


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def tree(node: Agent) -> tuple[str, list[Any]]:
    return (node.name, [tree(child) for child in node.forks])


async def test_fork_has_its_own_id_and_knows_its_parent(model):
    model.push(reply("Once upon a time."))
    agent = make_fragola(model).agent("writer")
    await agent.user_message("Write a story.")

    branch = agent.fork("BranchA")

    assert branch.name == "BranchA"
    assert branch.id != agent.id
    assert branch.fork_of == agent.id
    assert branch.parent is agent
    assert agent.fork_of is None
    assert agent.forks == (branch,)
    assert branch.forks == ()
    assert branch.fork_point == 2
    assert branch.state.messages == agent.state.messages


def test_fork_without_a_name_gets_a_numbered_one(model):
    agent = make_fragola(model).agent("writer")
    first, second = agent.fork(), agent.fork()
    assert (first.name, second.name) == ("writer-fork1", "writer-fork2")
    assert len({agent.id, first.id, second.id}) == 3
    assert agent.forks == (first, second)


def test_the_tree_can_be_walked_from_any_node(model):
    root = make_fragola(model).agent("root")
    a = root.fork("a")
    b = root.fork("b")
    a1 = a.fork("a1")
    a2 = a.fork("a2")
    a1x = a1.fork("a1x")

    expected = ("root", [("a", [("a1", [("a1x", [])]), ("a2", [])]), ("b", [])])
    for node in (root, a, b, a1, a2, a1x):
        assert tree(node.root) == expected
        assert node.root is root
    assert a1x.fork_of == a1.id and a1.fork_of == a.id and a.fork_of == root.id
    # walking up through the parents reaches the root
    chain, node = [], a1x
    while node is not None:
        chain.append(node.name)
        node = node.parent
    assert chain == ["a1x", "a1", "a", "root"]


async def test_fork_state_is_isolated_both_ways(model):
    model.push(reply("Hi."))
    agent = make_fragola(model).agent("bot")
    await agent.user_message("Hello")
    before = agent.state.messages

    branch = agent.fork("branch")
    model.push(reply("Cyborg."))
    fork_state = await branch.user_message("Make it a cyborg.")
    model.push(reply("Alien."))
    parent_state = await agent.user_message("Make it an alien.")

    assert fork_state.messages == [*before, user("Make it a cyborg."), assistant("Cyborg.")]
    assert parent_state.messages == [*before, user("Make it an alien."), assistant("Alien.")]
    assert branch.state.messages == fork_state.messages
    assert agent.state.messages == parent_state.messages
    # each request carried only its own branch
    assert [m["content"] for m in model.requests[1]["messages"]] == [
        "Hello", "Hi.", "Make it a cyborg."
    ]
    assert [m["content"] for m in model.requests[2]["messages"]] == [
        "Hello", "Hi.", "Make it an alien."
    ]


async def test_fork_step_count_and_status_are_copied_then_independent(model):
    model.push(tool_calls(call("ping", {}, id="c1")), reply("pong it is"))
    agent = make_fragola(model).agent(
        "bot", tools=[ping], reset_step_count_after_user_message=False, max_step=10
    )
    await agent.user_message("ping")
    assert agent.step_count == 2

    branch = agent.fork()
    assert branch.step_count == 2
    assert branch.status == "idle"
    model.push(reply("again"))
    await branch.user_message("again")

    assert branch.step_count == 3
    assert agent.step_count == 2
    branch.reset()
    assert branch.state.messages == [] and branch.step_count == 0
    assert len(agent.state.messages) == 4


async def test_fork_tools_are_isolated(model):
    agent = make_fragola(model).agent("bot", tools=[ping])
    branch = agent.fork()

    branch.context.update_tools([ping, echo])

    assert [t.name for t in agent.options.tools] == ["ping"]
    assert [t.name for t in branch.options.tools] == ["ping", "echo"]
    model.push(reply("a"), reply("b"))
    await agent.user_message("x")
    await branch.user_message("y")
    assert [t["function"]["name"] for t in model.requests[0]["tools"]] == ["ping"]
    assert [t["function"]["name"] for t in model.requests[1]["tools"]] == ["ping", "echo"]


def test_fork_keeps_the_tools_of_the_moment_of_the_fork(model):
    agent = make_fragola(model).agent("bot", tools=[ping])
    branch = agent.fork()
    agent.context.update_tools([echo])
    assert [t.name for t in branch.options.tools] == ["ping"]


async def test_listeners_are_copied_and_rebound_to_the_fork(model):
    model.push(reply("parent"), reply("fork"), reply("parent again"))
    agent = make_fragola(model).agent("bot")
    seen: list[tuple[str, str]] = []
    subscription = agent.on_ai_message(
        lambda e: seen.append((e.context.agent.name, e.message["content"]))
    )
    await agent.user_message("1")

    branch = agent.fork("branch")
    subscription()  # removed from the parent only
    await branch.user_message("2")
    await agent.user_message("3")

    assert seen == [("bot", "parent"), ("branch", "fork")]


async def test_listener_added_to_a_fork_does_not_reach_the_parent(model):
    model.push(reply("fork"), reply("parent"))
    agent = make_fragola(model).agent("bot")
    branch = agent.fork("branch")
    seen: list[Any] = []
    branch.on_ai_message(lambda e: seen.append(e.context.agent))

    await branch.user_message("1")
    await agent.user_message("2")

    assert seen == [branch]


def test_a_fork_is_announced_to_its_parent_views_only(model):
    # A view of the tree (the ForkTree widget) hears of a fork made anywhere, from the parent.
    agent = make_fragola(model).agent("bot")
    heard: list[tuple[str, str, Any]] = []
    agent.on_after_state_update(
        lambda e: heard.append((e.context.agent.name, e.reason, e.message)))

    branch = agent.fork("branch")
    twig = branch.fork("twig")

    assert heard == [("bot", "fork", None), ("branch", "fork", None)]
    assert agent.forks[-1] is branch and branch.forks[-1] is twig
    assert twig.message_count == agent.message_count == 0  # no message came with it


async def test_fork_context_is_the_forks_own(model):
    model.push(tool_calls(call("whoami", {}, id="c1")), reply("done"))

    @tool
    def whoami(context) -> str:
        """Name the agent running this tool."""
        return context.agent.name

    agent = make_fragola(model).agent("bot", tools=[whoami])
    branch = agent.fork("branch")
    assert branch.context is not agent.context
    assert branch.context.agent is branch

    state = await branch.user_message("who?")
    assert state.messages[2] == {"role": "tool", "tool_call_id": "c1", "content": "branch"}


async def test_agent_stores_are_deep_copied_and_fragola_stores_shared(model):
    model.push(tool_calls(call("remember", {"text": "fork note"}, id="c1")), reply("ok"))
    shared = create_store({"log": []}, "shared")
    own = create_store({"notes": ["first"]}, "memory")
    fragola = make_fragola(model, stores=[shared])

    @tool
    def remember(text: str, context) -> str:
        """Keep a note."""
        context.get_store("memory").update(lambda v: {"notes": [*v["notes"], text]})
        context.get_store("shared").update(lambda v: {"log": [*v["log"], text]})
        return "noted"

    agent = fragola.agent("bot", tools=[remember], stores=[own])
    branch = agent.fork()
    fork_memory = branch.context.get_store("memory")

    assert fork_memory is not own
    assert fork_memory.get() == {"notes": ["first"]}
    assert fork_memory.get()["notes"] is not own.get()["notes"]
    assert branch.context.get_store("shared") is shared

    await branch.user_message("remember this")

    assert fork_memory.get() == {"notes": ["first", "fork note"]}
    assert own.get() == {"notes": ["first"]}
    assert shared.get() == {"log": ["fork note"]}
    # and the other way round
    own.get()["notes"].append("parent only")  # even an in-place change stays in the parent
    assert fork_memory.get() == {"notes": ["first", "fork note"]}


def nested(depth: int, leaf: Any) -> Any:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


async def test_a_loaded_store_nested_as_deep_as_json_reads_forks(model, tmp_path):
    """A session whose agent store holds a list nested as deep as ``json`` reads (deepcopy
    gave up at about 490 levels, long before): ``load_session`` accepts it, so the loaded
    agent forks, the copy its own, and the fork runs."""
    from fragola_nb import load_session, save_session

    fragola = make_fragola(model)
    save_session(tmp_path / "s.json", fragola.agent("bot", stores=[
        create_store("SENTINEL", "memory")], model_settings={"metadata": {"k": "v"}}))
    text = (tmp_path / "s.json").read_text()
    (tmp_path / "s.json").write_text(text.replace('"SENTINEL"', "[" * 900 + "]" * 900))
    agent = load_session(tmp_path / "s.json", make_fragola(model))["bot"]
    loaded = agent.context.get_store("memory").get()

    branch = agent.fork()

    copied = branch.context.get_store("memory").get()
    inner, original, depth = copied, loaded, 0
    while inner:
        assert inner is not original  # every level copied, none shared
        inner, original, depth = inner[0], original[0], depth + 1
    assert depth == 899
    model.push(reply("ok"))
    assert (await branch.user_message("hi")).messages[-1] == assistant("ok")


def test_a_store_value_is_copied_as_deepcopy_copies_it(model):
    """Sharing inside the value is kept (one copy for one object, cycles too), objects other
    than lists and dicts are deep-copied, and a value nested far past the recursion limit
    is copied too."""
    part = {"n": [1, 2]}
    cycle: list[Any] = ["loop"]
    cycle.append(cycle)
    value = {"a": part, "b": part, "cycle": cycle, "t": (part, "x"), "deep": nested(5000, {})}
    agent = make_fragola(model).agent("bot", stores=[create_store(value, "memory")])

    copied = agent.fork().context.get_store("memory").get()

    assert copied["a"] is copied["b"] and copied["a"] == part and copied["a"] is not part
    assert copied["cycle"][1] is copied["cycle"] and copied["cycle"] is not cycle
    assert copied["t"][0] is copied["a"]  # a tuple, by deepcopy, with the same memo
    leaf, original = copied["deep"], value["deep"]
    for _ in range(5000):
        leaf, original = leaf[0], original[0]
    assert leaf == original == {} and leaf is not original


def test_store_listeners_stay_with_the_parent_store(model):
    own = create_store(0, "n")
    changes: list[int] = []
    own.on_change(changes.append)
    agent = make_fragola(model).agent("bot", stores=[own])
    branch = agent.fork()

    branch.context.get_store("n").set(5)
    own.set(1)

    assert changes == [1]


async def test_options_are_copied_deeply(model):
    agent = make_fragola(model).agent(
        "bot",
        description="A helper.",
        instructions=["Be brief.", "Be kind."],
        model_settings={"temperature": 0.5, "metadata": {"team": "a"}},
        max_step=7,
    )
    branch = agent.fork()

    assert branch.description == "A helper."
    assert branch.instructions == "Be brief.\nBe kind."
    assert branch.options.max_step == 7
    assert branch.options.model_settings == agent.options.model_settings

    branch.context.set_instructions("Be verbose.")
    branch.options.model_settings["temperature"] = 1.0
    branch.options.model_settings["metadata"]["team"] = "b"

    assert agent.instructions == "Be brief.\nBe kind."
    assert agent.options.model_settings == {"temperature": 0.5, "metadata": {"team": "a"}}

    model.push(reply("parent"), reply("fork"))
    await agent.user_message("hi")
    await branch.user_message("hi")
    parent_request, fork_request = model.requests
    assert parent_request["messages"][0] == {"role": "system", "content": "Be brief.\nBe kind."}
    assert parent_request["temperature"] == 0.5
    assert parent_request["metadata"] == {"team": "a"}
    assert fork_request["messages"][0] == {"role": "system", "content": "Be verbose."}
    assert fork_request["temperature"] == 1.0
    assert fork_request["metadata"] == {"team": "b"}


async def test_forking_a_long_history_shares_the_message_dicts(model):
    messages = []
    for i in range(5_000):
        messages.append(user(f"question {i}"))
        messages.append(assistant(f"answer {i}"))
    agent = make_fragola(model).agent("bot", messages=messages)

    tracemalloc.start()
    try:
        branch = agent.fork()
        grandchild = branch.fork()
        allocated, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # Structural sharing: not even a list of 10,000 references (80 kB) is made.
    assert allocated < 40_000

    for node in (agent, branch, grandchild):
        held = node.state.messages
        assert len(held) == 10_000
        # the very same dicts, not copies
        assert all(a is b for a, b in zip(held, messages, strict=True))

    # by=0: the user message is stored but no request is made (10,000 messages on the wire
    # would only slow the test down; the round trip is covered with a short history above)
    fork_state = await branch.user_message("fork question", by=0)
    parent_state = await agent.user_message("parent question", by=0)

    assert fork_state.messages[10_000:] == [user("fork question")]
    assert parent_state.messages[10_000:] == [user("parent question")]
    assert branch.state.messages[10_000:] == [user("fork question")]
    assert model.requests == []
    assert len(grandchild.state.messages) == 10_000
    assert fork_state.messages[9_999] is messages[9_999]


async def test_fork_while_generating_raises_bad_usage(model):
    model.push(tool_calls(call("ping", {}, id="c1")), reply("done"))
    agent = make_fragola(model).agent("bot", tools=[ping])
    errors: list[Exception] = []

    @agent.on_before_tool_call
    def try_fork(event):
        try:
            event.context.agent.fork()
        except Exception as exc:
            errors.append(exc)

    state = await agent.user_message("ping")

    assert len(errors) == 1
    assert isinstance(errors[0], BadUsage)
    assert agent.forks == ()
    assert state.status == "idle"
    assert agent.fork().fork_of == agent.id  # fine again once idle


async def test_fork_point_marks_where_the_branches_part(model):
    model.push(reply("a"), reply("b"), reply("c"))
    agent = make_fragola(model).agent("bot")
    empty_fork = agent.fork()
    await agent.user_message("1")
    one_turn_fork = agent.fork()
    await agent.user_message("2")
    await one_turn_fork.user_message("other")
    deeper = one_turn_fork.fork()

    assert empty_fork.fork_point == 0
    assert one_turn_fork.fork_point == 2
    assert deeper.fork_point == 4
    common = one_turn_fork.fork_point
    assert agent.state.messages[:common] == one_turn_fork.state.messages[:common]
    assert agent.state.messages[common:] != one_turn_fork.state.messages[common:]


async def test_fork_of_a_waiting_agent_keeps_the_pending_call_unapproved(model):
    model.push(tool_calls(call("danger", {}, id="c1")))
    ran: list[str] = []

    def danger() -> str:
        ran.append("ran")
        return "boom"

    risky = tool(name="danger", description="Risky.", handler=danger, require_approval=True)
    agent = make_fragola(model).agent("bot", tools=[risky])
    state = await agent.user_message("do it")
    assert state.status == "waiting"

    branch = agent.fork()
    assert branch.status == "waiting"
    assert [p.id for p in branch.state.pending] == ["c1"]

    branch.reject("c1", "not in this branch")
    model.push(reply("ok, I will not"))
    fork_state = await branch.step()

    assert ran == []
    assert agent.status == "waiting"
    assert [p.decision for p in agent.state.pending] == [None]
    assert fork_state.messages[2] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": "The user rejected this call to danger. Reason: not in this branch",
    }
    with pytest.raises(BadUsage):
        await agent.user_message("the parent still waits for a decision")


# -- dropping branches (issue 10, B.5) ---------------------------------------------------------


async def test_dropped_forks_are_freed_and_the_parent_lists_what_is_left(model):
    import gc
    import weakref

    agent = make_fragola(model).agent("trunk", messages=[user(f"m{i}") for i in range(100)])
    kept = agent.fork("kept")
    refs = []
    for n in range(2000):
        fork = agent.fork(f"trial{n}")
        refs.append(weakref.ref(fork))
        fork.drop()
    del fork
    gc.collect()

    assert [ref() for ref in refs] == [None] * len(refs)
    assert agent.forks == (kept,)
    assert tree(agent) == ("trunk", [("kept", [])])


async def test_forks_nobody_dropped_stay_in_the_tree(model):
    import gc

    agent = make_fragola(model).agent("trunk")
    for n in range(3):
        agent.fork(f"b{n}")  # no variable keeps them: the tree does
    gc.collect()
    assert [fork.name for fork in agent.forks] == ["b0", "b1", "b2"]


async def test_dropping_a_branch_takes_its_forks_and_leaves_it_usable(model):
    model.push(reply("still here"))
    trunk = make_fragola(model).agent("trunk", messages=[user("hi")])
    branch = trunk.fork("branch")
    leaf = branch.fork("leaf")
    heard = []
    trunk.on_after_state_update(lambda event: heard.append(event.reason))

    branch.drop()

    assert trunk.forks == () and heard == ["drop"]
    assert branch.parent is None and branch.root is branch and branch.fork_of == trunk.id
    assert branch.forks == (leaf,) and leaf.root is branch
    state = await branch.user_message("and now?")
    assert state.messages == [user("hi"), user("and now?"), assistant("still here")]
    assert trunk.state.messages == [user("hi")]


async def test_drop_refuses_a_root_a_dropped_fork_and_a_generating_one(model):
    import asyncio

    model.push(hang())
    trunk = make_fragola(model).agent("trunk")
    with pytest.raises(BadUsage, match="not a fork"):
        trunk.drop()
    gone = trunk.fork("gone")
    gone.drop()
    with pytest.raises(BadUsage, match="already dropped"):
        gone.drop()
    busy = trunk.fork("busy")
    task = asyncio.create_task(busy.user_message("go"))
    await asyncio.to_thread(model.wait_for_requests, 1)
    with pytest.raises(BadUsage, match="generating"):
        busy.drop()
    busy.stop_sync()
    await task
    busy.drop()
    assert trunk.forks == ()


async def test_a_dropped_fork_saves_and_loads_as_a_root_of_its_own(model, tmp_path):
    from fragola_nb import load_session, save_session

    model.push(reply("branch reply"))
    trunk = make_fragola(model).agent("trunk", messages=[user("hi")])
    branch = trunk.fork("branch")
    await branch.user_message("more")
    branch.drop()

    save_session(tmp_path / "branch.json", branch)
    loaded = load_session(tmp_path / "branch.json", make_fragola(model))

    assert [agent.name for agent in loaded.roots] == ["branch"]
    assert loaded["branch"].state.messages == branch.state.messages

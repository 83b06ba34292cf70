"""Stores: named values that tools and listeners share, per agent or per Fragola instance."""

from __future__ import annotations

import pytest
from support.helpers import make_fragola

from fragola_nb import BadUsage, Store, create_store, tool
from fragola_nb.models.scripted import call, reply, tool_calls


def test_create_store_get_set_update():
    store = create_store({"count": 0}, "counter")

    assert isinstance(store, Store)
    assert store.namespace == "counter"
    assert store.get() == {"count": 0}
    assert store.set({"count": 5}) == {"count": 5}
    assert store.get() == {"count": 5}
    assert store.update(lambda value: {"count": value["count"] + 1}) == {"count": 6}
    assert store.get() == {"count": 6}


def test_on_change_gets_each_new_value_until_unsubscribed():
    store = create_store(0, "n")
    first: list[int] = []
    second: list[int] = []
    unsubscribe = store.on_change(first.append)
    store.on_change(second.append)

    store.set(1)
    store.update(lambda n: n + 10)
    unsubscribe()
    store.set(100)
    unsubscribe()  # twice is harmless

    assert first == [1, 11]
    assert second == [1, 11, 100]
    assert store.get() == 100


def test_a_store_needs_a_namespace():
    with pytest.raises(BadUsage):
        create_store(1, "")
    with pytest.raises(BadUsage):
        create_store(1, None)  # type: ignore[arg-type]


def test_two_stores_with_one_namespace_are_refused(model):
    fragola = make_fragola(model)
    with pytest.raises(BadUsage, match="cart"):
        fragola.agent("shop", stores=[create_store([], "cart"), create_store([], "cart")])
    with pytest.raises(BadUsage, match="cart"):
        make_fragola(model, stores=[create_store([], "cart"), create_store([], "cart")])
    fragola.add_store(create_store([], "cart"))
    with pytest.raises(BadUsage, match="cart"):
        fragola.add_store(create_store([], "cart"))


def test_only_stores_are_accepted(model):
    with pytest.raises(BadUsage):
        make_fragola(model).agent("shop", stores=[{"namespace": "cart"}])  # type: ignore[list-item]


def test_agent_store_is_found_before_the_fragola_store(model):
    shared = create_store("shared", "settings")
    own = create_store("own", "settings")
    fragola = make_fragola(model, stores=[shared])
    agent = fragola.agent("a", stores=[own])
    other = fragola.agent("b")

    assert agent.context.get_store("settings") is own
    assert other.context.get_store("settings") is shared
    assert agent.context.get_store("missing") is None
    assert agent.stores == {"settings": own}
    assert other.stores == {}


def test_add_store_reaches_agents_made_before(model):
    fragola = make_fragola(model)
    agent = fragola.agent("a")
    assert agent.context.get_store("late") is None

    late = create_store(1, "late")
    fragola.add_store(late)

    assert agent.context.get_store("late") is late
    assert fragola.agent("b").context.get_store("late") is late


async def test_tool_reads_and_updates_stores_through_its_context(model):
    model.push(
        tool_calls(
            call("add_to_cart", {"item": "apple"}, id="c1"),
            call("add_to_cart", {"item": "pear"}, id="c2"),
        ),
        reply("Added."),
    )
    visits = create_store(0, "visits")
    cart = create_store([], "cart")
    fragola = make_fragola(model, stores=[visits])
    changes: list[list[str]] = []
    cart.on_change(changes.append)

    @tool
    def add_to_cart(item: str, context) -> str:
        """Put an item in the cart."""
        context.get_store("visits").update(lambda n: n + 1)
        items = context.get_store("cart").update(lambda value: [*value, item])
        return f"cart: {', '.join(items)}"

    agent = fragola.agent("shop", tools=[add_to_cart], stores=[cart])
    state = await agent.user_message("Buy an apple and a pear.")

    assert cart.get() == ["apple", "pear"]
    assert visits.get() == 2
    assert changes == [["apple"], ["apple", "pear"]]
    assert state.messages[2:4] == [
        {"role": "tool", "tool_call_id": "c1", "content": "cart: apple"},
        {"role": "tool", "tool_call_id": "c2", "content": "cart: apple, pear"},
    ]


async def test_agent_stores_are_per_agent_and_fragola_stores_are_shared(model):
    model.push(
        tool_calls(call("bump", {}, id="c1")),
        reply("ok"),
        tool_calls(call("bump", {}, id="c2")),
        reply("ok"),
    )
    total = create_store(0, "total")
    fragola = make_fragola(model, stores=[total])

    @tool
    def bump(context) -> str:
        """Count a call."""
        context.get_store("total").update(lambda n: n + 1)
        mine = context.get_store("mine").update(lambda n: n + 1)
        return f"mine={mine}"

    first = fragola.agent("first", tools=[bump], stores=[create_store(0, "mine")])
    second = fragola.agent("second", tools=[bump], stores=[create_store(0, "mine")])

    await first.user_message("bump")
    state = await second.user_message("bump")

    assert total.get() == 2
    assert first.context.get_store("mine").get() == 1
    assert second.context.get_store("mine").get() == 1
    assert state.messages[2] == {"role": "tool", "tool_call_id": "c2", "content": "mine=1"}


async def test_listener_reads_a_store_through_event_context(model):
    model.push(reply("Hello, Ada."))
    profile = create_store({"name": "Ada"}, "profile")
    agent = make_fragola(model).agent("bot", stores=[profile])

    @agent.on_user_message
    def sign(event):
        name = event.context.get_store("profile").get()["name"]
        return {**event.message, "content": f"{name}: {event.message['content']}"}

    state = await agent.user_message("hello")

    assert state.messages[0] == {"role": "user", "content": "Ada: hello"}

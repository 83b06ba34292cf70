"""``History``: an append-only message list that forks share structurally."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fragola_nb.core.history import History


def msg(n: int) -> dict[str, Any]:
    return {"role": "user", "content": f"m{n}"}


def assert_same(history: History, expected: list[dict[str, Any]]) -> None:
    """Every way of reading ``history`` agrees with ``expected``, object for object."""
    assert len(history) == len(expected)
    listed = history.to_list()
    assert listed == expected
    assert all(a is b for a, b in zip(listed, expected, strict=True))
    assert list(history) == expected
    for i in range(len(expected)):
        assert history[i] is expected[i]
        assert history[-i - 1] is expected[-i - 1]
    assert history[:] == expected
    assert history[1:-1] == expected[1:-1]
    assert history[::2] == expected[::2]
    assert history[::-1] == expected[::-1]
    assert history.last() is (expected[-1] if expected else None)


def test_indexing_negative_indexes_slices_and_iteration():
    messages = [msg(i) for i in range(5)]
    history = History(messages)

    assert history[0] is messages[0]
    assert history[4] is messages[4]
    assert history[-1] is messages[4]
    assert history[-5] is messages[0]
    assert history[1:3] == messages[1:3]
    assert history[-2:] == messages[-2:]
    assert history[::-2] == messages[::-2]
    assert [m["content"] for m in history] == ["m0", "m1", "m2", "m3", "m4"]
    assert len(history) == 5
    for bad in (5, -6, 100):
        with pytest.raises(IndexError):
            history[bad]


def test_empty_history():
    history = History()
    assert len(history) == 0
    assert history.to_list() == []
    assert list(history) == []
    assert history[:] == []
    assert history.last() is None
    with pytest.raises(IndexError):
        history[0]
    with pytest.raises(IndexError):
        history[-1]


def test_the_given_list_is_not_aliased():
    messages = [msg(0)]
    history = History(messages)
    messages.append(msg(1))
    history.append(msg(2))
    assert [m["content"] for m in history] == ["m0", "m2"]
    assert len(messages) == 2


def test_append_after_fork_on_both_sides():
    base = [msg(i) for i in range(3)]
    parent = History(base)
    child = parent.fork()

    parent.append(msg(10))
    child.append(msg(20))
    parent.append(msg(11))
    child.append(msg(21))

    assert_same(parent, [*base, parent[3], parent[4]])
    assert [m["content"] for m in parent] == ["m0", "m1", "m2", "m10", "m11"]
    assert [m["content"] for m in child] == ["m0", "m1", "m2", "m20", "m21"]
    assert child[2] is base[2]
    assert child[-1]["content"] == "m21"
    assert child[3:] == [msg(20), msg(21)]


def test_fork_chains_several_levels_deep():
    root = History([msg(0), msg(1)])
    expected = {"root": root.to_list()}
    levels = {"root": root}
    node, name = root, "root"
    for depth in range(1, 8):
        child = node.fork()
        child.append(msg(100 + depth))
        levels[f"level{depth}"] = child
        expected[f"level{depth}"] = [*expected[name], child[-1]]
        # the parent keeps growing after the fork; the child must not see it
        node.append(msg(200 + depth))
        expected[name] = [*expected[name], node[-1]]
        node, name = child, f"level{depth}"

    for key, history in levels.items():
        assert_same(history, expected[key])
    deepest = levels["level7"]
    assert [m["content"] for m in deepest] == ["m0", "m1", *(f"m{100 + d}" for d in range(1, 8))]


def test_forking_a_fork_of_an_empty_history():
    root = History()
    child = root.fork()
    grandchild = child.fork()
    root.append(msg(0))
    grandchild.append(msg(2))
    child.append(msg(1))
    assert [m["content"] for m in root] == ["m0"]
    assert [m["content"] for m in child] == ["m1"]
    assert [m["content"] for m in grandchild] == ["m2"]


def test_forking_is_cheap_and_shares_the_dicts():
    messages = [msg(i) for i in range(10_000)]
    history = History(messages)
    child = history.fork()
    for _ in range(50):
        child = child.fork()

    assert len(child) == 10_000
    assert child[5_000] is messages[5_000]
    assert all(a is b for a, b in zip(child.to_list(), messages, strict=True))


# -- property: random appends and forks behave like independent plain lists -----------------

operations = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(min_value=0, max_value=1_000)),
        st.tuples(st.just("fork"), st.integers(min_value=0, max_value=1_000)),
    ),
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(initial=st.integers(min_value=0, max_value=4), ops=operations)
def test_appends_and_forks_behave_like_copied_lists(initial, ops):
    counter = iter(range(10**6))
    first = [msg(next(counter)) for _ in range(initial)]
    histories = [History(first)]
    models = [list(first)]
    for op, pick in ops:
        target = pick % len(histories)
        if op == "append":
            message = msg(next(counter))
            histories[target].append(message)
            models[target].append(message)
        else:
            histories.append(histories[target].fork())
            models.append(list(models[target]))
        for history, model in zip(histories, models, strict=True):
            assert len(history) == len(model)
    for history, model in zip(histories, models, strict=True):
        assert_same(history, model)

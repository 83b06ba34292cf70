"""Stores: small named pieces of state that tools and listeners share.

An agent's own stores (``fragola.agent(stores=[...])``) are deep-copied when the agent is
forked; stores given to ``Fragola(stores=[...])`` are shared by every agent and fork.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

from fragola_nb.base.errors import BadUsage

__all__ = ["Store", "create_store"]

T = TypeVar("T")


class Store(Generic[T]):
    """A value with a namespace, read with ``get``, changed with ``set`` or ``update``.

    >>> counter = create_store({"calls": 0}, "counter")
    >>> counter.update(lambda v: {**v, "calls": v["calls"] + 1})
    {'calls': 1}
    """

    __slots__ = ("_listeners", "_value", "namespace")

    def __init__(self, value: T, namespace: str) -> None:
        if not isinstance(namespace, str) or not namespace:
            raise BadUsage("a store needs a non-empty string namespace")
        self.namespace = namespace
        self._value = value
        self._listeners: list[Callable[[T], Any]] = []

    def get(self) -> T:
        return self._value

    def set(self, value: T) -> T:
        self._value = value
        for listener in list(self._listeners):
            listener(value)
        return value

    def update(self, fn: Callable[[T], T]) -> T:
        """Replace the value with ``fn(current)`` and return the new value."""
        return self.set(fn(self._value))

    def on_change(self, callback: Callable[[T], Any]) -> Callable[[], None]:
        """Call ``callback(new_value)`` after every change; returns an unsubscribe callable."""
        self._listeners.append(callback)

        def unsubscribe() -> None:
            if callback in self._listeners:
                self._listeners.remove(callback)

        return unsubscribe

    def clone(self) -> Store[T]:
        """A deep copy of the value under the same namespace, with no listeners."""
        return Store(deep_copy(self._value), self.namespace)

    def __repr__(self) -> str:
        return f"Store(namespace={self.namespace!r}, value={self._value!r})"


def deep_copy(value: T) -> T:
    """``copy.deepcopy``, without recursion through lists and dicts.

    ``copy.deepcopy`` takes two Python frames per level of nesting, so a value that JSON
    accepted (a session's store, a tool's result kept in a store: ``json`` reads about 1,000
    levels) could not be forked past about 490 levels: ``RecursionError``. Plain lists and
    dicts are copied here with a work list instead, sharing and cycles kept as ``deepcopy``
    keeps them (one memo); anything else is handed to ``copy.deepcopy`` with that memo."""
    memo: dict[int, Any] = {}

    def start(item: Any) -> Any:
        """The copy of ``item``: a new empty list or dict to fill later, or a done copy."""
        known = memo.get(id(item), memo)
        if known is not memo:
            return known
        kind = type(item)
        if kind is list or kind is dict:
            made: Any = kind()
            memo[id(item)] = made
            memo.setdefault(id(memo), []).append(item)  # deepcopy's keep-alive, as it does
            work.append((item, made))
            return made
        return copy.deepcopy(item, memo)

    work: list[tuple[Any, Any]] = []
    top = start(value)
    while work:
        source, target = work.pop()
        if type(source) is list:
            target.extend(start(item) for item in source)
        else:
            for key, item in source.items():
                target[start(key)] = start(item)
    return top  # type: ignore[no-any-return]


def create_store(value: T, namespace: str) -> Store[T]:
    """Make a store holding ``value``, found by ``context.get_store(namespace)``."""
    return Store(value, namespace)


def index_stores(stores: Iterable[Store[Any]]) -> dict[str, Store[Any]]:
    """Stores by namespace; two stores with one namespace is a mistake worth stopping."""
    by_name: dict[str, Store[Any]] = {}
    for store in stores:
        if not isinstance(store, Store):
            raise BadUsage(f"expected a Store (from create_store), got {type(store).__name__}")
        if store.namespace in by_name:
            raise BadUsage(f"two stores share the namespace {store.namespace!r}")
        by_name[store.namespace] = store
    return by_name

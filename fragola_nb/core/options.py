"""Options and stores changed at run time: ``agent.set_options`` and ``agent.add_store``.

Fragola (0.1.1) lets a hook or a listener reconfigure an agent between turns
(``setOptions``, ``addStore``, ``removeStore``). Each change is checked as ``fragola.agent``
checks the same option, so an agent never holds a setting it could not have been made
with; a change is refused while the agent generates or waits on tool calls, because the
run in flight (or the one a ``step()`` resumes) was planned with the settings it has.
The name is not an option here: forks, sessions and views know an agent by it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from fragola_nb.base.checks import normalize_instructions
from fragola_nb.base.errors import BadUsage
from fragola_nb.base.inuse import remember
from fragola_nb.base.redact import credentials_in
from fragola_nb.core.stores import Store, index_stores
from fragola_nb.core.tools import check_tools
from fragola_nb.models.client import settings_problem

if TYPE_CHECKING:
    from fragola_nb.core.conversation import Conversation

__all__ = ["SETTABLE", "add_store", "check_max_step", "check_model_settings",
           "set_options"]


def check_max_step(value: Any) -> int:
    """``value`` when it is a whole number >= 1 (``max_step``); else ``BadUsage``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise BadUsage(f"max_step must be a whole number >= 1, got {value!r}")
    return value


def check_model_settings(value: Any) -> dict[str, Any]:
    """A copy of ``value`` when it is a dict of settings the model client accepts."""
    if not isinstance(value, Mapping):
        # dict() would accept a list of pairs or fail with a bare ValueError.
        raise BadUsage(f"model_settings must be a dict, got {type(value).__name__}")
    settings = dict(value)
    problem = settings_problem(settings)
    if problem:
        raise BadUsage(problem)
    remember(credentials_in(settings))  # hidden from every writer and view from now on
    return settings


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise BadUsage(f"description must be a string, got {type(value).__name__}")
    return value


def _flag(name: str) -> Callable[[Any], bool]:
    def check(value: Any) -> bool:
        if not isinstance(value, bool):
            raise BadUsage(f"{name} must be True or False, got {value!r}")
        return value

    return check


SETTABLE: dict[str, Callable[[Any], Any]] = {
    "description": _text,
    "instructions": normalize_instructions,
    "use_developer_role": _flag("use_developer_role"),
    "model_settings": check_model_settings,
    "max_step": check_max_step,
    "reset_step_count_after_user_message": _flag("reset_step_count_after_user_message"),
    "tools": lambda tools: list(check_tools(tools)),
}
"""Each option ``set_options`` changes, and how its new value is checked."""


def _check_idle(conv: Conversation, doing: str) -> None:
    if conv.status != "idle":
        raise BadUsage(f"agent {conv.deps.name!r} is {conv.status}: {doing} when it is idle "
                       "(await the turn, or stop() it)")


def set_options(conv: Conversation, changes: Mapping[str, Any]) -> None:
    """Check every change first, then make them all (none is made when one is refused)."""
    unknown = [name for name in changes if name not in SETTABLE]
    if unknown:
        raise BadUsage(f"set_options cannot change {', '.join(map(repr, unknown))}; it changes "
                       + ", ".join(SETTABLE))
    _check_idle(conv, "change its options")
    checked = {name: SETTABLE[name](value) for name, value in changes.items()}
    for name, value in checked.items():
        setattr(conv.deps.options, name, value)


def add_store(conv: Conversation, store: Store[Any]) -> None:
    """One more store on this agent alone (its forks made before do not see it)."""
    conv.stores = index_stores((*conv.stores.values(), store))

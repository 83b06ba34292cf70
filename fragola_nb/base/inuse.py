"""The credentials in use in this process: the one place that knows them all.

Whatever fragola_nb writes or shows (a recording, a cache, a resume file, ``save``, a
session file, an export, a repr, a table, a widget, a span, an error's text) passes
:mod:`fragola_nb.base.redact`, and its rule hides, besides the shapes it knows, every value
``remember`` was given, wherever it appears (a server that quotes a key back in its answer).

Who tells it: the model client, when it is made (its key, the credentials of its
``default_headers`` and ``default_query``) and when it sends a request (the credential
headers, query values and body fields of that request: a variant's ``extra_headers``, a
judge's key, whatever the header or field is called, by the rule's names); and an agent's
options, when ``model_settings`` are set. So a credential is known here before any server
can quote it back.

A credential stays known until the process ends: an evaluation saved after its agent is gone
still hides the key its server quoted. Only values that cannot be ordinary text hide by value
(the rule in :mod:`fragola_nb.base.redact`: 8 characters or more, not one plain word).

>>> remember(["corp-gw-7Q2xL9pZ4mN8"])
>>> "corp-gw-7Q2xL9pZ4mN8" in in_use()
True
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

__all__ = ["in_use", "remember"]

_lock = threading.Lock()
_values: set[str] = set()
_frozen: frozenset[str] = frozenset()


def remember(values: Iterable[object]) -> None:
    """Add ``values`` (the strings among them) to the credentials in use."""
    global _frozen
    new = {value for value in values if isinstance(value, str) and value}
    if new <= _frozen:  # the usual case, without the lock: a key sent again
        return
    with _lock:
        _values.update(new)
        _frozen = frozenset(_values)


def in_use() -> frozenset[str]:
    """Every credential remembered so far (the same object until one is added)."""
    return _frozen

"""An append-only message history that forks share structurally.

A fork must not copy thousands of message dicts, and a parent that keeps talking must not
change what its forks see. ``History`` is append-only: a fork is a new ``History`` that views
the first ``n`` messages of its parent's history and appends to a list of its own, so forking
costs O(1) time and memory whatever the length. Nothing is ever removed or changed in place;
``reset`` makes a new ``History``.

A fork may also start earlier (``fork(at)`` views only the first ``at`` messages), and one
message may be replaced (``edited``): that makes a new ``History`` over this one holding the
replacement beside it, so this history, and every fork already made of it, still reads the
message as it was (copy-on-write of the one message).

Every message that enters a history (made, appended, edited, linked from a session file) is
``fragola_nb.base.surrogates.mended``: half an emoji a model or a tool sent (a lone
surrogate) is stored as U+FFFD, so the history stays a request that can be sent.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from fragola_nb.base.surrogates import mended

Message = dict[str, Any]


class History(Sequence[Message]):
    """Append-only sequence of Chat Completions message dicts, cheap to fork."""

    __slots__ = ("_base", "_base_len", "_edits", "_own")

    def __init__(self, messages: Sequence[Message] = ()) -> None:
        self._base: History | None = None
        self._base_len = 0
        self._own: list[Message] = [mended(message) for message in messages]
        self._edits: dict[int, Message] | None = None
        """Messages of the base replaced for this history and its forks (set when made)."""

    def fork(self, at: int | None = None) -> History:
        """A new history seeing the first ``at`` messages (all it holds now when None),
        independent from here on."""
        child = History()
        child._base = self
        child._base_len = len(self) if at is None else at
        return child

    def edited(self, index: int, message: Message) -> History:
        """A new history reading ``message`` at ``index`` (0 <= index < len) and the rest as
        this one does; this one is left unchanged."""
        child = self.fork()
        child._edits = {index: mended(message)}
        return child

    def append(self, message: Message) -> Message:
        """Append ``message``; return it as stored (``mended``: the same dict unless it held
        a lone surrogate)."""
        stored = mended(message)
        self._own.append(stored)
        return stored

    # -- its structure, for a session file (``fragola_nb.sessions``) ------------------------

    @property
    def base(self) -> History | None:
        """The history this one views the start of (None: it holds all its messages)."""
        return self._base

    @property
    def base_length(self) -> int:
        """How many of ``base``'s messages this history reads before its own."""
        return self._base_len

    @property
    def own(self) -> tuple[Message, ...]:
        """The messages appended to this history itself (after the ones it views)."""
        return tuple(self._own)

    @property
    def edits(self) -> dict[int, Message]:
        """The messages of ``base`` this history (and its forks) reads replaced, by index."""
        return dict(self._edits or {})

    @classmethod
    def linked(cls, messages: Sequence[Message], base: History | None = None,
               base_length: int = 0, edits: dict[int, Message] | None = None) -> History:
        """A history as ``fork`` and ``edited`` would have made it: viewing the first
        ``base_length`` messages of ``base`` (with ``edits`` in place of some), then
        ``messages``. A session file is read back into its shared histories with this."""
        node = cls(messages)
        if base is not None:
            node._base, node._base_len = base, base_length
        node._edits = {i: mended(m) for i, m in edits.items()} if edits else None
        return node

    def __len__(self) -> int:
        return self._base_len + len(self._own)

    def __getitem__(self, index: Any) -> Any:
        if type(index) is int:  # the usual case: one of this history's own messages
            own = self._own
            at = index - self._base_len if index >= 0 else index + len(own)
            if 0 <= at < len(own):
                return own[at]
        if isinstance(index, slice):
            return self.to_list()[index]
        length = len(self)
        if index < 0:
            index += length
        if not 0 <= index < length:
            raise IndexError("history index out of range")
        node: History = self
        while index < node._base_len:
            if node._edits is not None and index in node._edits:
                return node._edits[index]
            assert node._base is not None
            node = node._base
            # The base may have grown since the fork; positions below base_len are stable.
        return node._own[index - node._base_len]

    def since(self, start: int) -> list[Message]:
        """The messages from index ``start`` (>= 0) on, as a new list."""
        at = start - self._base_len
        return self._own[at:] if at >= 0 else self.to_list()[start:]

    def __iter__(self) -> Iterator[Message]:
        return iter(self.to_list())

    def to_list(self) -> list[Message]:
        """The messages as a new list (the dicts themselves are shared, never copied)."""
        chain: list[tuple[History, int]] = []
        edits: list[tuple[dict[int, Message], int]] = []
        node: History | None = self
        limit = reach = len(self)
        while node is not None:
            chain.append((node, limit))
            limit = node._base_len
            reach = min(reach, limit)  # what reads of this node's base come through it
            if node._edits is not None:
                edits.append((node._edits, reach))
            node = node._base
        out: list[Message] = []
        for node, end in reversed(chain):
            take = end - node._base_len
            if take < 0:  # a fork that starts before its base did (``fork(at)``)
                del out[end:]
            elif take == len(node._own):
                out.extend(node._own)
            else:
                out.extend(node._own[:take])
        for replaced, below in reversed(edits):  # the nearest edit wins: applied last
            for index, message in replaced.items():
                if index < below:
                    out[index] = message
        return out

    def last(self) -> Message | None:
        return self[len(self) - 1] if len(self) else None

    def __repr__(self) -> str:
        return f"History({len(self)} messages)"

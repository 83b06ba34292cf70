"""``DiffView``: ``fragola_nb.diff(a, b)`` as a live view, changes first, a page at a time.

At two 5,000-message branches the diff holds 4,795 pairs; its static HTML (``diffhtml``),
put in the page at once, held the main thread for a quarter of a second or more. The view
gets the pairs as data (``rows``: the changed, added and removed pairs one by one; each run
of identical pairs as one fold, its messages sent when a click unfolds it) and draws one page
of ``PAGE`` lines at a time: a line on top counts each kind, a fold reads "… 750 identical
messages" and unfolds on a click, "changes only" hides the identical ones, and the pager
reaches every page, the last change included. The view draws with ``textContent`` only;
every text is made ``visible`` here first (credentials redacted, bidi overrides and
zero-width characters written out, half a surrogate pair as ``\\udXXX``), so nothing a model
wrote can act as markup.

In a cell with the extension loaded (``shower``), and in the fork tree, the diff shows as this
view; its bundle keeps the static HTML for nbconvert and GitHub (``diffhtml``: the pairs that
differ first, at most ``PAGE`` messages' rows, since a page parses it again and again).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anywidget
import traitlets

from fragola_nb.base.checks import edited_by_hand
from fragola_nb.base.render import visible
from fragola_nb.base.textfile import writable
from fragola_nb.core.branchdiff import BranchDiff, message_text
from fragola_nb.core.diffhtml import (
    CSS,
    MAX_CHARS,
    SAME_CHARS,
    branch_diff_html,
    runs,
    where,
)
from fragola_nb.notebook.static.copy import live_text

if TYPE_CHECKING:
    from fragola_nb.core.branchdiff import DiffPair, Message
    from fragola_nb.core.usage import Usage
    from fragola_nb.notebook.magics import Extension

__all__ = ["PAGE", "DiffView", "head_of", "rows_of", "shower", "unfolded"]

_HERE = Path(__file__).parent
PAGE = 100
"""Lines drawn at once (a pair, or a fold's line); the pager reaches the others."""


def _shown(text: str, limit: int = MAX_CHARS) -> str:
    text = visible(writable(text))
    return text if len(text) <= limit else (
        f"{text[:limit]}… ({len(text) - limit:,} more characters)")


def _side(message: Message | None, number: str | None, pair: DiffPair | None = None,
          drop: str = "", limit: int = MAX_CHARS) -> dict[str, Any] | None:
    """One message: its number, role, tool call id, whether edited by hand, and its text,
    or for a side of a changed pair its words (``drop``: the other side's op, left out)."""
    if message is None or number is None:
        return None
    side: dict[str, Any] = {"n": number, "role": _shown(str(message.get("role", "?")), 40),
                            "edited": edited_by_hand(message)}
    if message.get("role") == "tool":
        side["id"] = _shown(str(message.get("tool_call_id", "")), 200)
    if pair is None:
        side["text"] = _shown(message_text(message), limit)
        return side
    words, used = [], 0
    for op, text in pair.words:
        if op == drop:
            continue
        if used >= MAX_CHARS:
            words.append(["=", "… (more)"])
            break
        used += len(text)
        words.append([op, visible(writable(text))])
    side["words"] = words
    return side


def _row(pair: DiffPair) -> dict[str, Any]:
    left, right = pair.left_index, pair.right_index
    if pair.kind == "same":
        number = f"#{left}" if left == right else f"#{left} ↔ #{right}"
        return {"k": "same", "l": _side(pair.left, number, limit=SAME_CHARS)}
    changed = pair if pair.kind == "changed" else None
    return {"k": pair.kind,
            "l": _side(pair.left, None if left is None else f"#{left}", changed, "+"),
            "r": _side(pair.right, None if right is None else f"#{right}", changed, "-")}


def _fold(pairs: Sequence[DiffPair]) -> dict[str, Any]:
    return {"k": "fold", "count": len(pairs), "where": where(pairs)}


def rows_of(diff: BranchDiff) -> list[dict[str, Any]]:
    """The pairs as the view draws them: each run of identical ones folded (``diffhtml.runs``),
    its messages sent when it is unfolded (``DiffView.unfold``)."""
    return [_fold(run) if folded else _row(run[0]) for folded, run in runs(diff.pairs)]


def unfolded(diff: BranchDiff, at: int) -> list[dict[str, Any]]:
    """The messages of the fold ``rows_of(diff)[at]``, as the view draws them."""
    for index, (folded, run) in enumerate(runs(diff.pairs)):
        if index == at:
            return [_row(pair) for pair in run] if folded else []
    return []


def _spent(usage: Usage | None, seconds: float | None) -> str:
    if usage is None:
        return ""
    time = f" · {seconds:.2f} s" if seconds is not None else ""
    return (f"after the common part: {usage.requests} call(s), "
            f"{usage.total_tokens:,} tokens{time}")


def head_of(diff: BranchDiff) -> dict[str, Any]:
    """The names, lengths and spending of each side, and the count of each kind."""
    return {"names": [visible(writable(name)) for name in diff.names],
            "lengths": list(diff.lengths), "common": diff.common, "pairs": len(diff.pairs),
            "spent": [_spent(u, s) for u, s in zip(diff.usage, diff.seconds, strict=True)],
            "counts": {kind: diff.count(kind)
                       for kind in ("changed", "only-left", "only-right", "same")}}


class DiffView(anywidget.AnyWidget):
    """A ``BranchDiff`` drawn a page at a time (see the module)."""

    _esm = _HERE / "diffview.js"
    _css = CSS.removeprefix("<style>").removesuffix("</style>") + (
        _HERE / "diffview.css").read_text()
    head = traitlets.Dict().tag(sync=True)
    rows = traitlets.List(traitlets.Dict()).tag(sync=True)
    page_size = traitlets.Int(PAGE).tag(sync=True)

    def __init__(self, diff: BranchDiff, **kwargs: Any) -> None:
        super().__init__(head=head_of(diff), rows=rows_of(diff), **kwargs)
        self.diff = diff
        self.on_msg(self._on_msg)

    def _on_msg(self, _: Any, content: Any, buffers: Any = None) -> None:
        # A click on a fold: its messages, to that view (3,000 identical messages sent
        # up front made the state a megabyte the page parsed in one task).
        at = content.get("unfold") if isinstance(content, dict) else None
        if isinstance(at, int) and not isinstance(at, bool):
            self.send({"fold": at, "rows": unfolded(self.diff, at)})

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        # Beside the live view, the escaped static HTML (nbconvert, GitHub) and the text.
        bundle: Any = super()._repr_mimebundle_(**kwargs)
        data, metadata = bundle if isinstance(bundle, tuple) else (bundle, {})
        left, right = self.diff.names
        # (the page's table of contents parses that HTML again after each change of the
        # notebook: one page of it, the pairs that differ first)
        data = {**(data or {}), "text/html": branch_diff_html(self.diff, PAGE),
                "text/plain": f"{live_text(f'diff of {left!r} and {right!r}')}\n"
                              f"{visible(repr(self.diff))}"}
        return (data, metadata) if metadata else data


def shower(ext: Extension) -> Callable[[BranchDiff], Any]:
    """A diff's display in ``ext``'s cells (the extension registers it for ``BranchDiff``):
    this view in a kernel, else None (IPython shows the text and the static HTML)."""

    def show(diff: BranchDiff) -> Any:
        return DiffView(diff)._repr_mimebundle_() if ext.widgets else None

    return show

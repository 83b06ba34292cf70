"""A panel in a real kernel, seen as its view in the browser sees it: ``click`` sends what the
view sends on a click (``model.send({do: ...})``, a custom comm message), ``custom`` and
``rows`` read what the kernel sent back (the rows as the browser keeps them), ``wait_sent``
reads iopub until a message sent in the background has come. ``comm_id`` is the panel's
(``panel.model_id`` in the kernel).
"""

from __future__ import annotations

import queue
import time
from collections.abc import Callable
from typing import Any

from support.kernel_harness import Kernel


def click(kernel: Kernel, comm_id: str, **content: Any) -> None:
    """What the panel's view sends on a click: ``model.send({do: ..., ...})``."""
    kernel.send(comm_id, {"method": "custom", "content": content})


def custom(kernel: Kernel, comm_id: str, since: int = 0) -> list[dict[str, Any]]:
    """The custom messages the kernel sent to ``comm_id`` (rows, stream)."""
    kernel.drain(0.05)
    return [m["content"]["data"]["content"] for m in kernel.iopub_log[since:]
            if m["msg_type"] == "comm_msg" and m["content"]["comm_id"] == comm_id
            and m["content"]["data"].get("method") == "custom"]


def rows(kernel: Kernel, comm_id: str) -> list[dict[str, Any]]:
    """The rows as the browser keeps them: a reset empties them, a row replaces its ``k``."""
    kept: dict[int, dict[str, Any]] = {}
    for message in custom(kernel, comm_id):
        if message.get("t") != "rows":
            continue
        if message.get("reset"):
            kept.clear()
        for row in message["rows"]:
            kept[row["k"]] = row
    return [kept[k] for k in sorted(kept)]


def wait_sent(kernel: Kernel, check: Callable[[], Any], timeout: float = 20) -> Any:
    """Read iopub until ``check()`` holds (a message the kernel sends in the background)."""
    deadline = time.monotonic() + timeout
    while not (value := check()):
        assert time.monotonic() < deadline, "the kernel did not send it"
        try:
            kernel._absorb(kernel.kc.get_iopub_msg(timeout=0.1))
        except queue.Empty:
            pass
    return value

"""What the kernel's widgets send to the browser, read from a recording comm (the third-party
``comm`` module is the process boundary between the kernel and the browser)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

import comm
import pytest
from comm.base_comm import BaseComm


@dataclass
class Sent:
    at: float
    kind: str  # comm_open, comm_msg, comm_close
    data: Any
    size: int
    comm_id: str = ""


class RecordingComm(BaseComm):  # type: ignore[misc]
    """The kernel's comm to the browser, keeping every message it would send, as JSON then."""

    log: ClassVar[list[Sent]] = []

    def publish_msg(self, msg_type: str, data: Any = None, metadata: Any = None,
                    buffers: Any = None, **keys: Any) -> None:
        wire = json.dumps([data, metadata], default=str)
        self.log.append(Sent(time.monotonic(), msg_type, json.loads(wire)[0], len(wire),
                             self.comm_id))


@dataclass
class Wire:
    log: list[Sent] = field(default_factory=list)

    def custom(self, kind: str | None = None, comm_id: str | None = None) -> list[dict[str, Any]]:
        """The custom messages sent (rows, stream), of ``kind`` and by comm ``comm_id`` if
        given."""
        return [s.data["content"] for s in self.log
                if isinstance(s.data, dict) and s.data.get("method") == "custom"
                and (kind is None or s.data["content"].get("t") == kind)
                and (comm_id is None or s.comm_id == comm_id)]

    def clear(self) -> None:
        self.log.clear()


def record_comms(monkeypatch: pytest.MonkeyPatch) -> Wire:
    """Every message the widgets made from here on send to the browser."""
    recorded = Wire()
    monkeypatch.setattr(comm, "create_comm", RecordingComm)  # ipywidgets opens comms with it
    monkeypatch.setattr(RecordingComm, "log", recorded.log)
    return recorded


def stream_states(messages: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """The streamed text a panel's view shows after each custom message that sets it, as
    ``panel.js`` keeps it, with that message: a ``stream`` message adds its text or replaces
    it, a ``rows`` message carrying ``stream`` replaces it (a hello's, or the paced message
    that brings a stored reply's row and clears its stream)."""
    shown, states = "", []
    for message in messages:
        if message.get("t") == "stream":
            shown = shown + message["add"] if "add" in message else message.get("text", "")
        elif message.get("t") == "rows" and "stream" in message:
            shown = message["stream"]
        else:
            continue
        states.append((shown, message))
    return states

"""A real Jupyter kernel driven the way JupyterLab drives it: execute requests, and comm
messages for widget clicks and edits. Used by the notebook-layer tests.

    with Kernel() as kernel:
        kernel.execute("import ipywidgets as w; b = w.Button(); b.add_class('go'); display(b)")
        kernel.click("go")                       # the comm message a browser sends on click
        kernel.set_value("my-text", "hello")     # an edit in a Text/Textarea
        assert kernel.eval("b.description") == ...
        msg_id = kernel.start("slow()")          # send a cell and act while it runs ...
        result = kernel.collect(msg_id)          # ... then what it produced
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jupyter_client.manager import KernelManager


@dataclass
class Result:
    """What one execute request produced."""

    stdout: str = ""
    stderr: str = ""
    outputs: list[dict[str, Any]] = field(default_factory=list)
    error: dict[str, Any] | None = None

    @property
    def data(self) -> list[dict[str, Any]]:
        """The ``data`` bundles of display_data / execute_result outputs."""
        return [o["data"] for o in self.outputs if "data" in o]


# The repository's opt-in IPython config: its profile_default loads fragola_nb at kernel start.
CONFIG = Path(__file__).resolve().parents[2] / "jupyter-config" / "ipython"


def startup_profile(ipython_dir: Path) -> dict[str, str]:
    """``Kernel(env=...)`` for a kernel that loads fragola_nb through the opt-in startup file
    (no ``%load_ext``): the repository's profile_default copied into ``ipython_dir``."""
    shutil.copytree(CONFIG / "profile_default", ipython_dir / "profile_default")
    return {"IPYTHONDIR": str(ipython_dir)}


def _patch(state: dict[str, Any], message: Any) -> None:
    """The evaluation matrix's ``{"do": "patch", "cells": [[i, cell]], "flags": [[i, flag
    or None]]}``, applied as evaluation.js applies it."""
    if not isinstance(message, dict) or message.get("do") != "patch":
        return
    for at, cell in message.get("cells", []):
        state.setdefault("cells", [])[at] = cell
    flags = state.setdefault("flags", {})
    for at, flag in message.get("flags", []):
        if flag is None:
            flags.pop(str(at), None)
        else:
            flags[str(at)] = flag


class Kernel:
    """A python3 kernel in a subprocess, with a model of its widgets built from iopub."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        self._env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
        self._env.update(env or {})
        self.widgets: dict[str, dict[str, Any]] = {}  # comm id -> latest state
        self.iopub_log: list[dict[str, Any]] = []
        self._started: dict[str, int] = {}  # msg id of a cell -> where its messages begin
        self._replies: dict[str, dict[str, Any]] = {}  # msg id -> its execute_reply content

    def __enter__(self) -> Kernel:
        self.km = KernelManager(kernel_name="python3")
        self.km.start_kernel(env=self._env)
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=60)
        return self

    def __exit__(self, *exc: object) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)

    # -- iopub --------------------------------------------------------------------------------

    def _absorb(self, msg: dict[str, Any]) -> None:
        self.iopub_log.append(msg)
        kind, content = msg["msg_type"], msg["content"]
        if kind == "comm_open":
            self.widgets[content["comm_id"]] = dict(content["data"].get("state", {}))
        elif kind == "comm_msg":
            data = content.get("data", {})
            if data.get("method") == "update" and content["comm_id"] in self.widgets:
                self.widgets[content["comm_id"]].update(data.get("state", {}))
            elif data.get("method") == "custom" and content["comm_id"] in self.widgets:
                said = data.get("content")
                if isinstance(said, dict) and said.get("t") == "rows" and isinstance(
                        said.get("state"), dict):  # a panel's paced traits, as panel.js sets them
                    self.widgets[content["comm_id"]].update(said["state"])
                _patch(self.widgets[content["comm_id"]], said)
        elif kind == "comm_close":
            self.widgets.pop(content["comm_id"], None)

    def drain(self, timeout: float = 0.2) -> None:
        """Read whatever iopub has now (widget updates sent in the background)."""
        while True:
            try:
                self._absorb(self.kc.get_iopub_msg(timeout=timeout))
            except queue.Empty:
                return

    def start(self, code: str) -> str:
        """Send a cell without waiting for it (the caller acts while it runs); its msg id."""
        msg_id = str(self.kc.execute(code))
        self._started[msg_id] = len(self.iopub_log)
        return msg_id

    def collect(self, msg_id: str, timeout: float = 60, allow_error: bool = False) -> Result:
        """Wait for the cell ``msg_id`` to finish; what it produced.

        Built from ``iopub_log``, so what a ``drain`` or ``eval`` read while the cell ran counts.
        """
        first = self._started.pop(msg_id, 0)

        def idle(msg: dict[str, Any]) -> bool:
            return (msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "status"
                    and msg["content"]["execution_state"] == "idle")

        done = any(idle(msg) for msg in self.iopub_log[first:])
        deadline = time.monotonic() + timeout
        while not done:
            if time.monotonic() >= deadline:
                raise TimeoutError(f"the kernel did not finish cell {msg_id} within {timeout}s")
            try:
                msg = self.kc.get_iopub_msg(timeout=0.5)
            except queue.Empty:
                continue
            self._absorb(msg)
            done = idle(msg)
        result = Result()
        for msg in self.iopub_log[first:]:
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "stream":
                if content["name"] == "stdout":
                    result.stdout += content["text"]
                else:
                    result.stderr += content["text"]
            elif kind in ("display_data", "execute_result", "update_display_data"):
                result.outputs.append(content)
            elif kind == "error":
                result.error = content
        if result.error is not None and not allow_error:
            raise AssertionError("cell raised:\n" + "\n".join(result.error["traceback"]))
        return result

    def execute(self, code: str, timeout: float = 60, allow_error: bool = False) -> Result:
        """Run a cell and wait for it: ``collect(start(code))``."""
        msg_id = self.start(code)
        try:
            return self.collect(msg_id, timeout, allow_error)
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}:\n{code}") from None

    def eval(self, expression: str) -> Any:
        """The value of a JSON-serialisable expression in the kernel."""
        out = self.execute(f"import json as _j; print(_j.dumps({expression}))").stdout
        return json.loads(out.strip().splitlines()[-1])

    def reply(self, msg_id: str, timeout: float = 60) -> dict[str, Any]:
        """The execute_reply of cell ``msg_id`` (``status``: ok, error or aborted)."""
        deadline = time.monotonic() + timeout
        while msg_id not in self._replies:
            if time.monotonic() >= deadline:
                raise TimeoutError(f"no execute_reply to {msg_id} within {timeout}s")
            try:
                msg = self.kc.get_shell_msg(timeout=0.5)
            except queue.Empty:
                continue
            if msg["msg_type"] == "execute_reply":
                self._replies[msg["parent_header"]["msg_id"]] = msg["content"]
        return self._replies.pop(msg_id)

    # -- widgets ------------------------------------------------------------------------------

    def find(self, css_class: str, *, nth: int = -1) -> str:
        """The comm id of the widget carrying ``css_class`` (the newest one by default)."""
        self.drain(0.05)
        ids = [cid for cid, state in self.widgets.items()
               if css_class in (state.get("_dom_classes") or ())]
        if not ids:
            raise LookupError(f"no widget with class {css_class!r}")
        return ids[nth]

    def state(self, css_class: str, *, nth: int = -1) -> dict[str, Any]:
        return self.widgets[self.find(css_class, nth=nth)]

    def send(self, comm_id: str, data: dict[str, Any]) -> None:
        self.kc.shell_channel.send(
            self.kc.session.msg("comm_msg", {"comm_id": comm_id, "data": data})
        )

    def click(self, css_class: str, *, nth: int = -1) -> None:
        """What a browser sends when a person clicks a Button."""
        self.send(self.find(css_class, nth=nth),
                  {"method": "custom", "content": {"event": "click"}})

    def panel(self, *, nth: int = -1) -> str:
        """The comm id of an agent panel (the newest by default)."""
        self.drain(0.05)
        ids = [cid for cid, state in self.widgets.items()
               if str(state.get("_anywidget_id", "")).endswith(".AgentPanel")]
        if not ids:
            raise LookupError("no agent panel")
        return ids[nth]

    def act(self, action: str, *, nth: int = -1, **fields: Any) -> None:
        """What a panel's view sends when a person uses a control (``{"do": action}``)."""
        self.send(self.panel(nth=nth),
                  {"method": "custom", "content": {"do": action, **fields}})

    def set_value(self, css_class: str, value: Any, *, nth: int = -1) -> None:
        """What a browser sends when a person edits a Text, Textarea or Dropdown."""
        comm_id = self.find(css_class, nth=nth)
        self.send(comm_id, {"method": "update", "state": {"value": value}, "buffer_paths": []})
        self.widgets[comm_id]["value"] = value

    def send_state(self, comm_id: str, state: dict[str, Any]) -> None:
        """What a browser (or an anywidget view) sends when it changes synced traits."""
        self.send(comm_id, {"method": "update", "state": state, "buffer_paths": []})
        self.widgets[comm_id].update(state)

    def wait_for(self, expression: str, timeout: float = 20) -> Any:
        """Poll ``expression`` in the kernel until it is truthy; returns its value."""
        deadline = time.monotonic() + timeout
        value = None
        while time.monotonic() < deadline:
            value = self.eval(expression)
            if value:
                return value
            time.sleep(0.1)
        raise TimeoutError(f"{expression} stayed {value!r} for {timeout}s")

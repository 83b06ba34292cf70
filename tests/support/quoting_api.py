"""A Chat Completions API on loopback that answers (HTTP 200) by quoting back the credentials
it was sent: the key in ``Authorization`` and the value of every ``x-*-key`` header, in the
assistant's text (a judge, known by its marker, gets them in its JSON verdict's reason). So
they reach whatever fragola_nb keeps of an answer: rows, grades, histories, files, views.

``AGENT_KEY``, ``VARIANT_KEY`` and ``JUDGE_KEY`` have no well-known shape: only the
credentials in use (``fragola_nb.base.inuse``) can hide them.

    api = QuotingAPI()
    fragola = Fragola(api_key=AGENT_KEY, base_url=api.base_url, max_retries=0)
    ...
    api.close()
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

AGENT_KEY = "agent-gw-4Tq8Lz2Wm6Rc"
VARIANT_KEY = "variant-hdr-7Pk3Xn9Ds1Fb"
JUDGE_KEY = "judge-gw-2Hv5Qy8Jc4Nt"
KEYS = (AGENT_KEY, VARIANT_KEY, JUDGE_KEY)
VARIANTS = {"plain": {}, "proxied": {"model_settings": {
    "extra_headers": {"X-Proxy-Key": VARIANT_KEY}}}}
"""Two variants, the second sending its own credential in a header named for no vendor."""


def quoted(headers: Any) -> str:
    """The credentials of a request's headers, as a server that echoes them would write."""
    said = [headers.get("Authorization", "").removeprefix("Bearer ")]
    said += [value for name, value in headers.items()
             if name.lower().startswith("x-") and name.lower().endswith("-key")]
    return " ".join(said)


def _completion(body: dict[str, Any], text: str) -> dict[str, Any]:
    return {"id": "chatcmpl-quoting", "object": "chat.completion", "created": 0,
            "model": body.get("model", "m"),
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}}


def _chunks(body: dict[str, Any], text: str) -> list[dict[str, Any]]:
    base = {"id": "chatcmpl-quoting", "object": "chat.completion.chunk", "created": 0,
            "model": body.get("model", "m")}
    return [
        {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": text},
                              "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {**base, "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 5,
                                          "total_tokens": 8}},
    ]


def answer(headers: Any, body: dict[str, Any]) -> str:
    """What the server says: a judge's verdict quoting the credentials, else a plain echo
    after as many dots as the question has ``#`` (to put a key where a view cuts text)."""
    keys = quoted(headers)
    system = " ".join(str(m.get("content")) for m in body.get("messages", [])
                      if m.get("role") == "system")
    if "[fragola_nb judge]" in system:
        return json.dumps({"score": 5, "reason": f"fine; I was sent {keys}"})
    asked = [m for m in body.get("messages", []) if m.get("role") == "user"]
    padding = "." * int(str(asked[-1].get("content")).count("#")) if asked else ""
    return f"{padding}You sent me {keys}, thanks."


class QuotingAPI:
    """The server, on 127.0.0.1 in a thread of its own."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(size) or b"{}")
                text = answer(self.headers, body)
                if body.get("stream"):
                    events = [f"data: {json.dumps(chunk)}\n\n" for chunk in _chunks(body, text)]
                    data = "".join([*events, "data: [DONE]\n\n"]).encode()
                    kind = "text/event-stream"
                else:
                    data, kind = json.dumps(_completion(body, text)).encode(), "application/json"
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def fragola_on(api: QuotingAPI, key: str) -> Any:
    """A ``Fragola`` that sends ``key`` to ``api`` (the conftest's ``api`` fixture), with no
    retry."""
    from fragola_nb import Fragola

    return Fragola(api_key=key, base_url=api.base_url, max_retries=0)

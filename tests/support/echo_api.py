"""A Chat Completions API on loopback that quotes back what it was sent, as real ones do when
they refuse a request: a 401 echoing the key (``rejecting_key``), FastAPI's 422 quoting a
field's ``"input"`` (``fastapi_422``). ``KEY`` and ``BODY_TOKEN`` are credentials of no
well-known shape, so only fragola_nb's redaction by value can hide them.

    api = EchoAPI(rejecting_key)
    fragola = Fragola(api_key=KEY, base_url=api.base_url, max_retries=0)
    ...
    api.close()
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

KEY = "corp-gw-7Q2xL9pZ4mN8"  # a gateway key of no well-known shape
BODY_TOKEN = "opaque-tok-5Kd8Wq3Zr1"  # sent in extra_body, no well-known shape either

Answer = Callable[[str, dict[str, Any]], tuple[int, dict[str, Any]]]


class EchoAPI:
    """A Chat Completions endpoint on 127.0.0.1 whose answer ``answer(auth, body)`` builds
    (status, JSON body): it sees the Authorization header and the JSON the client sent."""

    def __init__(self, answer: Answer) -> None:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(size) or b"{}")
                status, said = outer.answer(self.headers.get("Authorization", ""), body)
                data = json.dumps(said).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.answer = answer
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()



def rejecting_key(auth: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    key = auth.removeprefix("Bearer ")
    return 401, {"error": {"message": f"Incorrect API key provided: {key}", "type": "auth",
                           "code": "invalid_api_key"}}


def fastapi_422(auth: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """FastAPI's validation error for a field it does not take: it quotes the field's value."""
    return 422, {"detail": [
        {"type": "extra_forbidden", "loc": ["body", name], "msg": "Extra inputs are not permitted",
         "input": value}
        for name, value in body.items() if name not in ("model", "messages", "stream")]}



"""An HTTP client answering as the lean server does, inside this process (no socket, no
server), and fragola_nb's workload on a given HTTP client: for ``call_floor.own_cost``, where
what is left between two ways is their own code."""

from __future__ import annotations

import json
from typing import Any

import httpx2
from workloads import MODEL, TIMEOUT, Run, prompt


def make_fragola_on(base_url: str, http: Any) -> Run:
    """``workloads.make_fragola`` with the HTTP client given."""
    from workloads import add

    from fragola_nb import Fragola, tool

    fragola = Fragola(model=MODEL, api_key="bench", base_url=base_url, max_retries=0,
                      timeout=TIMEOUT, http_client=http)
    add_tool = tool(add)

    async def run(k: int, stream: bool) -> None:
        agent = fragola.agent("bench", tools=[add_tool], max_step=k + 1,
                              model_settings={"stream": True} if stream else None)
        state = await agent.user_message(prompt(k))
        assert state.outcome == "finished", state

    run.aclose = http.aclose  # type: ignore[attr-defined]
    return run


class _Frames(httpx2.AsyncByteStream):
    def __init__(self, frames: list[bytes]) -> None:
        self.frames = frames

    async def __aiter__(self) -> Any:
        for frame in self.frames:
            yield frame


def in_process_http() -> httpx2.AsyncClient:
    """An HTTP client whose transport answers as the lean server does, in this process (no
    socket, no server): what is left of a call is the clients' own code."""
    from lean_server import completion_body, stream_chunks

    def handle(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        if body.get("stream"):
            return httpx2.Response(200, headers={"content-type": "text/event-stream"},
                                   stream=_Frames(stream_chunks(body)[0]))
        return httpx2.Response(200, headers={"content-type": "application/json"},
                               content=completion_body(body))

    return httpx2.AsyncClient(transport=httpx2.MockTransport(handle))

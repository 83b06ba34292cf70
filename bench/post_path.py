"""``create()`` against the lower-level ``client.post()`` with the same plain-dict body.

``client.chat.completions.create(**body)`` runs ``maybe_transform`` over the whole body (each
message is walked once per member of the message-type union) and builds pydantic models
from the response. ``client.post("/chat/completions", body=body, cast_to=object, ...)``
keeps the same client (auth, retries, timeouts, errors, connection pool) and skips both:
the body is sent as given and the response comes back as the parsed JSON dict.

For Chat Completions the transform changes nothing in a plain-dict body: no parameter type
carries an alias or a format (``transform_is_identity`` scans them), so skipping it is
lossless for what fragola_nb sends.

This module holds the micro-benchmark (both paths, converted to fragola_nb's assistant
message dict) and ``use_post_path(fragola)``, a prototype of the change in
``ModelClient.complete`` used by ``overhead.py`` for its "prototype" row. The prototype lives
in bench/ only; fragola_nb is not changed.

    python bench/post_path.py [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import time
from typing import Any

import openai
from common import LeanServer, median
from workloads import FLOOR_TOOLS, MODEL, client

from fragola_nb.model_client import ModelClient

OPTIONS: Any = {"security": {"bearer_auth": True}}  # what create() passes
STREAM_CLS: Any = openai.AsyncStream[object]  # chunks come back as plain dicts


# -- the two paths, each ending in fragola_nb's stored assistant message ------------------

async def via_create(model_client: ModelClient, body: dict[str, Any]) -> dict[str, Any]:
    """fragola_nb's own path, as it is in the tree: ``ModelClient.complete``."""
    return await model_client.complete(body)


def assistant_message(content: Any, calls: list[dict[str, Any]], refusal: Any) -> dict[str, Any]:
    """fragola_nb's stored form of an assistant reply (as ``model_client`` builds it)."""
    message: dict[str, Any] = {"role": "assistant"}
    if content or not calls:
        message["content"] = content or ""
    if refusal:
        message["refusal"] = refusal
    if calls:
        message["tool_calls"] = calls
    return message


async def via_post(bare: openai.AsyncOpenAI, body: dict[str, Any]) -> dict[str, Any]:
    if body.get("stream"):
        stream = await bare.post("/chat/completions", body=body, cast_to=object,
                                 options=OPTIONS, stream=True, stream_cls=STREAM_CLS)
        return await _collect(stream)
    data = await bare.post("/chat/completions", body=body, cast_to=object, options=OPTIONS)
    return _message_from_dict(data)


def _message_from_dict(data: Any) -> dict[str, Any]:
    message = data["choices"][0]["message"]
    calls = [
        {"id": c["id"], "type": "function",
         "function": {"name": c["function"]["name"], "arguments": c["function"]["arguments"]}}
        for c in message.get("tool_calls") or ()
        if c.get("function") is not None
    ]
    return assistant_message(message.get("content"), calls, message.get("refusal"))


async def _collect(stream: Any) -> dict[str, Any]:
    text: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    finished = False
    try:
        async for chunk in stream:
            choices = chunk.get("choices")
            if not choices:
                continue
            choice = choices[0]
            delta = choice.get("delta") or {}
            if delta.get("content"):
                text.append(delta["content"])
            for part in delta.get("tool_calls") or ():
                call = calls.setdefault(part.get("index", 0), {
                    "id": "", "type": "function", "function": {"name": "", "arguments": ""}})
                if part.get("id"):
                    call["id"] = part["id"]
                function = part.get("function") or {}
                if function.get("name"):
                    call["function"]["name"] += function["name"]
                if function.get("arguments"):
                    call["function"]["arguments"] += function["arguments"]
            if choice.get("finish_reason") is not None:
                finished = True
    finally:
        await stream.close()
    assert finished
    return assistant_message("".join(text), [calls[i] for i in sorted(calls)], None)


def use_post_path(fragola: Any) -> None:
    """Prototype: make ``fragola``'s ModelClient send through ``post()`` (no listeners on
    chunks in this benchmark, so ``on_chunk`` is ignored)."""
    model_client: ModelClient = fragola._model

    async def complete(request: dict[str, Any], on_chunk: Any = None) -> dict[str, Any]:
        return await via_post(model_client.client(), request)

    model_client.complete = complete  # type: ignore[method-assign]


# -- checks -------------------------------------------------------------------------------

def transform_is_identity() -> int:
    """Scan the Chat Completions parameter types for an alias or a format; return how many
    types were scanned (raises if any would make the transform change a dict body)."""
    import typing_extensions as te
    from openai._utils._transform import PropertyInfo
    from openai.types.chat import completion_create_params as params

    seen: set[int] = set()

    def walk(tp: Any, path: str) -> None:
        if id(tp) in seen:
            return
        seen.add(id(tp))
        for meta in getattr(tp, "__metadata__", ()):
            if isinstance(meta, PropertyInfo) and (meta.alias or meta.format):
                raise AssertionError(f"{path} has {meta}: the transform is not an identity")
        for arg in te.get_args(tp):
            walk(arg, path)
        if te.is_typeddict(tp):
            for key, hint in te.get_type_hints(tp, include_extras=True).items():
                walk(hint, f"{path}.{key}")

    walk(params.CompletionCreateParamsStreaming, "params")
    walk(params.CompletionCreateParamsNonStreaming, "params")
    return len(seen)


def history(k: int, content_null: bool = False) -> list[dict[str, Any]]:
    """The request history of the last call of a K-step run (2K + 1 messages); with
    ``content_null`` an assistant message that calls tools says ``"content": None`` (as the
    peers send it) instead of leaving ``content`` out (as fragola_nb does)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": f"bench steps={k}"}]
    for n in range(k):
        call = {"id": f"call_{n}", "type": "function",
                "function": {"name": "add", "arguments": f'{{"x":{n}}}'}}
        assistant: dict[str, Any] = {"role": "assistant", "tool_calls": [call]}
        if content_null:
            assistant = {"role": "assistant", "content": None, "tool_calls": [call]}
        messages.append(assistant)
        messages.append({"role": "tool", "tool_call_id": f"call_{n}", "content": str(n + 1)})
    return messages


# -- the micro-benchmark ------------------------------------------------------------------

async def measure(server: LeanServer, sizes: tuple[int, ...] = (0, 5, 20, 100),
                  reps: int = 7, calls: int = 8) -> list[dict[str, Any]]:
    bare = client(server.base_url)
    model_client = ModelClient(client=bare)
    rows = []
    for stream in (False, True):
        for k in sizes:
            body: dict[str, Any] = {"model": MODEL, "messages": history(k), "tools": FLOOR_TOOLS}
            if stream:
                body["stream"] = True
            a, b = await via_create(model_client, body), await via_post(bare, body)
            assert a == b, (a, b)  # the same message either way
            paths = (("create", via_create, model_client), ("post", via_post, bare))
            for _ in range(3):
                for _, path, target in paths:
                    await path(target, body)
            cpu: dict[str, list[float]] = {"create": [], "post": []}
            for _ in range(reps):
                for name, path, target in paths:
                    gc.collect()
                    t0 = time.process_time()
                    for _ in range(calls):
                        await path(target, body)
                    cpu[name].append((time.process_time() - t0) / calls * 1e6)
            ratio = median([p / c for p, c in zip(cpu["post"], cpu["create"], strict=True)])
            rows.append({"stream": stream, "messages": len(body["messages"]),
                         "create_us": median(cpu["create"]), "post_us": median(cpu["post"]),
                         "post_ratio": ratio})
    await bare.close()
    return rows


def transform_alone(sizes: tuple[int, ...] = (5, 20, 100)) -> list[dict[str, Any]]:
    """CPU of the openai client's ``maybe_transform`` alone on a K-step history, with the
    tool-calling assistant messages written without ``content`` and with ``content: null``."""
    import timeit

    from openai._utils._transform import maybe_transform
    from openai.types.chat import completion_create_params as params

    shape = params.CompletionCreateParamsNonStreaming
    rows = []
    for k in sizes:
        bodies = {key: {"model": MODEL, "messages": history(k, null), "tools": FLOOR_TOOLS}
                  for key, null in (("omitted_us", False), ("null_us", True))}
        number = max(1, 100 // (k + 1))
        best = dict.fromkeys(bodies, float("inf"))
        for _ in range(15):  # interleaved, so both shapes see the same machine; CPU time
            for key, body in bodies.items():
                t = timeit.timeit(lambda body=body: maybe_transform(body, shape), number=number,
                                  timer=time.process_time)
                best[key] = min(best[key], t / number * 1e6)
        rows.append({"messages": 2 * k + 1, **best})
    return rows


def transform_table(rows: list[dict[str, Any]]) -> str:
    out = ["| messages | maybe_transform µs, content omitted (fragola_nb) | "
           "with `content: null` (the peers) |", "| ---: | ---: | ---: |"]
    for r in rows:
        out.append(f"| {r['messages']} | {r['omitted_us']:,.0f} | {r['null_us']:,.0f} |")
    return "\n".join(out)


def table(rows: list[dict[str, Any]]) -> str:
    out = ["| mode | messages in request | create() CPU µs | post() CPU µs | saved µs "
           "| post/create |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        out.append(f"| {'stream' if r['stream'] else 'non-stream'} | {r['messages']} | "
                   f"{r['create_us']:.0f} | {r['post_us']:.0f} | "
                   f"{r['create_us'] - r['post_us']:.0f} | {r['post_ratio']:.2f} |")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json")
    args = parser.parse_args()
    scanned = transform_is_identity()
    with LeanServer() as server:
        rows = asyncio.run(measure(server))
    result = {"rows": rows, "types_scanned": scanned, "transform": transform_alone()}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    print(f"transform is an identity on dict bodies ({scanned} parameter types scanned)")
    print(table(rows))
    print(transform_table(result["transform"]))


if __name__ == "__main__":
    main()

"""Why fragola_nb costs less than the floor: ``create()`` against the ``post()`` it sends with.

``client.chat.completions.create(**body)`` runs ``maybe_transform`` over the whole body (each
message is walked once per member of the message-type union) and builds pydantic models
from the response. fragola_nb's ``ModelClient.complete`` sends through
``client.post("/chat/completions", body=body, cast_to=object, ...)``: the same client (auth,
retries, timeouts, errors, connection pool) without both, so the body is sent as given and
the answer comes back as the parsed JSON dict.

For Chat Completions the transform changes nothing in a plain-dict body: no parameter type
carries an alias or a format (``transform_is_identity`` scans them), so skipping it is
lossless for what fragola_nb sends.

This module holds the micro-benchmark: one request body, sent by the floor's way
(``create()``, then the reply turned into a message dict as the floor's loop does) and by
fragola_nb's ``ModelClient.complete``; both must give the same message.

    python bench/post_path.py [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import time
from typing import Any

import openai
from common import LeanServer, median, report
from workloads import FLOOR_TOOLS, MODEL, client

from fragola_nb.models.client import ModelClient, assistant_message

# -- the two paths, each ending in fragola_nb's stored assistant message ------------------


async def via_fragola(model_client: ModelClient, body: dict[str, Any]) -> dict[str, Any]:
    """fragola_nb's path: ``ModelClient.complete`` (``client.post()``)."""
    return await model_client.complete(body)


async def via_create(bare: openai.AsyncOpenAI, body: dict[str, Any]) -> dict[str, Any]:
    """The floor's path: ``create()`` and the pydantic objects it returns."""
    if body.get("stream"):
        return await _collect(await bare.chat.completions.create(**body))
    response = await bare.chat.completions.create(**body)
    message = response.choices[0].message
    calls = [
        {"id": c.id, "type": "function",
         "function": {"name": c.function.name, "arguments": c.function.arguments}}
        for c in message.tool_calls or ()
        if c.type == "function"
    ]
    return assistant_message(message.content, calls, message.refusal)


async def _collect(stream: Any) -> dict[str, Any]:
    text: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    finished = False
    async for chunk in stream:
        if not chunk.choices:
            continue
        choice = chunk.choices[0]
        if choice.delta.content:
            text.append(choice.delta.content)
        for part in choice.delta.tool_calls or ():
            call = calls.setdefault(part.index, {
                "id": "", "type": "function", "function": {"name": "", "arguments": ""}})
            if part.id:
                call["id"] = part.id
            if part.function is not None:
                call["function"]["name"] += part.function.name or ""
                call["function"]["arguments"] += part.function.arguments or ""
        if choice.finish_reason is not None:
            finished = True
    assert finished
    return assistant_message("".join(text), [calls[i] for i in sorted(calls)], None)


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
    model_client = ModelClient(client=bare)  # the very same openai client
    rows = []
    for stream in (False, True):
        for k in sizes:
            body: dict[str, Any] = {"model": MODEL, "messages": history(k), "tools": FLOOR_TOOLS}
            if stream:
                body["stream"] = True
            a, b = await via_create(bare, body), await via_fragola(model_client, body)
            assert a == b, (a, b)  # the same message either way
            paths = (("create", via_create, bare), ("post", via_fragola, model_client))
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
    out = ["| mode | messages in request | create() CPU µs | fragola_nb post() CPU µs "
           "| saved µs | post/create |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
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
    report(result, "\n".join((
        f"transform is an identity on dict bodies ({scanned} parameter types scanned)",
        table(rows), transform_table(result["transform"]))), args.json)


if __name__ == "__main__":
    main()

"""Where the client's CPU goes, per model call, for one library on the overhead workload.

A statistical profile (pyinstrument, sampling every 100 µs) of many conversations. Each
sample is charged to the innermost frame that belongs to a known layer (the openai client's
request transform, its response models, its SSE stream, the HTTP stack, fragola_nb, the
benchmark loop...); frames of generic code (typing, json, pydantic, the stdlib) are charged
to the layer that called them. Time the loop spends waiting in ``select`` is not CPU and is
left out. The shares are then scaled to the CPU per call measured without the profiler.

    python bench/profile_calls.py [--library fragola_nb] [--k 20] [--stream] [--top 12]
    python bench/profile_calls.py --own [--k 20]   # fragola_nb alone, the model stubbed
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections import defaultdict
from typing import Any

from common import LeanServer
from workloads import LIBRARIES

# (path fragment, layer): the first fragment found in a frame's file path names its layer.
LAYERS: list[tuple[str, str | None]] = [
    ("openai/_utils/_transform.py", "openai: maybe_transform of the request"),
    ("openai/_models.py", "openai: _models.py (response models, request options)"),
    ("openai/_streaming.py", "openai: SSE stream"),
    ("openai/_response.py", "openai: response parsing"),
    ("openai/", "openai: build request, options, headers, retries"),
    ("httpx2/", "HTTP: httpx2/httpcore2/h11/anyio"),
    ("httpcore2/", "HTTP: httpx2/httpcore2/h11/anyio"),
    ("/h11/", "HTTP: httpx2/httpcore2/h11/anyio"),
    ("/anyio/", "HTTP: httpx2/httpcore2/h11/anyio"),
    ("/sniffio/", "HTTP: httpx2/httpcore2/h11/anyio"),
    ("fragola_nb/", "fragola_nb"),
    ("/agents/", "openai-agents"),
    ("/pydantic_ai/", "pydantic-ai"),
    ("/pydantic_graph/", "pydantic-ai"),
    ("/bench/workloads.py", "benchmark loop (the floor's own code)"),
    ("/bench/lean_server.py", "stub model (bench)"),
    ("/bench/profile_calls.py", "stub model (bench)"),
    ("asyncio/", "asyncio event loop"),
    ("selectors.py", "asyncio event loop"),
]
# Everything below a frame of these layers is theirs (their helpers live in other openai files).
STICKY = {"openai: maybe_transform of the request",
          "openai: _models.py (response models, request options)"}
IDLE_FUNCTIONS = {"select", "poll", "epoll.poll", "[await]", "[out-of-context]"}


def layer_of(file_path: str | None) -> str | None:
    path = (file_path or "").replace("\\", "/")
    for fragment, layer in LAYERS:
        if fragment in path:
            return layer
    return None


def charge(frame: Any, layer: str, owner: str, by_layer: dict[str, float],
           by_function: dict[str, float]) -> None:
    """Walk pyinstrument's tree, charging each frame's own time to the innermost layer."""
    here = layer_of(frame.file_path)
    if here is not None and layer not in STICKY:
        layer = here
        if here in ("fragola_nb", "benchmark loop (the floor's own code)"):
            owner = f"{frame.function} ({frame.file_path_short}:{frame.line_no})"
    own = frame.total_self_time
    if frame.function in IDLE_FUNCTIONS or (frame.is_synthetic and "await" in frame.function):
        layer = "idle"
    by_layer[layer] += own
    if layer == "fragola_nb":
        by_function[owner] += own
    for child in frame.children:
        charge(child, layer, owner, by_layer, by_function)


async def profiled(run: Any, k: int, stream: bool, runs: int
                   ) -> tuple[dict[str, float], dict[str, float]]:
    """Profile ``runs`` conversations, then close ``run``: seconds by layer (idle left out)
    and by fragola_nb function."""
    from pyinstrument import Profiler

    profiler = Profiler(interval=0.0001, async_mode="disabled")
    profiler.start()
    for _ in range(runs):
        await run(k, stream)
    profiler.stop()
    await run.aclose()
    by_layer: dict[str, float] = defaultdict(float)
    by_function: dict[str, float] = defaultdict(float)
    root = profiler.last_session.root_frame() if profiler.last_session else None
    if root is not None:
        charge(root, "other", "", by_layer, by_function)
    by_layer.pop("idle", None)
    return by_layer, by_function


async def profile(library: str, k: int, stream: bool, runs: int, base_url: str
                  ) -> dict[str, Any]:
    run = LIBRARIES[library](base_url)
    for _ in range(3):
        await run(k, stream)
    cpu0 = time.process_time()
    for _ in range(runs):
        await run(k, stream)
    cpu_per_call = (time.process_time() - cpu0) / (runs * (k + 1)) * 1e6
    by_layer, by_function = await profiled(run, k, stream, runs)
    total = sum(by_layer.values()) or 1.0
    layers = sorted(((v / total, name) for name, v in by_layer.items()), reverse=True)
    fragola = sorted(((v / total, name) for name, v in by_function.items()), reverse=True)
    return {
        "library": library, "k": k, "stream": stream, "cpu_us_per_call": cpu_per_call,
        "layers": [{"layer": n, "share": s, "us_per_call": s * cpu_per_call} for s, n in layers],
        "fragola_functions": [{"function": n, "share": s, "us_per_call": s * cpu_per_call}
                              for s, n in fragola],
    }


def stubbed_fragola() -> Any:
    """``workloads.make_fragola`` with ``ModelClient._paced`` (which hands the built body to
    the openai client) replaced by a stub answering what the lean server would: no openai
    client, no HTTP; fragola_nb's request building and credential bookkeeping still run."""
    from lean_server import _usage, answer
    from workloads import make_fragola

    from fragola_nb.models.client.reported import ModelReply, usage_of

    async def stub(client: Any, body: dict[str, Any], options: Any, on_chunk: Any,
                   exchange: Any, told: Any, retried: Any) -> ModelReply:
        content, calls, _ = answer(body)
        message: dict[str, Any] = {"role": "assistant"}
        if content:
            message["content"] = content
        if calls:
            message["tool_calls"] = [{"id": i, "type": "function",
                                      "function": {"name": n, "arguments": a}}
                                     for i, n, a in calls]
        exchange.answered = True
        exchange.saw({"usage": _usage(body)})
        return ModelReply(message, usage_of(_usage(body)))

    run = make_fragola("http://127.0.0.1:9/v1")
    run.fragola._model._paced = stub  # type: ignore[attr-defined]
    return run


async def own_cost(k: int, runs: int = 200) -> dict[str, Any]:
    """fragola_nb's own CPU per model call on ``stubbed_fragola``: what fragola_nb adds on
    top of the floor, without the noise of the network path."""
    run = stubbed_fragola()
    for _ in range(20):
        await run(k, False)
    best = float("inf")
    for _ in range(5):
        cpu0 = time.process_time()
        for _ in range(runs // 5):
            await run(k, False)
        best = min(best, (time.process_time() - cpu0) / (runs // 5 * (k + 1)) * 1e6)
    by_layer, by_function = await profiled(run, k, False, runs)
    by_layer.pop("stub model (bench)", None)
    total = sum(by_layer.values()) or 1.0
    functions = sorted(((v / total, name) for name, v in by_function.items()), reverse=True)
    return {"k": k, "us_per_call": best,
            "layers": {name: v / total for name, v in by_layer.items()},
            "functions": [{"function": n, "share": sh, "us_per_call": sh * best}
                          for sh, n in functions]}


def report(result: dict[str, Any], top: int = 12) -> str:
    mode = "stream" if result["stream"] else "non-stream"
    out = [f"{result['library']}, {mode}, K={result['k']}: "
           f"{result['cpu_us_per_call']:.0f} µs CPU per model call",
           "", "| layer | share of CPU | µs per call |", "| --- | ---: | ---: |"]
    for row in result["layers"]:
        if row["share"] >= 0.005:
            out.append(f"| {row['layer']} | {row['share']*100:.1f}% | {row['us_per_call']:.0f} |")
    if result["fragola_functions"]:
        out += ["", "| fragola_nb function (own time, callees outside fragola_nb included) "
                "| share | µs per call |", "| --- | ---: | ---: |"]
        for row in result["fragola_functions"][:top]:
            out.append(f"| `{row['function']}` | {row['share']*100:.1f}% | "
                       f"{row['us_per_call']:.0f} |")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--library", default="fragola_nb")
    parser.add_argument("--k", type=int, default=20)
    parser.add_argument("--stream", action="store_true")
    parser.add_argument("--runs", type=int, default=0, help="conversations (default ~100 calls)")
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--own", action="store_true",
                        help="fragola_nb's own cost, the model client stubbed out")
    parser.add_argument("--json")
    args = parser.parse_args()
    if args.own:
        own = asyncio.run(own_cost(args.k))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(own, f, indent=1)
        print(f"fragola_nb's own CPU per model call, K={args.k}: {own['us_per_call']:.1f} µs")
        for row in own["functions"][: args.top]:
            print(f"  {row['us_per_call']:6.1f} µs  {row['function']}")
        return
    runs = args.runs or max(1, 100 // (args.k + 1))
    with LeanServer() as server:
        result = asyncio.run(profile(args.library, args.k, args.stream, runs, server.base_url))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    print(report(result, args.top))


if __name__ == "__main__":
    main()

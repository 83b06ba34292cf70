"""A small MCP server for the tests, written with the official ``mcp`` package (MCPServer,
FastMCP's name in mcp 2), run as a real process:

    python demo_server.py stdio [--page-size N] [--extra N] [--broken-schema]
    python demo_server.py http --port PORT [--page-size N]

``--page-size`` makes ``tools/list`` answer in pages (``nextCursor``), ``--extra N`` adds N
numbered tools, ``--broken-schema`` lists one tool whose ``inputSchema`` is not a valid JSON
Schema. Over HTTP, ``whoami`` answers the request's ``Authorization`` header.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ImageContent, ListToolsResult, PaginatedRequestParams, TextContent
from mcp.types import Tool as MCPTool

# A 1x1 PNG.
PIXEL = base64.b64encode(bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)).decode()


class PagedServer(MCPServer):
    """``tools/list`` in pages of ``page_size``, the cursor being the next offset."""

    page_size: int = 0
    broken_schema = False

    async def _handle_list_tools(self, ctx: Any, params: PaginatedRequestParams | None
                                 ) -> ListToolsResult:
        tools = await self.list_tools()
        if self.broken_schema:
            tools.append(MCPTool(name="broken", description="Its schema is broken.",
                                 input_schema={"type": "object",
                                               "properties": {"x": {"type": "nonsense"}}}))
        if not self.page_size:
            return ListToolsResult(tools=tools)
        start = int(params.cursor) if params is not None and params.cursor else 0
        end = start + self.page_size
        return ListToolsResult(tools=tools[start:end],
                               next_cursor=str(end) if end < len(tools) else None)


server = PagedServer("demo", log_level="WARNING")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two whole numbers."""
    return a + b


@server.tool()
def echo(text: str) -> str:
    """Say the text back."""
    return text


@server.tool(description="")
def quiet(word: str = "hush") -> str:
    return f"{word}..."


@server.tool()
def fail(message: str) -> str:
    """Always fails with the message (an isError result)."""
    raise ToolError(message)


@server.tool()
def die() -> str:
    """The server process exits in the middle of this call."""
    os._exit(3)


@server.tool()
async def slow(seconds: float) -> str:
    """Answer after ``seconds``."""
    await asyncio.sleep(seconds)
    return "done"


@server.tool()
def picture() -> list[Any]:
    """A caption and a one-pixel image."""
    return [TextContent(type="text", text="a red pixel"),
            ImageContent(type="image", data=PIXEL, mime_type="image/png")]


@server.tool()
def whoami(ctx: Context) -> str:
    """The Authorization header this request came with."""
    headers = ctx.headers or {}
    return str(headers.get("authorization", "(none)"))


def _numbered(number: int) -> Any:
    def numbered() -> str:
        return f"tool {number}"

    return numbered


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("transport", choices=["stdio", "http"])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--page-size", type=int, default=0)
    parser.add_argument("--extra", type=int, default=0)
    parser.add_argument("--broken-schema", action="store_true")
    args = parser.parse_args()
    server.page_size = args.page_size
    server.broken_schema = args.broken_schema
    for number in range(args.extra):
        server.add_tool(_numbered(number), name=f"numbered_{number}",
                        description=f"Numbered tool {number}.")
    if args.transport == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=args.port)


if __name__ == "__main__":
    main()

"""An MCP server over Streamable HTTP for confab's integration tests, on the official Python
SDK (its high-level server: MCPServer in mcp 2, FastMCP before), listening on loopback only.

Tools: `echo` says back its text; `fail` reports an error (isError); `authorization` says back
the Authorization header its request carried (the secret a client must redact); `session`
says which session and protocol version the request named; `vanish` ends the whole server in
the middle of its call; `grow` adds the tool `grown` and tells the client its tool list changed.

    mcp-http-test-server.py --markers DIR [--port N] [--json] [--stateless]

It binds 127.0.0.1:N (0, the default: a free port), then writes the port to DIR/port and its
pid to DIR/pid; a client may connect as soon as DIR/port exists. `--stateless` gives no
session ids. A DELETE (a client ending
its session) writes the session id to DIR/deleted. `--json` answers requests
with JSON rather than event streams."""
import argparse
import os
import socket

import uvicorn

try:
    from mcp.server.mcpserver import Context
    from mcp.server.mcpserver import MCPServer as Server
    from mcp.server.mcpserver.exceptions import ToolError
except ImportError:
    from mcp.server.fastmcp import Context
    from mcp.server.fastmcp import FastMCP as Server
    from mcp.server.fastmcp.exceptions import ToolError

arguments = argparse.ArgumentParser()
arguments.add_argument("--markers", required=True)
arguments.add_argument("--port", type=int, default=0)
arguments.add_argument("--json", action="store_true")
arguments.add_argument("--stateless", action="store_true")
options = arguments.parse_args()


def mark(name: str, text: str) -> None:
    path = os.path.join(options.markers, name)
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def headers(ctx: Context) -> dict:
    found = getattr(ctx, "headers", None)
    if found is None:
        found = getattr(ctx.request_context.request, "headers", None)
    return {k.lower(): v for k, v in (found or {}).items()}


server = Server("confab-http-test")


@server.tool()
def echo(text: str) -> str:
    """Says back the text it is given."""
    return text


@server.tool()
def fail(reason: str) -> str:
    """Always fails, saying why."""
    raise ToolError(reason)


@server.tool()
def authorization(ctx: Context) -> str:
    """Says back the Authorization header of the request."""
    return "Authorization: " + headers(ctx).get("authorization", "(none)")


@server.tool()
def session(ctx: Context) -> str:
    """Says which session and protocol version the request named."""
    given = headers(ctx)
    return "session " + given.get("mcp-session-id", "(none)") + " version " + given.get("mcp-protocol-version", "(none)")


@server.tool()
def vanish() -> str:
    """Ends the whole server in the middle of the call."""
    mark("vanished", "vanished")
    os._exit(3)


def grown() -> str:
    """A tool that was not there at first."""
    return "grown"


@server.tool()
async def grow(ctx: Context) -> str:
    """Adds the tool `grown` and says the tool list changed."""
    server.add_tool(grown)
    await ctx.session.send_tool_list_changed()
    return "grew"


def marking_deletes(app):
    async def marked(scope, receive, send):
        if scope["type"] == "http" and scope["method"] == "DELETE":
            mark("deleted", dict(scope["headers"]).get(b"mcp-session-id", b"").decode())
        await app(scope, receive, send)
    return marked


if __name__ == "__main__":
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", options.port))
    listener.listen(64)
    mark("pid", str(os.getpid()))
    # Connections wait in the backlog until the server accepts them: ready from here on.
    mark("port", str(listener.getsockname()[1]))
    app = server.streamable_http_app(json_response=options.json, stateless_http=options.stateless)
    uvicorn.Server(uvicorn.Config(marking_deletes(app), log_level="warning")).run(sockets=[listener])

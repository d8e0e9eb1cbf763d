"""An MCP server for confab's integration tests, on the official Python SDK (its high-level
server: MCPServer in mcp 2, FastMCP before), over
stdio: a tool that echoes, one that reports an error (isError), a slow one to cancel, one
that reports progress as it counts, one that crashes the server in the middle of its call,
and one that adds a tool and says the list changed.
With CONFAB_MCP_MARKERS set to a directory it writes there its pid at start (`pid`), the
text of each call of `echo` (`called`) and `cancelled` when a call of `slow` is cancelled.
With CONFAB_MCP_STUBBORN set it keeps running after its input closes.
With CONFAB_MCP_CALL_LOG set to a file, `note` appends to it one JSON line per call, the text it
was given and the result it returns (`{"text":…,"result":…}`), written before it returns: what
a checker compares the stored tool messages with."""
import json
import os
import secrets
import time

import anyio
try:
    from mcp.server.mcpserver import Context
    from mcp.server.mcpserver import MCPServer as Server
    from mcp.server.mcpserver.exceptions import ToolError
except ImportError:
    from mcp.server.fastmcp import Context
    from mcp.server.fastmcp import FastMCP as Server
    from mcp.server.fastmcp.exceptions import ToolError

MARKERS = os.environ.get("CONFAB_MCP_MARKERS")


def mark(name: str, text: str) -> None:
    if MARKERS:
        path = os.path.join(MARKERS, name)
        with open(path + ".tmp", "w") as f:
            f.write(text)
        os.replace(path + ".tmp", path)


server = Server("confab-test")


@server.tool()
def echo(text: str) -> str:
    """Says back the text it is given."""
    mark("called", text)
    return text


@server.tool()
def fail(reason: str) -> str:
    """Always fails, saying why."""
    raise ToolError(reason)


@server.tool()
async def slow(seconds: float = 300) -> str:
    """Answers after a long time."""
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        mark("cancelled", "cancelled")
        raise
    return "done"


@server.tool()
async def count(steps: int = 5, hold: bool = False, ctx: Context = None) -> str:
    """Counts to steps, reporting progress at each step; with hold, waits after the last
    until the marker `release` exists (at most a minute)."""
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps, f"counting \x1b[31m{step}")
        await anyio.sleep(0.01)
    if hold and MARKERS:
        for _ in range(1200):
            if os.path.exists(os.path.join(MARKERS, "release")):
                break
            await anyio.sleep(0.05)
    return f"counted to {steps}"


@server.tool()
def crash() -> str:
    """Ends the server in the middle of the call, as a crash would."""
    mark("crashed", str(os.getpid()))
    os._exit(3)


@server.tool()
def note(text: str) -> str:
    """Notes the text it is given and answers with a receipt no one can guess."""
    result = f"noted {text} {secrets.token_hex(8)}"
    path = os.environ.get("CONFAB_MCP_CALL_LOG")
    if path:
        line = json.dumps({"text": text, "result": result}) + "\n"
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)
    return result


def added(text: str) -> str:
    """A tool added while the server runs."""
    return "added: " + text


@server.tool()
async def grow(ctx: Context = None) -> str:
    """Adds the tool `added` and tells the client the tool list changed."""
    server.add_tool(added)
    await ctx.session.send_tool_list_changed()
    return "grown"


# CONFAB_MCP_HOSTILE_DESCRIPTION: one more tool, `odd`, described by that text (terminal
# escapes, bidi controls: what a client must show escaped, never obey).
if os.environ.get("CONFAB_MCP_HOSTILE_DESCRIPTION"):
    @server.tool(description=os.environ["CONFAB_MCP_HOSTILE_DESCRIPTION"])
    def odd() -> str:
        return "odd"


# CONFAB_MCP_ECHOED_VARIABLE: one more tool, `variable`, that answers with the value of the
# environment variable of that name (a server that puts a credential in its results).
if os.environ.get("CONFAB_MCP_ECHOED_VARIABLE"):
    @server.tool()
    def variable() -> str:
        """Says the value of an environment variable."""
        name = os.environ["CONFAB_MCP_ECHOED_VARIABLE"]
        return f"{name}={os.environ.get(name, '')}"


if __name__ == "__main__":
    mark("pid", str(os.getpid()))
    server.run()
    # CONFAB_MCP_STUBBORN: a server that does not end when its input closes, as a server
    # stuck in a call would not; only a signal ends it.
    if os.environ.get("CONFAB_MCP_STUBBORN"):
        while True:
            time.sleep(60)

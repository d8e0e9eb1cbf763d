"""The peers of `make bench`'s mcp section, run in the MCP virtual environment's Python:
calls of `get_current_time` on a running `mcp-server-time`, timed one by one, by

- `sdk`: the official Python SDK's own client (`ClientSession` over `stdio_client`), and
- `raw`: the fewest steps a client can take: one JSON-RPC line written to the server's stdin,
  its answer line read back, nothing else (the server's own cost, the floor for every client).

Usage: python bench_mcp_peer.py sdk|raw SERVER_EXECUTABLE CALLS WARMUP DEADLINE_SECONDS
Prints one JSON line: {"samples_ms": [...]} (the warm-up calls left out)."""
import json
import subprocess
import sys
import time


def sdk(server, calls, warmup, deadline):
    import anyio
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    async def run():
        samples = []
        params = StdioServerParameters(command=server, args=["--local-timezone", "UTC"])
        with anyio.fail_after(deadline):
            async with stdio_client(params) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    for index in range(warmup + calls):
                        start = time.perf_counter()
                        result = await session.call_tool("get_current_time", {"timezone": "UTC"})
                        elapsed = (time.perf_counter() - start) * 1000
                        if getattr(result, "is_error", None) or getattr(result, "isError", None):
                            raise RuntimeError("the call failed: %r" % result)
                        if index >= warmup:
                            samples.append(elapsed)
        return samples

    return anyio.run(run)


def raw(server, calls, warmup, deadline):
    proc = subprocess.Popen([server, "--local-timezone", "UTC"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    ends = time.monotonic() + deadline

    def send(frame):
        proc.stdin.write((json.dumps(frame) + "\n").encode())
        proc.stdin.flush()

    def answer(rid):
        while time.monotonic() < ends:
            line = proc.stdout.readline()
            if not line:
                raise RuntimeError("the server closed its output")
            frame = json.loads(line)
            if frame.get("id") == rid:
                return frame
        raise RuntimeError("no answer in time")

    try:
        send({"jsonrpc": "2.0", "id": 0, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})
        answer(0)
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        samples = []
        for index in range(warmup + calls):
            rid = index + 1
            start = time.perf_counter()
            send({"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                  "params": {"name": "get_current_time", "arguments": {"timezone": "UTC"}}})
            frame = answer(rid)
            elapsed = (time.perf_counter() - start) * 1000
            if "error" in frame or frame["result"].get("isError"):
                raise RuntimeError("the call failed: %r" % frame)
            if index >= warmup:
                samples.append(elapsed)
        return samples
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


if __name__ == "__main__":
    kind, server, calls, warmup, deadline = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
    samples = {"sdk": sdk, "raw": raw}[kind](server, calls, warmup, deadline)
    print(json.dumps({"samples_ms": samples}))

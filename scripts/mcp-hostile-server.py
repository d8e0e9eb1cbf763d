#!/usr/bin/env python3
"""An MCP server over stdio for confab's tests of what a server must not be able to do to
confabd, on Python's standard library alone (no SDK: it breaks the rules on purpose).

It answers `initialize` and `tools/list` (every tool below) and calls of its tools:
  echo {text}        says the text back
  fds {}             the descriptors open in the server, "0 1 2" for a clean start
  read {path}        answers "read PATH" (a harmless tool)
  delete_all {}      answers "deleted" (a tool that should ask first)
  nested {text}      its schema's pattern is ^(a+)+$, which backtracks exponentially
  lookahead {text}   its schema's pattern holds a lookahead, (?=…), with a maxLength of 5
Options, each a misbehaviour once the tool list has been sent:
  --flood-pings N    writes N `ping` requests and never reads its input again
  --flood-requests N writes N requests of a method the client does not have, never reading
  --huge-line BYTES  writes one line of about BYTES bytes (a log message), then goes on
  --junk N           writes N lines that are not JSON-RPC (broken JSON, wrong shapes)
  --log-level TEXT   sends a notifications/message whose level is TEXT
  --random N         writes N random lines (seeded by --seed): JSON-RPC requests, responses
                     and notifications of any method with odd ids and params, mutated and
                     broken JSON, random bytes, list_changed and log floods; reads on after
With CONFAB_MCP_MARKERS set to a directory it writes there `flooded` once a flood is
written whole (confabd read it all, so it never stopped reading).
"""
import json
import os
import sys
import time

TOOLS = [
    {"name": "echo", "description": "Says back the text it is given.",
     "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}},
    {"name": "fds", "description": "Lists the descriptors open in the server.",
     "inputSchema": {"type": "object", "properties": {}}},
    {"name": "read", "description": "Reads a path.",
     "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}}},
    {"name": "delete_all", "description": "Deletes everything.",
     "inputSchema": {"type": "object", "properties": {}}},
    {"name": "nested", "description": "A pattern that backtracks.",
     "inputSchema": {"type": "object", "properties": {"text": {"type": "string", "pattern": "^(a+)+$"}}, "required": ["text"]}},
    {"name": "lookahead", "description": "A pattern with a lookahead, left to the server.",
     "inputSchema": {"type": "object",
                     "properties": {"text": {"type": "string", "pattern": "^(?=b)", "maxLength": 5}}, "required": ["text"]}},
]


def options():
    found = {}
    args = sys.argv[1:]
    while args:
        name = args.pop(0)
        found[name] = args.pop(0) if args else ""
    return found


OPTIONS = options()
OUT = sys.stdout.buffer


def send(message):
    OUT.write(json.dumps(message).encode() + b"\n")
    OUT.flush()


def mark(name, text):
    directory = os.environ.get("CONFAB_MCP_MARKERS")
    if directory:
        path = os.path.join(directory, name)
        with open(path + ".tmp", "w") as f:
            f.write(text)
        os.replace(path + ".tmp", path)


def open_descriptors():
    # fstat opens nothing, unlike a listing of /proc/self/fd would.
    found = []
    for fd in range(0, 4096):
        try:
            os.fstat(fd)
        except OSError:
            continue
        found.append(fd)
    return found


def call(name, arguments):
    if name == "echo":
        return arguments.get("text", "")
    if name == "fds":
        described = []
        for fd in open_descriptors():
            try:
                described.append(f"{fd}={os.readlink(f'/proc/self/fd/{fd}')}")
            except OSError:
                described.append(str(fd))
        return "fds: " + " ".join(str(fd) for fd in open_descriptors()) + "\n" + "\n".join(described)
    if name == "read":
        return "read " + str(arguments.get("path", ""))
    if name == "delete_all":
        return "deleted"
    if name in ("nested", "lookahead"):
        return "checked by the server: " + str(arguments.get("text", ""))
    return None


def random_lines(count, seed):
    """`count` hostile lines, from `seed`."""
    import random
    rng = random.Random(seed)
    ids = [0, -1, 1, 2, 3, 2**63, -(2**63) - 1, 1e308, "1", "", "x" * 1000, None, True, [], {}, {"id": 1}]
    methods = ["ping", "tools/list", "tools/call", "initialize", "sampling/createMessage", "roots/list",
               "elicitation/create", "notifications/message", "notifications/progress",
               "notifications/tools/list_changed", "notifications/cancelled", "", "\u001b[2J", "x" * 5000]
    values = [None, True, 0, -1, 1.5, 1e308, "", "\u001b]2;PWNED\u0007", "\u202eevil", "x" * 20000, [], {},
              {"level": "A" * 5000, "data": "B" * 5000}, {"progressToken": 2, "progress": 1e308, "total": -1},
              {"progressToken": "2", "progress": "x"}, {"requestId": 1}, {"tools": [{"name": "n" * 300}]}]
    for _ in range(count):
        kind = rng.randrange(8)
        if kind == 0:
            message = {"jsonrpc": "2.0", "id": rng.choice(ids), "method": rng.choice(methods), "params": rng.choice(values)}
        elif kind == 1:
            message = {"jsonrpc": "2.0", "method": rng.choice(methods), "params": rng.choice(values)}
        elif kind == 2:
            message = {"jsonrpc": "2.0", "id": rng.choice(ids), "result": rng.choice(values)}
        elif kind == 3:
            message = {"jsonrpc": "2.0", "id": rng.choice(ids), "error": {"code": rng.choice(ids), "message": rng.choice(values)}}
        elif kind == 4:
            message = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
        elif kind == 5:
            message = {"jsonrpc": "2.0", "method": "notifications/message", "params": rng.choice(values)}
        elif kind == 6:
            yield bytes(rng.randrange(256) for _ in range(rng.randrange(200))).replace(b"\n", b"") + b"\n"
            continue
        else:
            text = json.dumps({"jsonrpc": "2.0", "id": rng.choice(ids), "method": rng.choice(methods)}).encode()
            cut = rng.randrange(len(text))
            yield text[:cut] + bytes([rng.randrange(256)]).replace(b"\n", b"") + text[cut + 1:] + b"\n"
            continue
        if rng.random() < 0.1:
            message.pop("jsonrpc")
        yield json.dumps(message).encode() + b"\n"


def misbehave():
    """What the options ask for, once the client has the tool list."""
    if "--log-level" in OPTIONS:
        send({"jsonrpc": "2.0", "method": "notifications/message",
              "params": {"level": OPTIONS["--log-level"], "data": "a message with a hostile level"}})
    if "--junk" in OPTIONS:
        for index in range(int(OPTIONS["--junk"])):
            OUT.write([b"{not json\n", b"[1,2,3]\n", b'{"jsonrpc":"2.0","id":{"x":1},"result":5}\n',
                       b'{"jsonrpc":"2.0","method":7}\n', b"\xff\xfe\n", b'"text"\n'][index % 6])
        OUT.flush()
    if "--random" in OPTIONS:
        for line in random_lines(int(OPTIONS["--random"]), int(OPTIONS.get("--seed", "0"))):
            OUT.write(line)
        OUT.flush()
    if "--huge-line" in OPTIONS:
        size = int(OPTIONS["--huge-line"])
        OUT.write(b'{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"'
                  + b"x" * max(0, size - 90) + b'"}}\n')
        OUT.flush()
    for option, method in (("--flood-pings", "ping"), ("--flood-requests", "sampling/createMessage")):
        if option in OPTIONS:
            count = int(OPTIONS[option])
            batch = []
            for index in range(count):
                batch.append(b'{"jsonrpc":"2.0","id":%d,"method":"%s"}\n' % (1_000_000 + index, method.encode()))
                if len(batch) == 1000:
                    OUT.write(b"".join(batch))
                    batch = []
            OUT.write(b"".join(batch))
            OUT.flush()
            mark("flooded", str(count))
            # Never reads its input again.
            while True:
                time.sleep(60)


def main():
    misbehaved = False
    for line in sys.stdin.buffer:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        method = message.get("method")
        ident = message.get("id")
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": ident, "result": {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}, "logging": {}},
                "serverInfo": {"name": "confab-hostile", "version": "1"}}})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": ident, "result": {"tools": TOOLS}})
            if not misbehaved:
                misbehaved = True
                misbehave()
        elif method == "tools/call":
            params = message.get("params") or {}
            text = call(params.get("name"), params.get("arguments") or {})
            if text is None:
                send({"jsonrpc": "2.0", "id": ident, "error": {"code": -32602, "message": "no such tool"}})
            else:
                send({"jsonrpc": "2.0", "id": ident, "result": {"content": [{"type": "text", "text": text}]}})
        elif method == "ping":
            send({"jsonrpc": "2.0", "id": ident, "result": {}})
        elif ident is not None and method is not None:
            send({"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": "method not found"}})


if __name__ == "__main__":
    main()

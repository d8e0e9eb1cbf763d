#!/usr/bin/env python3
"""Socket fuzzer for confabd: hostile JSON-RPC traffic on the Unix socket, bounded in time and count.

Starts the release confabd on a temporary socket and data directory, with an upstream URL
pointing at a loopback port that is bound but not listening (every reply fails fast with
upstream_connection; no model is needed), then sends mutated frames from several
connections:

  random bytes, invalid UTF-8, truncated JSON, byte-level mutations of valid requests,
  deep nesting (around Foundation's 512 limit and far beyond), huge and odd numbers,
  every hostile value for every parameter of every method listed in docs/protocol.md (and
  for id, jsonrpc, method and params themselves), notifications, response frames, white
  space and CRLF lines, lines of exactly the line limit, lines over it, half lines then
  close, and abrupt closes with answers still queued.

Checks, failing (exit 1) at the first violation:
  - every complete line gets exactly the answers the protocol promises, in order: one
    response carrying the line's id for a request, one with id null for a line that is not
    JSON / not UTF-8 / not an object or has an id of the wrong type, nothing for a
    notification or a white-space line (a model of RPC.classify in this file predicts
    which; where Foundation and Python could disagree -- duplicate keys, a BOM -- both
    outcomes are allowed);
  - every frame the daemon writes is one line of valid JSON-RPC 2.0;
  - a line over the limit gets error -32002 with id null as the last frame, then EOF;
    after a half line and a close, what came back is a prefix of what was due;
  - the daemon never dies (its PID is checked after every round) and stops cleanly on
    SIGTERM at the end;
  - a well-behaved client on its own connection gets a `status` answer within a second,
    every 100 ms, throughout;
  - the flood (first, unless --flood 0): one connection pipelines 100,000
    `conversation.search` calls without reading an answer and hangs up; the daemon must
    read it only as it answers (it cannot have taken every line before the hang-up), its
    searches must be gone (`status.searches` 0) and the client with them within
    FLOOD_STOP_DEADLINE of the hang-up, another connection's search must be answered
    meanwhile, and the daemon's peak RSS must stay within FLOOD_RSS_BOUND_KIB of what it
    was before.

  - the hostile MCP servers (after the flood, unless --mcp-seconds 0): for --mcp-seconds,
    servers over stdio (scripts/mcp-hostile-server.py) are restarted one after another
    (`mcp.restart`), each misbehaving once listed: a flood of pings it never reads the
    answers of, a flood of requests the daemon has no method for (never read either),
    lines of 8 MiB and of 17 MiB (over the daemon's 16 MiB line bound), and random
    hostile lines (odd ids and params, broken JSON, raw bytes, list_changed and log
    floods); the daemon must stay alive, the well-behaved client above must be answered
    as always, another client's `status` is timed throughout, and the daemon's peak RSS
    must stay within MCP_RSS_BOUND_KIB of what it was before.

Then the gateway round (unless --gateway-seconds 0): the release confab-web before the same
confabd, hit over WebSockets with junk frames, frames over the bounds, floods and many sockets
on one share link, while the owner's page is timed (GatewayRound below); it reports the peak
RSS of confabd and confab-web and the owner's answer times.

Usage: scripts/fuzz-socket.py [--seconds 60] [--count 100000] [--flood 100000] [--mcp-seconds 20] [--seed N] [--bin-dir DIR] [--keep]
                              [--gateway-seconds 30]
       (binaries from $CONFAB_BIN_DIR or .build/release; build them with `make release`)
Prints counts; exits 0 when every check held, 1 on a violation, 2 on a setup problem.
Only loopback and a Unix socket in a temporary directory are used; only the daemon this
script started is signalled.
"""
import argparse, decimal, json, os, random, re, select, signal, socket, subprocess, sys, tempfile, threading, time
import unicodedata

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
MAX_LINE = 65536          # limits.max_line_bytes given to the daemon: small so long lines are cheap
STATUS_DEADLINE = 1.0     # seconds the well-behaved client may wait for `status`
ROUND_DEADLINE = 20.0     # seconds a fuzz connection may wait for its round's answers
FLOOD_STOP_DEADLINE = 5.0   # seconds after the flood's hang-up by which its work must be gone
FLOOD_RSS_BOUND_KIB = 64 * 1024   # growth of the daemon's peak RSS the flood may cause (16 MiB outbox and more)
MCP_RSS_BOUND_KIB = 96 * 1024     # growth the hostile MCP servers may cause: a line of up to 16 MiB being
                                  # read (the buffer doubles as it grows), an 8 MiB message parsed and logged
HOSTILE_SERVER = os.path.join(REPO, "scripts", "mcp-hostile-server.py")


def hostile_servers(seed):
    """The `[mcp.NAME]` tables of the MCP round: name -> the hostile server's options."""
    return {
        "pings": ["--flood-pings", "300000"],
        "requests": ["--flood-requests", "300000"],
        "long": ["--huge-line", str(8 << 20)],
        "huge": ["--huge-line", str(17 << 20)],
        "random": ["--random", "20000", "--seed", str(seed)],
    }


def hostile_config(seed):
    tables = ""
    for name, options in hostile_servers(seed).items():
        tables += "[mcp.%s]\ncommand = %s\nargs = %s\nstartup_timeout_seconds = 10\n" % (
            name, json.dumps(sys.executable), json.dumps([HOSTILE_SERVER] + options))
    return tables


class Failure(Exception):
    pass


# --------------------------------------------------------------------------------------------
# The methods and their parameters, read from docs/protocol.md ("### `name`" then "`{a: t, b?: t}`").

FALLBACK_METHODS = {
    "hello": ["client", "name"], "status": [], "conversation.create": ["title", "system", "model"],
    "conversation.list": ["limit"], "conversation.get": ["conversation"],
    "conversation.rename": ["conversation", "title"], "conversation.delete": ["conversation"],
    "conversation.attach": ["conversation", "history"], "conversation.detach": ["conversation"],
    "conversation.history": ["conversation", "before", "limit"], "message.send": ["conversation", "content"],
    "generation.cancel": ["conversation"],
}


def methods_from_doc():
    try:
        text = open(os.path.join(REPO, "docs", "protocol.md"), encoding="utf-8").read()
    except OSError:
        return dict(FALLBACK_METHODS)
    section = text.split("## Methods", 1)[-1].split("\n## ", 1)[0]
    methods = {}
    for match in re.finditer(r"^### `([a-z.]+)`\n`\{([^}]*)\}`", section, re.M):
        methods[match.group(1)] = re.findall(r"(\w+)\??:", match.group(2))
    return methods or dict(FALLBACK_METHODS)


# --------------------------------------------------------------------------------------------
# A model of what confabd answers to one line (Methods.swift handle(line:) + RPC.classify +
# JSON.parse on Foundation's decoder). Ids are canonical: ("i", n), ("s", text) or ("n",).

NULL = ("n",)
INT64 = (-(1 << 63), (1 << 63) - 1)


class Expect:
    """The answer due for one line: one response whose id is in `ids` (None: any id);
    `optional` when the line may also get none (it might be read as a notification)."""
    __slots__ = ("ids", "optional", "why")

    def __init__(self, ids, optional=False, why=""):
        self.ids, self.optional, self.why = (None if ids is None else frozenset(ids)), optional, why

    def allows(self, ident):
        return self.ids is None or ident in self.ids

    def __repr__(self):
        ids = "any id" if self.ids is None else sorted(self.ids)
        return "Expect(%s%s, %s)" % (ids, ", optional" if self.optional else "", self.why)


class ParseFails(Exception):
    pass


def _pairs(pairs):
    seen = {}
    dup = False
    for key, value in pairs:
        norm = unicodedata.normalize("NFC", key)   # Swift's String == is canonical equivalence
        if norm in seen:
            dup = True
            continue                                # Foundation keeps the first
        seen[norm] = (key, value)
    obj = {key: value for key, value in seen.values()}
    if dup:
        obj = DupDict(obj)
    return obj


class DupDict(dict):
    pass


def _number(text):
    if float(text) in (float("inf"), float("-inf")):
        raise ParseFails("number out of range")    # Foundation: Int fails, Double overflows
    with decimal.localcontext() as context:
        context.Emax, context.Emin = decimal.MAX_EMAX, decimal.MIN_EMIN
        try:
            return decimal.Decimal(text)
        except decimal.InvalidOperation:
            # An exponent past what decimal holds (0e9999999999999999999, 1e-9999999999999999999):
            # confabd clamps exponents at 10^6 either way, which keeps the value's kind (zero, a
            # tiny non-integer); so does this.
            mantissa, _, exponent = text.lower().partition("e")
            return decimal.Decimal(mantissa + "e" + str(max(-10**6, min(10**6, int(exponent)))))


def _constant(name):
    raise ParseFails(name)


def _max_depth(line):
    depth = deepest = 0
    in_string = escaped = False
    for byte in line:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:
                escaped = True
            elif byte == 0x22:
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):
            depth += 1
            deepest = max(deepest, depth)
        elif byte in (0x5D, 0x7D):
            depth -= 1
    return deepest


def _walk(value, ambiguous):
    """Checks what Python accepts and Foundation refuses; notes what might differ."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, DupDict):
            ambiguous.append("duplicate keys")
        if isinstance(item, dict):
            for key, child in item.items():
                if any(0xD800 <= ord(c) <= 0xDFFF for c in key):
                    ambiguous.append("lone surrogate in a key")
                stack.append(child)
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str):
            if any(0xD800 <= ord(c) <= 0xDFFF for c in item):
                raise ParseFails("lone surrogate")  # Foundation refuses an unpaired \\udXXX


def model_id(value):
    """The id confabd reads, or None when its type is refused."""
    if value is None:
        return NULL
    if isinstance(value, str):
        return ("s", value)
    if isinstance(value, bool) or not isinstance(value, decimal.Decimal):
        return None
    if value == value.to_integral_value() and INT64[0] <= value <= INT64[1]:
        return ("i", int(value))                    # Foundation reads integral numbers exactly
    as_double = float(value)
    if as_double == round(as_double) and abs(as_double) < 9.0e15:
        return ("i", int(as_double))
    return None


def model_int(value):
    ident = model_id(value)
    return ident[1] if ident and ident[0] == "i" else None


def expect(seen):
    """What confabd answers to the line `seen` (terminator already removed), or None."""
    if all(b in (0x20, 0x09, 0x0D) for b in seen):
        return None
    try:
        text = seen.decode("utf-8")
    except UnicodeDecodeError:
        return Expect([NULL], why="invalid UTF-8")
    ambiguous = []
    if text.startswith("\ufeff"):
        text = text[1:]
        ambiguous.append("BOM")
    if _max_depth(seen) > 512:
        return Expect([NULL], why="nesting over 512")
    try:
        value = json.loads(text, object_pairs_hook=_pairs, parse_float=_number, parse_int=_number,
                           parse_constant=_constant)
        _walk(value, ambiguous)
    except (ValueError, ParseFails, RecursionError) as error:
        keys = re.findall(r'"((?:[^"\\]|\\.)*)"\s*:', text)
        if len(keys) != len(set(keys)):
            # Foundation keeps the first of duplicate members and never decodes the others,
            # so garbage there (`{"id":1,"id":01}`) goes unnoticed: any answer, or none.
            return Expect(None, optional=True, why="parse error in a duplicate member? (%s)" % error)
        return Expect([NULL], why="parse error")
    outcome = classify(value)
    if not ambiguous:
        return outcome
    if outcome and outcome.ids is None:
        return Expect(None, optional=True, why="ambiguous: " + ", ".join(ambiguous))
    ids = set(outcome.ids) if outcome else set()
    ids.add(NULL)
    return Expect(ids, optional=True, why="ambiguous: " + ", ".join(ambiguous))


def classify(frame):
    if not isinstance(frame, dict):
        return Expect([NULL], why="not an object")
    rid = NULL
    if "id" in frame:
        rid = model_id(frame["id"])
        if rid is None:
            return Expect([NULL], why="bad id type")
    if not (isinstance(frame.get("jsonrpc"), str) and frame["jsonrpc"] == "2.0"):
        return Expect([rid], why="jsonrpc")
    if "method" in frame:
        method = frame["method"]
        if not isinstance(method, str) or method == "":
            return Expect([rid], why="method type")
        if "params" in frame and not isinstance(frame["params"], (dict, list)):
            return Expect([rid], why="params type")
        if "id" not in frame:
            return None  # a notification: run, never answered
        return Expect([rid], why="request")
    if "result" in frame:
        return Expect([NULL], why="response frame")
    error = frame.get("error")
    if isinstance(error, dict) and model_int(error.get("code")) is not None and isinstance(error.get("message"), str):
        return Expect([NULL], why="error frame")
    return Expect([rid], why="no method")


def seen_line(wire):
    """The line confabd's framer delivers for `wire` (one line with its LF)."""
    line = wire[:-1]
    return line[:-1] if line.endswith(b"\r") else line


def matches(expected, got, prefix=False):
    """Whether response ids `got` fit the Expect list in order (a prefix of it if `prefix`)."""
    n, m = len(got), len(expected)
    # ok[i][j]: got[i:] fits expected[j:]
    ok = [[False] * (m + 1) for _ in range(n + 1)]
    ok[n][m] = True
    for j in range(m - 1, -1, -1):
        ok[n][j] = prefix or (expected[j].optional and ok[n][j + 1])
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            e = expected[j]
            ok[i][j] = (e.allows(got[i]) and ok[i + 1][j + 1]) or (e.optional and ok[i][j + 1])
    return ok[0][0]


def canonical(value):
    if value is None:
        return NULL
    if isinstance(value, bool):
        return ("bad", value)
    if isinstance(value, int):
        return ("i", value)
    if isinstance(value, str):
        return ("s", value)
    return ("bad", repr(value))


# --------------------------------------------------------------------------------------------
# Frames.

HOSTILE = [
    b"null", b"true", b"false", b"0", b"-1", b"1.5", b"-0", b"-0.0", b"1e400", b"-1e400", b"1e-400",
    b"9007199254740993", b"9223372036854775807", b"9223372036854775808", b"-9223372036854775809",
    b"1" * 400, b"1." + b"0" * 300 + b"1", b"12.0", b"10001", b"1001", b"1e16",
    b'""', b'" "', b'"\\u0000"', b'"\\ud800"', b'"\\udc00\\ud800"', b'"\\ud83c\\udf89"', b'"\xff\xfe"',
    b'"\xc3\x28"', b'"\xed\xa0\x80"', b'"\xf4\x90\x80\x80"', b'"\xe9"', b'"e\xcc\x81"', b'"\xc3\xa9"',
    b'"\xe2\x80\xae"', b'"a\\nb"', b'"line\\r\\nbreak"', b'"\t"', b'"\x01"', b'"\\"', b'"\\x"',
    b'"' + b"x" * 5000 + b'"', b"[]", b"{}", b"[1,2]", b'{"a":1}', b"[null]", b'["k3v9q2m8x7ad"]',
    b"[" * 40 + b"]" * 40, b"[" * 512 + b"]" * 512, b"[" * 513 + b"]" * 513, b'{"a":' * 300 + b"1" + b"}" * 300,
    b'"k3v9q2m8x7ad"', b'"K3V9Q2M8X7AD"', b'"k3v9q2m8x7a"', b'"k3v9q2m8x7adx"', b'"iiiiiiiiiiii"', b'"../../etc/pa"',
    b'"m0"', b'"m01"', b'"m-1"', b'"m1 "', b'"m99999999999999999999999"', b'"m9223372036854775808"', b'"2.0"',
    b"NaN", b"Infinity", b"[1,]", b'{"a":1,}', b"01", b".5", b"1.", b"+1", b"0x10", b"'x'", b"nul", b"",
]
VALID_VALUE = {
    "client": lambda f: b'"fuzz"', "name": lambda f: b'"Fuzz \xc3\xa9"', "title": lambda f: b'"t%d"' % f.rng.randrange(1000),
    "system": lambda f: b'"be terse"', "model": lambda f: b'"fake-model"', "limit": lambda f: b"%d" % f.rng.randrange(1, 50),
    "history": lambda f: b"%d" % f.rng.randrange(0, 20), "before": lambda f: b'"m%d"' % f.rng.randrange(1, 9),
    "content": lambda f: b'"fuzz %d"' % f.rng.randrange(1 << 30),
    "conversation": lambda f: json.dumps(f.rng.choice(f.conversations)).encode(),
}
RANDOM_METHODS = [b'""', b'"x"', b'"status "', b'"STATUS"', b'"rpc.discover"', b"1", b"null", b"[]", b'"\\u0000"',
                  b'"status\\u0000"', b'"' + b"m" * 3000 + b'"']


def obj(pairs):
    return b"{" + b",".join(b'"%s":%s' % (k, v) for k, v in pairs) + b"}"


class Generator:
    def __init__(self, rng, methods, conversations):
        self.rng, self.methods, self.conversations = rng, methods, conversations
        self.next_id = 1
        self.sweep = list(self._sweep())
        self.queue = []

    def fresh_id(self):
        self.next_id += 1
        if self.rng.random() < 0.5:
            return b"%d" % self.next_id
        return json.dumps("f-%d" % self.next_id).encode()

    def valid_params(self, method, skip=None):
        return [(p.encode(), VALID_VALUE.get(p, lambda f: b'"x"')(self)) for p in self.methods[method] if p != skip]

    def request(self, method, params, rid=None):
        return obj([(b"jsonrpc", b'"2.0"'), (b"id", rid or self.fresh_id()), (b"method", json.dumps(method).encode()),
                    (b"params", obj(params))])

    def _sweep(self):
        """Every hostile value for every parameter of every method, and for the frame's own keys.
        A valid `conversation.delete` is left out so the conversations made at start survive."""
        for method, params in self.methods.items():
            for param in params + ["unknown_param"]:
                for value in HOSTILE:
                    yield self.request(method, self.valid_params(method, skip=param) + [(param.encode(), value)])
            for value in HOSTILE:
                yield obj([(b"jsonrpc", b'"2.0"'), (b"id", self.fresh_id()), (b"method", json.dumps(method).encode()),
                           (b"params", value)])
        for value in HOSTILE:
            yield obj([(b"jsonrpc", b'"2.0"'), (b"id", value), (b"method", b'"status"')])
            yield obj([(b"jsonrpc", value), (b"id", self.fresh_id()), (b"method", b'"status"')])
            yield obj([(b"jsonrpc", b'"2.0"'), (b"id", self.fresh_id()), (b"method", value)])
            yield obj([(b"jsonrpc", b'"2.0"'), (b"id", self.fresh_id()), (b"result", value)])
            yield obj([(b"jsonrpc", b'"2.0"'), (b"id", self.fresh_id()), (b"error", value)])
            yield value

    def valid(self):
        method = self.rng.choice(list(self.methods))
        return self.request(method, self.valid_params(method))

    def line(self):
        """One line, without its terminator (it may still hold CR)."""
        if self.queue:
            return self.queue.pop(0)
        if self.sweep and self.rng.random() < 0.5:
            return self.sweep.pop(0)
        r, rng = self.rng.random(), self.rng
        if r < 0.03:
            # Attach, then send: this connection gets notifications, and is often closed
            # abruptly while attached.
            conversation = [(b"conversation", VALID_VALUE["conversation"](self))]
            self.queue.append(self.request("message.send", conversation + [(b"content", b'"attached %d"' % self.next_id)]))
            return self.request("conversation.attach", conversation)
        if r < 0.10:
            return bytes(rng.randrange(256) for _ in range(rng.randrange(0, 200))).replace(b"\n", b" ")
        if r < 0.20:
            line = self.valid()
            return line[:rng.randrange(len(line))]                       # truncated JSON
        if r < 0.40:
            return self.mutate(self.valid())
        if r < 0.48:
            method = rng.choice(list(self.methods))
            params = self.valid_params(method)
            if params:
                i = rng.randrange(len(params))
                params[i] = (params[i][0], rng.choice(HOSTILE))
            return self.request(method, params)
        if r < 0.53:
            n = rng.choice([1, 100, 511, 512, 513, 600, 2000, MAX_LINE // 2 - 100])
            inner = rng.choice([b"[" * n + b"]" * n, b"[" * n, b"{\"a\":" * min(n, 6000) + b"1" + b"}" * min(n, 6000),
                                b"[" * n + b"]" * (n - 1)])
            return rng.choice([inner, self.request("status", [(b"x", inner)])])[:MAX_LINE - 1]
        if r < 0.58:
            number = rng.choice([b"1" * rng.randrange(1, 5000), b"1e" + b"9" * rng.randrange(1, 30), b"-0.0e-0",
                                 b"0." + b"0" * 400 + b"1", b"123456789012345678901234567890.5"])
            return obj([(b"jsonrpc", b'"2.0"'), (b"id", number), (b"method", b'"conversation.list"'),
                        (b"params", obj([(b"limit", number)]))])
        if r < 0.62:
            method = rng.choice(list(self.methods))
            return obj([(b"jsonrpc", b'"2.0"'), (b"method", json.dumps(method).encode()),
                        (b"params", obj(self.valid_params(method)))])          # notification
        if r < 0.65:
            return obj([(b"jsonrpc", b'"2.0"'), (b"id", self.fresh_id()), (b"method", rng.choice(RANDOM_METHODS))])
        if r < 0.68:
            return rng.choice([b"", b" ", b"\t \t", b"\r", b" \r ", b"\x0c", b"\xef\xbb\xbf", b"\x00"])
        if r < 0.71:                                                             # BOM, duplicate keys
            return rng.choice([b"\xef\xbb\xbf" + self.valid(),
                               b'{"jsonrpc":"2.0","id":1,"id":"dup","method":"status"}',
                               b'{"jsonrpc":"2.0","method":"status","method":"x","id":%d}' % self.next_id,
                               b'{"jsonrpc":"2.0","jsonrpc":"1.0","id":7,"method":"status"}'])
        if r < 0.73:                                                             # exactly the limit
            head = b'{"jsonrpc":"2.0","id":"big","method":"message.send","params":{"conversation":"k3v9q2m8x7ad","content":"'
            return head + b"y" * (MAX_LINE - len(head) - 3) + b'"}}'
        if r < 0.76:
            return obj([(b"jsonrpc", b'"2.0"'), (b"id", self.fresh_id()), (b"method", b'"message.send"'),
                        (b"params", obj([(b"conversation", VALID_VALUE["conversation"](self)),
                                         (b"content", b'"' + rng.choice([b"\xff", b"\\ud800", b"\xed\xa0\x80", b"\\u0000"]) + b'"')]))])
        if r < 0.80:
            return self.mutate(self.mutate(self.valid()))
        return self.mutate(self.valid())

    def mutate(self, line):
        data = bytearray(line)
        for _ in range(self.rng.randrange(1, 6)):
            op = self.rng.randrange(6)
            pos = self.rng.randrange(len(data) + 1)
            if op == 0 and data:
                data[min(pos, len(data) - 1)] = self.rng.randrange(256)
            elif op == 1:
                data[pos:pos] = bytes([self.rng.choice(b'{}[]",:\\0123456789-+.eEtrufalsn \x00\xff\xc3\xa9')])
            elif op == 2 and data:
                del data[pos:pos + self.rng.randrange(1, 8)]
            elif op == 3:
                data[pos:pos] = self.rng.choice(HOSTILE)
            elif op == 4 and data:
                end = min(len(data), pos + self.rng.randrange(1, 40))
                data[pos:pos] = data[pos:end] * self.rng.randrange(1, 20)
            elif op == 5 and len(data) > 1:
                i, j = self.rng.randrange(len(data)), self.rng.randrange(len(data))
                data[i], data[j] = data[j], data[i]
        out = bytes(data).replace(b"\n", b" ")
        return out[:MAX_LINE - 1]


# --------------------------------------------------------------------------------------------
# Connections.

class Connection:
    def __init__(self, path, timeout=10.0):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.buffer = b""
        self.eof = False

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def frames(self, data):
        """Splits received bytes into complete lines, keeping the tail."""
        self.buffer += data
        *lines, self.buffer = self.buffer.split(b"\n")
        return lines

    def exchange(self, chunks, done, deadline):
        """Writes `chunks` while reading; returns the lines received once all is written and
        `done(lines)` holds, or at EOF."""
        self.sock.setblocking(False)
        lines, pending = [], list(chunks)
        out = pending.pop(0) if pending else b""
        while True:
            if self.eof or (not out and not pending and done(lines)):
                return lines
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no answer within %.0f s" % ROUND_DEADLINE)
            wants_write = bool(out or pending)
            readable, writable, _ = select.select([self.sock], [self.sock] if wants_write else [], [], min(left, 0.5))
            if readable:
                try:
                    data = self.sock.recv(1 << 20)
                except (BlockingIOError, InterruptedError):
                    data = None
                except ConnectionResetError:
                    data = b""
                if data == b"":
                    self.eof = True
                elif data:
                    lines += self.frames(data)
            if writable:
                if not out and pending:
                    out = pending.pop(0)
                try:
                    sent = self.sock.send(out)
                    out = out[sent:]
                except (BlockingIOError, InterruptedError):
                    pass
                except (BrokenPipeError, ConnectionResetError):
                    out, pending = b"", []


def split_randomly(rng, data):
    chunks, i = [], 0
    while i < len(data):
        size = rng.choice([1, 2, 7, 64, 1000, 4096, 65536, len(data)])
        chunks.append(data[i:i + size])
        i += size
    return chunks


def check_frame(raw, context):
    try:
        frame = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        raise Failure("%s: the daemon wrote a line that is not JSON (%s): %r" % (context, error, raw[:300]))
    if not isinstance(frame, dict) or frame.get("jsonrpc") != "2.0":
        raise Failure("%s: the daemon wrote a frame that is not JSON-RPC 2.0: %r" % (context, raw[:300]))
    if "method" in frame:
        return None  # a notification
    if "id" not in frame or ("result" in frame) == ("error" in frame):
        raise Failure("%s: malformed response: %r" % (context, raw[:300]))
    if "error" in frame:
        error = frame["error"]
        if not isinstance(error, dict) or not isinstance(error.get("code"), int) or not isinstance(error.get("message"), str):
            raise Failure("%s: malformed error object: %r" % (context, raw[:300]))
    return frame


# --------------------------------------------------------------------------------------------
# The well-behaved client.

class StatusProbe(threading.Thread):
    def __init__(self, path):
        super().__init__(daemon=True)
        self.path, self.stop = path, threading.Event()
        self.count, self.late, self.worst, self.error = 0, [], 0.0, None

    def run(self):
        try:
            conn = Connection(self.path, timeout=STATUS_DEADLINE)
            n = 0
            while not self.stop.is_set():
                n += 1
                started = time.monotonic()
                conn.sock.sendall(b'{"jsonrpc":"2.0","id":%d,"method":"status"}\n' % n)
                while True:
                    try:
                        data = conn.sock.recv(65536)
                    except socket.timeout:
                        raise Failure("well-behaved client: no `status` answer within %.1f s" % STATUS_DEADLINE)
                    if not data:
                        raise Failure("well-behaved client: the daemon closed its connection")
                    frames = [check_frame(line, "status client") for line in conn.frames(data)]
                    if any(f and f.get("id") == n and "result" in f for f in frames):
                        break
                    if time.monotonic() - started > STATUS_DEADLINE:
                        raise Failure("well-behaved client: no `status` answer within %.1f s" % STATUS_DEADLINE)
                elapsed = time.monotonic() - started
                self.worst = max(self.worst, elapsed)
                if elapsed > STATUS_DEADLINE:
                    self.late.append(elapsed)
                self.count += 1
                self.stop.wait(0.1)
            conn.close()
        except Exception as error:  # reported by the main thread
            self.error = error


# --------------------------------------------------------------------------------------------
# The daemon.

def peak_rss_kib(pid):
    """The process's peak resident set (VmHWM) in KiB."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0

def _die_with_parent():
    """In the child before exec: SIGTERM it if this script dies without stopping it."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class Daemon:
    def __init__(self, bin_dir, work, extra_config=""):
        self.work = work
        self.socket_path = os.path.join(work, "confabd.sock")
        self.blocker = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.blocker.bind(("127.0.0.1", 0))   # bound, never listening: connections are refused
        port = self.blocker.getsockname()[1]
        config = os.path.join(work, "config.toml")
        with open(config, "w") as f:
            f.write('[upstream]\nbase_url = "http://127.0.0.1:%d/v1"\nmodel = "fake-model"\napi_key = "fuzz"\n'
                    "timeout_seconds = 5\nconnect_timeout_seconds = 2\nmax_retries = 0\n"
                    "[limits]\nmax_line_bytes = %d\nmax_clients = 64\n[storage]\nfsync = false\n" % (port, MAX_LINE))
            f.write(extra_config)
        os.chmod(config, 0o600)
        self.stderr = open(os.path.join(work, "confabd.log"), "wb")
        env = dict(os.environ, XDG_RUNTIME_DIR=work, XDG_DATA_HOME=work, XDG_CONFIG_HOME=work)
        for key in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "CREDENTIALS_DIRECTORY", "LISTEN_FDS", "LISTEN_PID", "NOTIFY_SOCKET"):
            env.pop(key, None)
        self.proc = subprocess.Popen([os.path.join(bin_dir, "confabd"), "--socket", self.socket_path, "--data-dir",
                                      os.path.join(work, "data"), "--config", config, "--log-level", "warning"],
                                     stdin=subprocess.DEVNULL, stdout=self.stderr, stderr=self.stderr, env=env,
                                     preexec_fn=_die_with_parent)
        # Ready once a connection is taken (the socket file appears at bind, before listen).
        deadline = time.monotonic() + 15
        while True:
            try:
                probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                probe.connect(self.socket_path)
                probe.close()
                break
            except OSError:
                probe.close()
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise SystemExit("confabd did not start; see %s" % os.path.join(work, "confabd.log"))
            time.sleep(0.05)

    def alive(self, context):
        if self.proc.poll() is not None:
            raise Failure("confabd died (exit status %s) %s; log: %s" % (self.proc.returncode, context,
                                                                         os.path.join(self.work, "confabd.log")))

    def stop(self):
        """SIGTERM to the daemon this script started; its exit status, or None if it hung (then killed)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                return None
        self.blocker.close()
        return self.proc.returncode


# --------------------------------------------------------------------------------------------

class Fuzzer:
    def __init__(self, args, daemon, rng):
        self.args, self.daemon, self.rng = args, daemon, rng
        self.counts = dict.fromkeys(["lines", "requests", "null-id errors", "silent lines", "ambiguous", "responses",
                                     "notifications received", "rounds", "too-long connections",
                                     "half-line closes", "abrupt closes", "lost on close"], 0)
        self.conversations = self.setup()
        self.gen = Generator(rng, methods_from_doc(), self.conversations)

    def setup(self):
        conn = Connection(self.daemon.socket_path)
        ids = []
        wire = b'{"jsonrpc":"2.0","id":"h","method":"hello","params":{"client":"fuzz-socket"}}\n'
        for i in range(3):
            wire += b'{"jsonrpc":"2.0","id":"c%d","method":"conversation.create","params":{"title":"fuzz %d"}}\n' % (i, i)
        lines = conn.exchange([wire], lambda got: len(got) >= 4, time.monotonic() + 10)
        for raw in lines:
            frame = json.loads(raw)
            if "result" in frame and "conversation" in frame["result"]:
                ids.append(frame["result"]["conversation"]["id"])
        if len(ids) != 3:
            raise SystemExit("setup failed: %r" % lines)
        send = b'{"jsonrpc":"2.0","id":"s","method":"message.send","params":{"conversation":"%s","content":"hi"}}\n' % ids[0].encode()
        conn.exchange([send], lambda got: any(b'"id":"s"' in line for line in got), time.monotonic() + 10)
        conn.close()
        return ids + ["k3v9q2m8x7ad", "000000000000"]

    def batch(self, size):
        wires, expected = [], []
        for _ in range(size):
            line = self.gen.line()
            # (a CR before the LF counts toward the limit: a line of exactly the limit ends in LF)
            wire = line + (b"\r\n" if self.rng.random() < 0.2 and len(line) < MAX_LINE else b"\n")
            wires.append(wire)
            e = expect(seen_line(wire))
            self.counts["lines"] += 1
            if e is None:
                self.counts["silent lines"] += 1
            elif e.optional or e.ids is None:
                self.counts["ambiguous"] += 1
            elif e.ids == {NULL}:
                self.counts["null-id errors"] += 1
            else:
                self.counts["requests"] += 1
            expected.append(e)
        return wires, expected

    def responses(self, lines, context):
        got = []
        for raw in lines:
            frame = check_frame(raw, context)
            if frame is None:
                self.counts["notifications received"] += 1
                continue
            got.append(canonical(frame["id"]))
            self.counts["responses"] += 1
        return got

    def explain(self, wires, expected, got, context):
        path = os.path.join(self.daemon.work, "failing-round.txt")
        with open(path, "w") as f:
            for wire, e in zip(wires, expected):
                f.write("%r\n    -> %r\n" % (wire, e))
            f.write("\nresponse ids, in order:\n")
            for g in got:
                f.write("  %r\n" % (g,))
        # The first place where a greedy walk loses track.
        j, i = 0, 0
        pairs = [(w, e) for w, e in zip(wires, expected) if e is not None]
        while i < len(got) and j < len(pairs):
            if pairs[j][1].allows(got[i]):
                i, j = i + 1, j + 1
            elif pairs[j][1].optional:
                j += 1
            else:
                break
        where = ""
        if j < len(pairs):
            where = "; first unmatched line %r expected %r, got %r" % (pairs[j][0][:200], pairs[j][1], got[i] if i < len(got) else "nothing")
        return Failure("%s: answers do not match the lines sent (%d lines, %d answers)%s; round saved to %s"
                       % (context, len(wires), len(got), where, path))

    def normal_round(self, n):
        wires, expected = self.batch(self.rng.randrange(1, 40))
        marker = b"sync-%d" % n
        wires.append(b'{"jsonrpc":"2.0","id":"%s","method":"status"}\n' % marker)
        conn = Connection(self.daemon.socket_path)
        try:
            want = b'"id":"%s"' % marker
            lines = conn.exchange(split_randomly(self.rng, b"".join(wires)), lambda got: any(want in l for l in got),
                                  time.monotonic() + ROUND_DEADLINE)
        except TimeoutError as error:
            raise Failure("round %d: %s (lines saved by --keep)" % (n, error))
        finally:
            conn.close()
        context = "round %d" % n
        got = self.responses(lines, context)
        if not got or got[-1] != ("s", marker.decode()):
            raise self.explain(wires, expected, got, context + " (connection ended before the marker)")
        got.pop()
        real = [e for e in expected if e is not None]
        if not matches(real, got):
            raise self.explain(wires, expected, got, context)

    def too_long_round(self, n):
        wires, expected = self.batch(self.rng.randrange(0, 10))
        kind = self.rng.randrange(3)
        if kind == 0:
            long_line = b"z" * (MAX_LINE + 1) + b"\n"              # one byte over
        elif kind == 1:
            long_line = b"x" * (MAX_LINE + 1) + b"\r\n"
        else:
            long_line = bytes(self.rng.randrange(256) for _ in range(256)).replace(b"\n", b"") * (MAX_LINE // 128)
        after = self.valid_tail()
        conn = Connection(self.daemon.socket_path)
        context = "too-long round %d" % n
        try:
            lines = conn.exchange(split_randomly(self.rng, b"".join(wires) + long_line + after), lambda got: False,
                                  time.monotonic() + ROUND_DEADLINE)
        except TimeoutError:
            raise Failure("%s: the connection was not closed after a line over the limit" % context)
        finally:
            conn.close()
        if conn.buffer:
            raise Failure("%s: the daemon's last frame was cut: %r" % (context, conn.buffer[:200]))
        frames = [check_frame(raw, context) for raw in lines]
        frames = [f for f in frames if f is not None]
        if not frames or frames[-1].get("id") is not None or frames[-1].get("error", {}).get("code") != -32002:
            raise Failure("%s: expected error -32002 with id null as the last frame, got %r" % (context, frames[-1:]))
        got = [canonical(f["id"]) for f in frames[:-1]]
        real = [e for e in expected if e is not None]
        if not matches(real, got, prefix=True):
            raise self.explain(wires, expected, got, context)
        self.counts["lost on close"] += len(real) - len(got) if len(got) < len(real) else 0
        self.counts["too-long connections"] += 1

    def valid_tail(self):
        return b'{"jsonrpc":"2.0","id":"after","method":"status"}\n'

    def half_line_round(self, n):
        wires, expected = self.batch(self.rng.randrange(0, 20))
        partial = self.gen.valid()
        partial = partial[:self.rng.randrange(1, len(partial))]
        conn = Connection(self.daemon.socket_path)
        context = "half-line round %d" % n
        try:
            if self.rng.random() < 0.5:
                # Abrupt: everything out, then close without reading (answers still queued).
                try:
                    conn.sock.sendall(b"".join(wires) + partial)
                except OSError:
                    pass
                self.counts["abrupt closes"] += 1
                return
            lines = conn.exchange(split_randomly(self.rng, b"".join(wires) + partial), lambda got: True,
                                  time.monotonic() + ROUND_DEADLINE)
            conn.sock.setblocking(True)
            conn.sock.settimeout(ROUND_DEADLINE)
            conn.sock.shutdown(socket.SHUT_WR)
            while True:
                try:
                    data = conn.sock.recv(1 << 20)
                except socket.timeout:
                    raise Failure("%s: no EOF after the client closed its side" % context)
                except ConnectionResetError:
                    data = b""
                if not data:
                    break
                lines += conn.frames(data)
            if conn.buffer:
                raise Failure("%s: the daemon's last frame was cut: %r" % (context, conn.buffer[:200]))
            got = self.responses(lines, context)
            real = [e for e in expected if e is not None]
            if not matches(real, got, prefix=True):
                raise self.explain(wires, expected, got, context)
            self.counts["lost on close"] += max(0, len(real) - len(got))
            self.counts["half-line closes"] += 1
        finally:
            conn.close()

    def status(self, conn, rid):
        conn.sock.sendall(b'{"jsonrpc":"2.0","id":"%s","method":"status"}\n' % rid.encode())
        lines = conn.exchange([], lambda got: any(b'"id":"%s"' % rid.encode() in line for line in got), time.monotonic() + 10)
        for raw in lines:
            frame = json.loads(raw)
            if frame.get("id") == rid:
                return frame["result"]
        raise Failure("no `status` answer to %s" % rid)

    def flood_round(self, count):
        """`count` pipelined searches written without blocking and never read, then a hang-up."""
        before = peak_rss_kib(self.daemon.proc.pid)
        other = Connection(self.daemon.socket_path)
        baseline = self.status(other, "flood-before")["clients"]
        payload = b"".join(b'{"jsonrpc":"2.0","id":%d,"method":"conversation.search","params":{"query":"hi"}}\n' % i
                           for i in range(1, count + 1))
        flood = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        flood.connect(self.daemon.socket_path)
        flood.setblocking(False)
        offset = 0
        dropped = False
        while offset < len(payload):
            try:
                offset += flood.send(payload[offset:offset + 262144])
            except BlockingIOError:
                # Not writable for two seconds: the daemon holds back.
                if not select.select([], [flood], [], 2.0)[1]:
                    break
            except (BrokenPipeError, ConnectionResetError):
                # Over its hard limit: the daemon dropped it, which is allowed too.
                dropped = True
                break
        asked = time.monotonic()
        other.sock.sendall(b'{"jsonrpc":"2.0","id":"flood-search","method":"conversation.search","params":{"query":"hi"}}\n')
        other.exchange([], lambda got: any(b'"id":"flood-search"' in line for line in got), time.monotonic() + 60)
        other_answer = time.monotonic() - asked
        hung_up = time.monotonic()
        flood.close()
        stopped = None
        n = 0
        while time.monotonic() - hung_up < FLOOD_STOP_DEADLINE:
            n += 1
            now = self.status(other, "flood-after-%d" % n)
            if now["clients"] == baseline and now.get("searches", 0) == 0:
                stopped = time.monotonic() - hung_up
                break
            time.sleep(0.01)
        other.close()
        peak = peak_rss_kib(self.daemon.proc.pid)
        self.flood = (offset, len(payload), before, peak, stopped, other_answer, dropped)
        if offset >= len(payload):
            raise Failure("the flood's %d bytes were all taken before any was answered: no backpressure" % len(payload))
        if stopped is None:
            raise Failure("the flood's searches or client were still there %.1f s after it hung up" % FLOOD_STOP_DEADLINE)
        if peak - before > FLOOD_RSS_BOUND_KIB:
            raise Failure("the flood grew the daemon's peak RSS by %d KiB" % (peak - before))

    def mcp_round(self, seconds):
        """Hostile MCP servers restarted one after another for `seconds`, each misbehaving
        once listed, while another client's `status` is timed."""
        pid = self.daemon.proc.pid
        before = peak_rss_kib(pid)
        names = sorted(hostile_servers(0))
        client = Connection(self.daemon.socket_path, timeout=60)
        other = Connection(self.daemon.socket_path, timeout=10)
        restarts, states, timings = 0, {}, []
        ended = time.monotonic() + seconds
        n = 0
        while time.monotonic() < ended:
            n += 1
            name = self.rng.choice(names)
            rid = "mcp-%d" % n
            client.sock.sendall(b'{"jsonrpc":"2.0","id":"%s","method":"mcp.restart","params":{"server":"%s"}}\n'
                                % (rid.encode(), name.encode()))
            restarts += 1
            # Until its answer (the server ready or failed) and a while after, as it misbehaves.
            answered = None
            linger = time.monotonic() + self.rng.uniform(0.2, 2.0)
            give_up = time.monotonic() + 60
            while answered is None or time.monotonic() < min(linger, ended):
                if time.monotonic() > give_up:
                    raise Failure("mcp round: no answer to mcp.restart of %s within 60 s" % name)
                asked = time.monotonic()
                self.status(other, "mcp-status-%d-%d" % (n, len(timings)))
                timings.append(time.monotonic() - asked)
                if answered is None:
                    ready, _, _ = select.select([client.sock], [], [], 0.05)
                    if ready:
                        data = client.sock.recv(1 << 20)
                        if not data:
                            raise Failure("mcp round: the daemon closed the connection that restarts servers")
                        for raw in client.frames(data):
                            frame = check_frame(raw, "mcp round")
                            if frame and frame.get("id") == rid:
                                answered = frame.get("result", {}).get("server", {}).get("state", "error: %r" % frame.get("error"))
                else:
                    time.sleep(0.05)
                self.daemon.alive("during the mcp round (server %s)" % name)
            # How the server stands after misbehaving for a while, as tools.list says.
            other.sock.sendall(b'{"jsonrpc":"2.0","id":"list-%d","method":"tools.list"}\n' % n)
            lines = other.exchange([], lambda got: any(b'"id":"list-%d"' % n in line for line in got), time.monotonic() + 10)
            for raw in lines:
                frame = json.loads(raw)
                if frame.get("id") == "list-%d" % n:
                    for server in frame["result"]["servers"]:
                        if server["name"] == name:
                            key = "%s: started %s, then %s" % (name, answered, server["state"])
                            if server.get("error"):
                                key += ": " + server["error"][:100]
                            states[key] = states.get(key, 0) + 1
        client.close()
        other.close()
        peak = peak_rss_kib(pid)
        timings.sort()
        self.mcp = (restarts, states, before, peak, len(timings), timings[len(timings) // 2] if timings else 0,
                    timings[-1] if timings else 0)
        if peak - before > MCP_RSS_BOUND_KIB:
            raise Failure("the hostile MCP servers grew the daemon's peak RSS by %d KiB" % (peak - before))

    def run(self):
        probe = StatusProbe(self.daemon.socket_path)
        probe.start()
        started = time.monotonic()
        n = 0
        try:
            if self.args.flood > 0:
                self.flood_round(self.args.flood)
                self.daemon.alive("after the flood")
            if self.args.mcp_seconds > 0:
                mcp_started = time.monotonic()
                self.mcp_round(self.args.mcp_seconds)
                started += time.monotonic() - mcp_started   # --seconds is for the rounds below
                self.daemon.alive("after the mcp round")
                if probe.error:
                    raise probe.error
                if probe.late:
                    raise Failure("well-behaved client waited %.2f s for `status` during the mcp round" % probe.late[0])
            while time.monotonic() - started < self.args.seconds and self.counts["lines"] < self.args.count:
                n += 1
                r = self.rng.random()
                if r < 0.80:
                    self.normal_round(n)
                elif r < 0.90:
                    self.too_long_round(n)
                else:
                    self.half_line_round(n)
                self.counts["rounds"] += 1
                self.daemon.alive("after round %d" % n)
                if probe.error:
                    raise probe.error
                if probe.late:
                    raise Failure("well-behaved client waited %.2f s for `status`" % probe.late[0])
        finally:
            probe.stop.set()
            probe.join(5)
        if probe.error:
            raise probe.error
        elapsed = time.monotonic() - started
        return elapsed, probe


# --------------------------------------------------------------------------------------------
# The gateway round: hostile WebSocket traffic against the release confab-web in front of the
# same confabd, as share-link holders and pages would send it.

class WebSocketClient:
    """A WebSocket client on a raw socket (no library): the handshake, masked frames out,
    frames in."""

    def __init__(self, port, token, path="/ws", origin=None, timeout=10.0):
        import base64
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        origin = origin or "http://127.0.0.1:%d" % port
        self.sock.sendall(("GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nOrigin: %s\r\nConnection: Upgrade\r\n"
                           "Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: %s\r\n"
                           "Sec-WebSocket-Protocol: confab, confab-token.%s\r\n\r\n" % (path, port, origin, key, token)).encode())
        self.buffer = b""
        while b"\r\n\r\n" not in self.buffer:
            data = self.sock.recv(4096)
            if not data:
                raise OSError("closed during the handshake")
            self.buffer += data
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        self.status = int(head.split(b" ", 2)[1])

    def frame(self, opcode, payload, fin=True, length=None):
        import struct
        n = len(payload) if length is None else length
        first = bytes([(0x80 if fin else 0) | opcode])
        if n < 126:
            head = first + bytes([0x80 | n])
        elif n < 65536:
            head = first + bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            head = first + bytes([0x80 | 127]) + struct.pack(">Q", n)
        mask = os.urandom(4)
        return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)) if len(payload) < 4096 else \
            head + mask + _masked(payload, mask)

    def send_text(self, text):
        self.sock.sendall(self.frame(1, text if isinstance(text, bytes) else text.encode()))

    def read_frame(self, timeout):
        """(opcode, payload), or None on time-out; raises OSError when closed."""
        import struct
        self.sock.settimeout(timeout)
        def need(n):
            while len(self.buffer) < n:
                data = self.sock.recv(1 << 16)
                if not data:
                    raise OSError("closed")
                self.buffer += data
        try:
            need(2)
            n = self.buffer[1] & 0x7F
            at = 2
            if n == 126:
                need(4)
                n = struct.unpack(">H", self.buffer[2:4])[0]
                at = 4
            elif n == 127:
                need(10)
                n = struct.unpack(">Q", self.buffer[2:10])[0]
                at = 10
            need(at + n)
        except socket.timeout:
            return None
        opcode, payload = self.buffer[0] & 0x0F, self.buffer[at:at + n]
        self.buffer = self.buffer[at + n:]
        return opcode, payload

    def wait_event(self, kind, timeout):
        """The first page event of this type, else None (closed or late)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                frame = self.read_frame(max(0.01, deadline - time.monotonic()))
            except OSError:
                return None
            if frame is None:
                return None
            if frame[0] == 8:
                return {"type": "closed", "code": int.from_bytes(frame[1][:2], "big") if len(frame[1]) >= 2 else 0,
                        "reason": frame[1][2:].decode("utf-8", "replace")}
            if frame[0] == 1:
                try:
                    event = json.loads(frame[1])
                except ValueError:
                    raise Failure("the gateway sent a text frame that is not JSON: %r" % frame[1][:200])
                if event.get("type") == kind:
                    return event
        return None

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def _masked(payload, mask):
    # Fast enough for megabytes: XOR as integers.
    n = len(payload)
    key = (mask * (n // 4 + 1))[:n]
    return (int.from_bytes(payload, "little") ^ int.from_bytes(key, "little")).to_bytes(n, "little")


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class GatewayRound:
    """confab-web before the same confabd, hit for `seconds` with: junk text and binary
    frames (not JSON, JSON of every wrong shape, invalid UTF-8, unknown ops, controls),
    frames over the 1 MiB message bound and frame headers claiming 2^40 bytes, fragments
    never finished, floods of actions written without reading a frame, and many sockets on
    one share link (past web.max_pages_per_link: refused with 4429). Meanwhile the owner's page
    asks for a download ticket every 100 ms (a gateway round trip) and opens a fresh page
    every second (a daemon round trip); the times are reported. Checks: both processes live
    throughout; the refusals past the bound are 4429; the owner still opens a page at the end;
    the gateway's peak RSS stays under GATEWAY_RSS_BOUND_KIB."""

    GATEWAY_RSS_BOUND_KIB = 512 * 1024

    def __init__(self, bin_dir, work, daemon, rng):
        self.daemon, self.rng, self.work = daemon, rng, work
        self.conversations = self.create_conversations()
        self.port = None
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.common = ["--config", os.path.join(work, "config.toml"), "--socket", daemon.socket_path,
                       "--state-dir", os.path.join(work, "web"), "--listen", "127.0.0.1:%d" % self.port]
        exe = os.path.join(bin_dir, "confab-web")
        def web(*arguments):
            done = subprocess.run([exe, *arguments, *self.common], capture_output=True, text=True, timeout=60)
            if done.returncode != 0:
                raise Failure("confab-web %s: %s" % (arguments[0], done.stderr.strip()))
            return done.stdout.strip()
        self.owner = web("url").split("#token=", 1)[1]
        self.write_link = web("share", self.conversations[0], "--write", "--expires", "1h").split("#token=", 1)[1]
        self.read_link = web("share", self.conversations[1], "--read-only", "--expires", "1h").split("#token=", 1)[1]
        self.log = open(os.path.join(work, "confab-web.log"), "wb")
        self.proc = subprocess.Popen([exe, "serve", *self.common, "--log-level", "warning"], stdin=subprocess.DEVNULL,
                                     stdout=self.log, stderr=self.log, preexec_fn=_die_with_parent)
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("confab-web did not start; see %s" % os.path.join(work, "confab-web.log"))
                time.sleep(0.05)
        self.counts = dict.fromkeys(["sockets", "frames", "junk frames", "huge frames", "flood actions",
                                     "refused past the bound", "closed by the gateway"], 0)
        self.ticket_times, self.page_times = [], []

    def create_conversations(self):
        """Three of its own (the socket rounds may have deleted theirs), each with a message."""
        conn = Connection(self.daemon.socket_path)
        wire = b'{"jsonrpc":"2.0","id":"h","method":"hello","params":{"client":"fuzz-gateway"}}\n'
        for i in range(3):
            wire += b'{"jsonrpc":"2.0","id":"c%d","method":"conversation.create","params":{"title":"gateway %d"}}\n' % (i, i)
        ids = []
        for raw in conn.exchange([wire], lambda got: len(got) >= 4, time.monotonic() + 10):
            frame = json.loads(raw)
            if "result" in frame and "conversation" in frame["result"]:
                ids.append(frame["result"]["conversation"]["id"])
        if len(ids) != 3:
            raise Failure("could not create the gateway round's conversations")
        for i, conversation in enumerate(ids):
            send = b'{"jsonrpc":"2.0","id":"s%d","method":"message.send","params":{"conversation":"%s","content":"hi"}}\n' % (
                i, conversation.encode())
            conn.exchange([send], lambda got: any(b'"id":"s%d"' % i in line for line in got), time.monotonic() + 10)
        conn.close()
        return ids

    def alive(self, context):
        self.daemon.alive(context)
        if self.proc.poll() is not None:
            raise Failure("confab-web died (exit status %s) %s" % (self.proc.returncode, context))

    def page(self, token, conversation):
        ws = WebSocketClient(self.port, token, "/ws?c=" + conversation)
        self.counts["sockets"] += 1
        return ws

    def junk(self):
        r = self.rng
        choices = [
            lambda: os.urandom(r.randrange(1, 300)),
            lambda: b"\xff\xfe" + os.urandom(20),
            lambda: b"[]", lambda: b"null", lambda: b"42", lambda: b'"op"', lambda: b"{",
            lambda: json.dumps({"op": r.choice(["send", "cancel", "retry", "continue", "approve", "download", "x", ""]),
                                "text": r.choice([None, 1, [], {}, "", "x" * r.randrange(0, 5000), "\u202e\x1b[2J"]),
                                "message": r.choice([None, "m1", "../..", "m" * 40, 7]),
                                "index": r.choice([None, -1, 0, 15, 16, 1 << 62, "0"]),
                                "call": r.choice([None, "c1", 3]), "allow": r.choice([None, True, "yes"])}).encode(),
            lambda: json.dumps({"op": "send", "text": "x", "nested": [[[[[[[[[[[[]]]]]]]]]]]] * 200}).encode(),
            lambda: b'{"op":"send","text":"' + b"\\u0000" * 1000 + b'"}',
        ]
        return r.choice(choices)()

    def junk_socket(self):
        token, conversation = self.rng.choice([(self.write_link, self.conversations[0]), (self.read_link, self.conversations[1]),
                                               (self.owner, self.conversations[2])])
        ws = self.page(token, conversation)
        try:
            ws.wait_event("state", 10)
            for _ in range(self.rng.randrange(1, 40)):
                kind = self.rng.random()
                if kind < 0.7:
                    ws.send_text(self.junk())
                    self.counts["junk frames"] += 1
                elif kind < 0.8:
                    ws.sock.sendall(ws.frame(2, os.urandom(self.rng.randrange(1, 2000))))   # binary
                elif kind < 0.85:
                    ws.sock.sendall(ws.frame(1, b'{"op":', fin=False))                    # a fragment, never finished
                elif kind < 0.9:
                    ws.sock.sendall(ws.frame(9, b"ping" * self.rng.randrange(0, 30)))     # pings (125 bytes at most)
                elif kind < 0.95:
                    ws.send_text(b'{"op":"send","text":"' + b"a" * ((1 << 20) + 10) + b'"}')  # over the 1 MiB bound
                    self.counts["huge frames"] += 1
                else:
                    ws.sock.sendall(ws.frame(1, b"", length=1 << 40) + b"x" * 100)  # claims 2^40 bytes
                    self.counts["huge frames"] += 1
                self.counts["frames"] += 1
        except OSError:
            self.counts["closed by the gateway"] += 1
        finally:
            ws.close()

    def flood_socket(self):
        """Actions written as fast as the socket takes them, no frame read, then a hang-up."""
        ws = self.page(self.write_link, self.conversations[0])
        try:
            ws.wait_event("state", 10)
            ws.sock.setblocking(False)
            action = ws.frame(1, b'{"op":"download","message":"m1","index":0}')
            cancel = ws.frame(1, b'{"op":"cancel"}')
            deadline = time.monotonic() + 2
            while time.monotonic() < deadline:
                try:
                    ws.sock.send((action + cancel) * 64)
                    self.counts["flood actions"] += 128
                except BlockingIOError:
                    select.select([], [ws.sock], [], 0.2)
        except OSError:
            self.counts["closed by the gateway"] += 1
        finally:
            ws.close()

    def many_sockets(self):
        held, refused = [], 0
        try:
            for _ in range(24):
                ws = self.page(self.read_link, self.conversations[1])
                event = ws.wait_event("state", 10)
                if event is None or event.get("type") == "closed":
                    closed = event or {}
                    if closed.get("code") != 4429:
                        raise Failure("a page past the bound ended otherwise than with 4429: %r" % closed)
                    refused += 1
                    ws.close()
                else:
                    held.append(ws)
        finally:
            for ws in held:
                ws.close()
        if refused == 0:
            raise Failure("24 pages on one read-only link were all let in")
        self.counts["refused past the bound"] += refused

    def run(self, seconds):
        import threading
        stop = threading.Event()
        errors = []
        def probe():
            try:
                owner = self.page(self.owner, self.conversations[2])
                if owner.wait_event("state", 10) is None:
                    raise Failure("the owner's page did not open")
                last_page = 0.0
                while not stop.is_set():
                    asked = time.monotonic()
                    owner.send_text('{"op":"download","message":"m1","index":0}')
                    if owner.wait_event("download", 30) is None:
                        raise Failure("the owner's page got no answer for 30 s")
                    self.ticket_times.append(time.monotonic() - asked)
                    if time.monotonic() - last_page > 1.0:
                        last_page = asked = time.monotonic()
                        fresh = self.page(self.owner, self.conversations[2])
                        event = fresh.wait_event("state", 30)
                        fresh.close()
                        if event is None or event.get("type") != "state":
                            raise Failure("a fresh owner's page did not open: %r" % event)
                        self.page_times.append(time.monotonic() - asked)
                    stop.wait(0.1)
                owner.close()
            except (Failure, OSError) as error:
                errors.append(error)
        thread = threading.Thread(target=probe, daemon=True)
        thread.start()
        before = {"confabd": rss_kib(self.daemon.proc.pid), "confab-web": rss_kib(self.proc.pid)}
        started = time.monotonic()
        n = 0
        try:
            while time.monotonic() - started < seconds and not errors:
                n += 1
                r = self.rng.random()
                if r < 0.75:
                    self.junk_socket()
                elif r < 0.9:
                    self.flood_socket()
                else:
                    self.many_sockets()
                self.alive("after gateway round %d" % n)
        finally:
            stop.set()
            thread.join(60)
        if errors:
            raise errors[0]
        self.alive("at the end of the gateway round")
        final = self.page(self.owner, self.conversations[2])
        if (final.wait_event("state", 30) or {}).get("type") != "state":
            raise Failure("the owner could not open a page after the gateway round")
        final.close()
        self.peaks = {"confabd": peak_rss_kib(self.daemon.proc.pid), "confab-web": peak_rss_kib(self.proc.pid)}
        self.before = before
        self.elapsed = time.monotonic() - started
        self.rounds = n
        if self.peaks["confab-web"] > self.GATEWAY_RSS_BOUND_KIB:
            raise Failure("confab-web's peak RSS reached %d KiB" % self.peaks["confab-web"])

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                return None
        return self.proc.returncode

    def report(self):
        def spread(times):
            if not times:
                return "none"
            ordered = sorted(times)
            return "median %.1f ms, p99 %.1f ms, worst %.1f ms (%d)" % (
                ordered[len(ordered) // 2] * 1000, ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000,
                ordered[-1] * 1000, len(ordered))
        c = self.counts
        print("gateway: %.0f s, %d rounds, %d sockets, %d frames (%d junk, %d over the bounds), %d flood actions, "
              "%d pages refused past the per-link bound (4429), %d sockets closed by the gateway"
              % (self.elapsed, self.rounds, c["sockets"], c["frames"], c["junk frames"], c["huge frames"],
                 c["flood actions"], c["refused past the bound"], c["closed by the gateway"]))
        print("gateway: peak RSS confabd %d KiB (%d at the round's start), confab-web %d KiB (%d at the start)"
              % (self.peaks["confabd"], self.before["confabd"], self.peaks["confab-web"], self.before["confab-web"]))
        print("gateway: the owner's page meanwhile: a ticket answered in %s; a fresh page's state in %s"
              % (spread(self.ticket_times), spread(self.page_times)))



def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--count", type=int, default=100000, help="stop after this many fuzz lines")
    parser.add_argument("--flood", type=int, default=100000, help="pipelined searches of the flood round (0: none)")
    parser.add_argument("--mcp-seconds", type=float, default=20, help="how long the hostile MCP servers' round lasts (0: none)")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--bin-dir", default=os.environ.get("CONFAB_BIN_DIR", os.path.join(REPO, ".build", "release")))
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    parser.add_argument("--gateway-seconds", type=float, default=30,
                        help="the gateway round after the socket rounds (0: none; needs confab-web in the bin dir)")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 32)
    if not os.access(os.path.join(args.bin_dir, "confabd"), os.X_OK):
        print("no confabd in %s (make release, or --bin-dir)" % args.bin_dir, file=sys.stderr)
        return 2
    work = tempfile.mkdtemp(prefix="confab-fuzz-socket.")
    os.chmod(work, 0o700)
    print("seed %d, work directory %s, line limit %d bytes" % (seed, work, MAX_LINE), flush=True)
    daemon = Daemon(args.bin_dir, work, hostile_config(seed) if args.mcp_seconds > 0 else "")
    failure = None
    gateway = None
    try:
        fuzzer = Fuzzer(args, daemon, random.Random(seed))
        elapsed, probe = fuzzer.run()
        if args.gateway_seconds > 0:
            gateway = GatewayRound(args.bin_dir, work, daemon, random.Random(seed + 1))
            try:
                gateway.run(args.gateway_seconds)
            finally:
                if gateway.stop() != 0 and failure is None:
                    failure = Failure("confab-web did not stop cleanly on SIGTERM")
    except (Failure, OSError) as error:
        failure = error
        if isinstance(error, OSError):
            import traceback
            failure = Failure("%s (daemon %s) at\n%s" % (error, "running" if daemon.proc.poll() is None else
                              "exited with status %s" % daemon.proc.returncode, "".join(traceback.format_tb(error.__traceback__)[-3:])))
    finally:
        status = daemon.stop()
    if failure is None and status != 0:
        failure = Failure("confabd did not stop cleanly on SIGTERM (exit status %s)" % status)
    log = open(os.path.join(work, "confabd.log"), "rb").read()
    for marker in (b"Fatal error", b"AddressSanitizer", b"Program crashed", b"SIGSEGV", b"SIGILL"):
        if failure is None and marker in log:
            failure = Failure("confabd's log mentions %r" % marker.decode())
    if failure is not None:
        print("FAIL: %s" % failure)
        print("seed %d; daemon log and data kept in %s" % (seed, work))
        return 1
    counts = fuzzer.counts
    print("%.0f s, %d rounds, %d lines (%.0f lines/s): %d requests answered by id, %d null-id errors, "
          "%d silent (notifications, blank), %d ambiguous" % (elapsed, counts["rounds"], counts["lines"],
          counts["lines"] / elapsed, counts["requests"], counts["null-id errors"], counts["silent lines"], counts["ambiguous"]))
    print("%d responses checked, %d notifications received; %d too-long connections closed with -32002, "
          "%d half-line closes, %d abrupt closes; %d answers not delivered before a close"
          % (counts["responses"], counts["notifications received"], counts["too-long connections"],
             counts["half-line closes"], counts["abrupt closes"], counts["lost on close"]))
    print("well-behaved client: %d status answers, slowest %.0f ms; confabd alive throughout, stopped with status 0"
          % (probe.count, probe.worst * 1000))
    if getattr(fuzzer, "flood", None):
        taken, total, before, peak, stopped, other, dropped = fuzzer.flood
        print("flood: %d of %d bytes taken before the %s; peak RSS %d KiB before, %d KiB after; its work gone %.3f s "
              "after it; another client's search answered in %.3f s" % (taken, total, "daemon dropped it" if dropped else "hang-up",
                                                                         before, peak, stopped, other))
    if getattr(fuzzer, "mcp", None):
        restarts, states, before, peak, count, median, worst = fuzzer.mcp
        print("mcp: %d hostile server starts in %.0f s; peak RSS %d KiB before, %d KiB after; another client's status: "
              "%d answers, median %.1f ms, slowest %.1f ms" % (restarts, args.mcp_seconds, before, peak, count,
                                                               median * 1000, worst * 1000))
        for key in sorted(states):
            print("  %4d x %s" % (states[key], key))
    if gateway is not None:
        gateway.report()
    if args.keep:
        print("kept %s" % work)
    else:
        import shutil
        shutil.rmtree(work, ignore_errors=True)
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Crash loop: SIGKILL a release confabd under load, restart it, and check what survived.

Each round starts confabd on a temporary socket and data directory (the data directory
is kept from round to round, so damage would accumulate), checks everything clients were
told before the previous kill, puts it under load (several socket clients, about 20
replies streaming at once across conversations, plus creates, renames, cancels, queued
sends, regenerates, edits, continues, forks, system-prompt changes, and calls of two
loopback tools, one of them approved by the client), and SIGKILLs it after a random 0 to 1.5 s. A last restart checks the
last kill. Checks after every restart:

- every log loads: the daemon reports no log problem but torn last lines, and every
  `<id>.jsonl` is a listed conversation;
- every message a client was told about before the kill (a `message.send` result, a
  user `message.created`, a `message.completed` or `message.failed`) is in its
  conversation's history exactly once and identical; so is every message a previous
  restart showed. The one change allowed is a `superseded_by` set by a regenerate or edit
  the load sent in the round just killed, whose answer or `message.superseded` the kill
  took (it is stored before it is answered): exactly the messages it supersedes, by the id
  its answer gave or, unanswered, the message it left. A difference is reported once;
  later rounds expect the message as the history showed it;
- no id appears twice, no message is left `streaming`;
- a reply cut off by the kill comes back exactly as its log file held it when the daemon
  was down (read from the file between the kill and the restart, not from the daemon):
  unfinished there, it is `interrupted` with the text of its `reply.started` and
  `reply.text` records; finished there (the kill beat the announcement), it has that
  record's status and text. Either way the text is a prefix of what the upstream sent;
- every conversation whose creation was announced is listed, and its title is the last
  one announced or one asked for later;
- the daemon serves: `status`, and a fresh send runs to `message.completed`.

The load also uploads files (`blob.put`, some in two chunks, one upload per connection left
unfinished) and names them in sends, shares and unshares conversations, and deletes half the
forks it makes. Oracles that take nothing from the daemon (`check_oracles`): every stored user
message is a text the load sent with the files it named (and none refused is stored); every
reply is the text its prompt asked the fake upstream to stream (a prefix when cut); every send
answered with a result is stored; every file a stored message names is a blob on disk whose
bytes hash to its name. Tool calls also run through a real MCP server (scripts/mcp-test-server.py on
the official SDK, from the MCP virtual environment), every `--mcp-every` rounds: conversations
of the `mcp` profile call its `note`, which answers with a receipt of random bytes and writes it
to a call log of the loop's own before answering; the round's check also makes two such calls
(one turn) and needs them to complete. Every stored tool call has its result right after its turn, unless the kill cut
the chain there, and every complete MCP result is a receipt the server wrote for that call
(`check_tool_calls`). A few turns ask for a summary (`conversation.compact`, its text fixed by the
focus) or undo the one in force, and every check does both in a conversation of its own; every
stored `compaction` record holds a summary the load asked for, over messages stored before it, the
first current message after its `last` being a user message or none; an `uncompaction` comes only
while one is in force; every summary answered is stored (`check_compactions`, from the log files).
`--plant-faults` is their self-test: after the last kill it damages the
data directory once per oracle and passes only if each oracle reports its fault.
`--daemon-fault MODE` is their self-test against the daemon itself: a debug confabd run with
CONFAB_DEBUG_FAULT=MODE misbehaves as a bug would (a user message's record left out of a write
reported whole, a letter of a complete reply's or of a user message's stored text changed, a send
answered and announced but never appended, a blob unlinked once its message is stored), and the
run passes only if the oracle named for that mode in DAEMON_FAULTS reports it.

Loopback and Unix sockets only; bounded in kills and time; every process it starts is
ended by PID; the temporary directory is removed. Exit status 1 on any failure.
"""
import argparse, base64, collections, hashlib, json, os, random, re, select, shutil, signal, socket, subprocess, sys, tempfile, threading, time

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_BIN = os.environ.get("CONFAB_BIN_DIR", os.path.join(HERE, "..", ".build", "release"))


# The daemon's debug-only fault modes (LogStore's DebugFault) and the oracle each must be caught by.
DAEMON_FAULTS = {
    "drop-record": "accepted-send",
    "unstored-announce": "accepted-send",
    "reply-byte": "reply",
    "user-byte": "user-message",
    "blob-removed": "blob",
}


def sequence(mid):
    """A message id's sequence: `m7` and `m7.2` are both 7."""
    return int(mid[1:].split(".")[0])


def sequence_key(mid):
    """A message id's place in its conversation: `m7` < `m7.2` < `m7.10` < `m8`."""
    return tuple(int(part) for part in mid[1:].split("."))


def expected_words(n):
    return " ".join("w%d" % i for i in range(1, n + 1))


def send_text(rng, tag, tools=False):
    """A send's content and the reply text the fake upstream will stream for it (None when it
    cannot be known here: a chain of tool calls)."""
    if tools and rng.random() < 0.5:
        # The loopback tools of the crash-loop config: `echo` answers at once, `guarded` waits
        # for a client's tool.approve.
        tool = "guarded" if rng.random() < 0.4 else "echo"
        return '[[tool:%s {"city":"c%d"}]] [[delay:2]] %s' % (tool, rng.randrange(1000), tag), None
    if rng.random() < 0.08:
        return "[[words:30]] [[delay:2]] [[finish:length]] %s" % tag, expected_words(30)   # to continue
    roll = rng.random()
    if roll < 0.70:
        n, delay = 400, 3           # about 2.3 s: most are cut off by the kill
    elif roll < 0.90:
        n, delay = 40, 2            # short: completes within a round
    else:
        n, delay = 1200, 1          # long and fast: many reply.text records
    # A quarter of the replies think first (the fake's reasoning `t1 … tK`, streamed before the
    # text): reply.reasoning records are then in flight at kills too, and every stored thought is
    # checked against what the fake was asked to stream (`expected_thought`).
    think = ""
    if rng.random() < 0.25:
        think = "[[think-words:%d]] " % rng.choice([20, 300])
    return "%s[[words:%d]] [[delay:%d]] %s" % (think, n, delay, tag), expected_words(n)


# The crash loop's MCP server, scripts/mcp-test-server.py over stdio (started by the first reply
# that offers its tool, in the rounds that call it: see `mcp_round`), and the tool of it the `mcp`
# profile offers: `note` answers every call with
# a receipt holding random bytes and appends the text and the receipt to a file of the loop's
# own (CONFAB_MCP_CALL_LOG) before it answers, so what the server returned is known without the
# daemon. The conversations of the `mcp` profile call it, sometimes beside the loopback `echo`.
MCP_SERVER = "box"
MCP_NOTE = MCP_SERVER + "__note"
DEFAULT_MCP_PYTHON = os.path.join(HERE, "..", ".build", "venv-mcp", "bin", "python")


def mcp_send_text(rng, tag):
    """A send of a conversation of the `mcp` profile: a call of the MCP server's `note` with a text
    no other call has, a third of the time beside a call of the loopback `echo` (one turn, both
    at once). Its reply's text holds the results, so the prompt does not fix it (None)."""
    calls = '[[tool:%s {"text":"%s n%d"}]]' % (MCP_NOTE, tag, rng.randrange(10 ** 6))
    if rng.random() < 0.3:
        calls += ' [[tool:echo {"city":"c%d"}]]' % rng.randrange(1000)
    return "%s [[delay:2]] %s" % (calls, tag), None


def mcp_config(python, call_log):
    """The config's `[mcp.box]` table and the `mcp` profile, for a server run by `python`."""
    script = os.path.join(HERE, "mcp-test-server.py")
    return ('[mcp.%s]\ncommand = %s\nargs = [%s]\napproval = "never"\ntools = ["note"]\n'
            'startup_timeout_seconds = 60\ntimeout_seconds = 20\nenv = { CONFAB_MCP_CALL_LOG = %s }\n'
            '[profiles.mcp]\ntools = ["echo", "%s.note"]\n'
            % (MCP_SERVER, json.dumps(python), json.dumps(script), json.dumps(call_log), MCP_SERVER))


def read_mcp_calls(path):
    """text -> [results] the MCP server wrote to its call log (a line the kill tore is skipped)."""
    calls = collections.defaultdict(list)
    try:
        with open(path, "rb") as f:
            lines = f.read().split(b"\n")
    except FileNotFoundError:
        return calls
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        calls[entry["text"]].append(entry["result"])
    return calls


THINK_WORDS = re.compile(r"\[\[think-words:(\d+)\]\]")


def expected_thought(prompt):
    """The thought the fake streams for a send whose content is `prompt`, or None when it asked
    for none: the oracle for every stored reply's `reasoning`, independent of the daemon. The
    fake takes the directives of the request's last user turn, the last one of a kind winning."""
    found = THINK_WORDS.findall(prompt or "")
    return " ".join("t%d" % i for i in range(1, int(found[-1]) + 1)) if found else None


PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# Uids the load shares conversations with: users every Debian system has (the daemon need not
# let them connect: a share to a user not listed in access.allow_uids is kept all the same).
SHARE_UIDS = (1, 2)


def make_file(rng, tag, index):
    """A file the load attaches: a text file naming the send, or a small "PNG" (the signature,
    then bytes that are no UTF-8), and its name."""
    if rng.random() < 0.5:
        lines = rng.randrange(1, 200)
        return "notes-%d.txt" % index, ("".join("%s line %d\n" % (tag, i) for i in range(lines))).encode()
    size = rng.choice([600, 5000, 40000])
    body = bytes((rng.randrange(256) | 0x80) for _ in range(64)) * (size // 64 + 1)
    return "shot-%d.png" % index, PNG_SIGNATURE + body[:size]


def expected_reply(prompt):
    """The text the fake upstream streams for a user message whose content is `prompt`, or None
    when it cannot be known from the prompt alone (tool calls; a reply cut by the token limit,
    which a continue may extend): the oracle for every stored reply, independent of the daemon."""
    if prompt is None or "[[tool:" in prompt or "[[finish:length]]" in prompt:
        return None
    found = re.search(r"\[\[reply:([^\]]*)\]\]", prompt)
    if found:
        return found.group(1)
    found = re.search(r"\[\[words:(\d+)\]\]", prompt)
    return expected_words(int(found.group(1))) if found else None


def check_thoughts(conv, messages, stats, fail):
    """Every reply's stored thought is the one its prompt asked for: whole when the reply is
    complete, a prefix of it otherwise, none when none was asked for. A reply's prompt is every
    user message since the reply before it (a tool chain's turns share them): a fork whose copied sends had no replies yet answers
    them all with one reply, sent as one user turn (docs/protocol.md, conversation.fork)."""
    prompts, answered = [], False
    for m in messages:
        if m["role"] == "user":
            if answered:
                prompts, answered = [], False
            prompts.append(m["content"])
            continue
        if m["role"] != "assistant":
            continue
        # The turns of a tool chain (m2, m2.1, m2.2) all answer the same user messages.
        want = expected_thought("\n".join(prompts))
        answered = True
        got = (m.get("reasoning") or {}).get("text")
        if want is None:
            if got:
                fail("%s/%s holds a thought although no user message before it asked for one: %r" % (conv, m["id"], got[:80]))
            continue
        stats["thoughts_checked"] = stats.get("thoughts_checked", 0) + 1
        if m["status"] == "complete" and m.get("content") and got != want:
            fail("%s/%s complete, but its thought is not the one streamed: %r" % (conv, m["id"], (got or "")[-80:]))
        elif got is not None and not want.startswith(got):
            fail("%s/%s %s, and its thought is not a prefix of the one streamed: %r" % (conv, m["id"], m["status"], got[-80:]))


# How long a check waits for an answer or a notification before it calls the daemon stuck. The
# health check's fresh send can queue behind the replies a restart resumed, which on a loaded
# 2-core machine has taken more than 15 s; a stuck daemon still fails the check.
CALL_GUARD_SECONDS = 120

class Failures:
    def __init__(self):
        self.items = []
        self.lock = threading.Lock()

    def add(self, round_no, text):
        with self.lock:
            self.items.append("round %d: %s" % (round_no, text))


class Tracker:
    """What clients were told, across every round. Guarded by `lock`."""

    def __init__(self):
        self.lock = threading.Lock()
        self.announced = {}        # (conv, mid) -> message dict as announced
        self.conflicts = []        # the same message announced two different ways
        self.expected = {}         # (conv, reply id) -> full text the upstream streams
        self.started = set()       # (conv, reply id) seen as message.created streaming
        self.conversations = set() # announced creates
        self.titles = {}           # conv -> (acked title or None, [titles asked for since])
        self.systems = {}          # conv -> (acked system prompt, [system prompts asked for since])
        self.tool_convs = set()    # conversations made from the profile that offers the tools
        self.mcp_convs = set()     # conversations made from the profile that offers the MCP server's tool
        self.fork_counts = {}      # fork -> message_count its creation announced
        self.asked = collections.Counter()   # requests the load clients made, by kind
        self.changed = set()       # (conv, mid) legitimately changed since the last check
                                   # (superseded, continued): not compared with the last restart
        # conv -> regenerates and edits the load sent there, each a dict: kind, round, for an edit
        # the message and content sent, and its answer ("result", or "refused" for -32006), if
        # one came before the kill. A regenerate or edit is stored (its `superseded` records
        # synced) before it is answered, so a kill can keep it and take its answer and its
        # `message.superseded` notifications: these say which supersessions the load caused.
        self.revisions = collections.defaultdict(list)
        # The oracles' own record of what the load did, independent of what the daemon said:
        self.sent = {}             # content of every send and edit -> the files it named, [(name, sha256)]
        self.refused = set()       # contents whose send was refused with an answer the load saw
        self.accepted = []         # (conv, message id, content) of every send and edit answered with a result
        self.uploaded = {}         # sha256 the load computed of every file it uploaded -> its size
        self.problems = []         # what a load client found wrong in an answer (an upload's digest)
        self.shares = {}           # conv -> [{uid: role} as last acknowledged or read, [ops asked since]]
        self.deleted = {}          # conv -> "asked" or "acked": deletes the load made
        self.continues = {}        # conv -> the round its last message.continue was sent in
        # Compaction, as the load asked for it: the summary every conversation.compact asked the
        # fake upstream to write (the text of its focus's [[reply:…]] directive), and the
        # summaries answered with a result, (conv, compaction as answered).
        self.summaries = set()
        self.compacted = []

    def announce(self, message):
        key = (message["conversation"], message["id"])
        with self.lock:
            old = self.announced.get(key)
            if old is not None and old != message:
                self.conflicts.append((key, old, message))
            self.announced[key] = message

    def revision_sent(self, conv, revision):
        with self.lock:
            self.revisions[conv].append(revision)
        return revision

    def supersede(self, conv, mid, by):
        """`message.superseded`: an announced message now carries `superseded_by`."""
        key = (conv, mid)
        with self.lock:
            if key in self.announced:
                self.announced[key] = dict(self.announced[key], superseded_by=by)
            self.changed.add(key)

    def continued(self, conv, mid):
        """`message.continued`: an announced reply streams again; its next ending is what counts."""
        key = (conv, mid)
        with self.lock:
            self.announced.pop(key, None)
            self.expected.pop(key, None)
            self.started.add(key)
            self.changed.add(key)

    def system_asked(self, conv, system):
        with self.lock:
            acked, pending = self.systems.get(conv, (None, []))
            self.systems[conv] = (acked, pending + [system])

    def system_acked(self, conv, system):
        with self.lock:
            acked, pending = self.systems.get(conv, (None, []))
            if system in pending:
                pending = pending[pending.index(system) + 1:]
            self.systems[conv] = (system, pending)

    def rename_asked(self, conv, title):
        with self.lock:
            acked, pending = self.titles.get(conv, (None, []))
            self.titles[conv] = (acked, pending + [title])

    def rename_acked(self, conv, title):
        with self.lock:
            acked, pending = self.titles.get(conv, (None, []))
            if title in pending:
                pending = pending[pending.index(title) + 1:]
            self.titles[conv] = (title, pending)


class LineSocket:
    """A Unix socket speaking one JSON object per line. Sends block; reads wait at most
    `timeout` seconds. A peer that died ends the stream (`closed`), whether it reset the
    connection or not; whatever it wrote before dying is still read first."""

    def __init__(self, path, timeout=10.0):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(10)
        self.sock.connect(path)
        self.timeout = timeout
        self.buffer = b""
        self.next_id = 1
        self.closed = False
        self.broken = False

    def send(self, method, params):
        """The request id, or None when the daemon is gone."""
        rid = self.next_id
        self.next_id += 1
        if self.broken:
            return None
        try:
            self.sock.sendall((json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}) + "\n").encode())
        except (BrokenPipeError, ConnectionResetError):
            self.broken = True
            return None
        return rid

    def frames(self):
        """Complete frames received within `timeout` (maybe none)."""
        if self.closed:
            return []
        ready, _, _ = select.select([self.sock], [], [], self.timeout)
        if not ready:
            return []
        try:
            chunk = self.sock.recv(1 << 16)
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            self.closed = True
        self.buffer += chunk
        *lines, self.buffer = self.buffer.split(b"\n")
        return [json.loads(line) for line in lines if line.strip()]

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


class Client(LineSocket):
    """Blocking request/response, for checks. Notifications are kept in order."""

    def __init__(self, path, timeout=10.0):
        super().__init__(path, timeout)
        self.notes = []

    def call(self, method, params=None):
        rid = self.send(method, params or {})
        if rid is None:
            raise RuntimeError("%s: connection closed" % method)
        # A guard against a daemon that never answers, not a time limit on the answer: on a
        # loaded machine a restarted daemon may take long over its first requests.
        deadline = time.monotonic() + CALL_GUARD_SECONDS
        while time.monotonic() < deadline:
            answer = None
            # Every frame of the read is kept: notifications that came in the same read after
            # the answer (a short reply's message.completed) were lost, and a check waiting for
            # one then waited out its guard.
            for frame in self.frames():
                if "method" in frame and "id" not in frame:
                    self.notes.append(frame)
                elif frame.get("id") == rid:
                    answer = frame
            if answer is not None:
                if "error" in answer:
                    raise RuntimeError("%s: %s" % (method, answer["error"]))
                return answer["result"]
            if self.closed:
                raise RuntimeError("%s: connection closed" % method)
        raise RuntimeError("%s: no answer in %d s" % (method, CALL_GUARD_SECONDS))

    def await_note(self, match, seconds):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            while self.notes:
                note = self.notes.pop(0)
                if match(note):
                    return note
            for frame in self.frames():
                if "method" in frame and "id" not in frame:
                    self.notes.append(frame)
            if self.closed:
                raise RuntimeError("connection closed")
        raise RuntimeError("no matching notification in %.0f s" % seconds)


class Worker(threading.Thread):
    """One load client: attaches to its conversations, keeps a reply streaming in each,
    sometimes queues a second send, renames or cancels, and records every announcement.
    Runs until the daemon dies (end of stream) or `stop` is set; reads everything the
    daemon wrote before dying, since all of it was sent before the kill."""

    def __init__(self, name, path, convs, create, rng, tracker, round_no, stop, admin=False, max_delay=1.5, attach_rate=0.15,
                 mcp=False, compactions=0.08, killing=None):
        super().__init__(daemon=True, name=name)
        # Set just before the SIGKILL: a thread that first runs after it (a kill 0 s into the
        # round on a loaded machine) finds a socket nobody listens on, which is no failure.
        self.killing = killing or threading.Event()
        self.started_after_kill = False
        self.compactions = compactions   # share of turns that ask for a summary (half as many undo one)
        self.mcp = mcp
        self.attach_rate = attach_rate
        self.abandoned = False
        self.max_delay = max_delay
        self.path, self.convs, self.create, self.rng = path, list(convs), create, rng
        self.tracker, self.round_no, self.stop, self.admin = tracker, round_no, stop, admin
        self.pending = {}   # request id -> (kind, data)
        self.sends = 0
        self.error = None
        self.last_user = {}        # conv -> (its last user message id, the reply text it asks for, its files)
        self.length_replies = {}   # conv -> its last reply, cut by the token limit: can be continued

    def request(self, method, params, kind=None, data=None):
        rid = self.conn.send(method, params)
        with self.tracker.lock:
            content = str(params.get("content", ""))
            self.tracker.asked[method if "[[tool:" not in content else "message.send with an MCP call" if MCP_NOTE in content
                               else "message.send with a tool call"] += 1
        if rid is not None and kind is not None:
            self.pending[rid] = (kind, data)

    def tag(self):
        self.sends += 1
        return "r%d %s #%d" % (self.round_no, self.name, self.sends)

    def send_message(self, conv):
        with self.tracker.lock:
            tools = conv in self.tracker.tool_convs
            mcp = conv in self.tracker.mcp_convs
        tag = self.tag()
        content, text = mcp_send_text(self.rng, tag) if mcp and self.rng.random() < 0.6 else send_text(self.rng, tag, tools)
        if self.rng.random() < self.attach_rate:
            # Files first (`blob.put`, some in two chunks), then the send naming them; now and
            # then an upload left unfinished beside them, as a client cut off mid-way leaves one.
            if not self.abandoned and self.rng.random() < 0.3:
                self.abandoned = True     # one per connection: it holds one of its four uploads until it closes
                self.request("blob.put", {"data": base64.b64encode(make_file(self.rng, tag, 9)[1][:300]).decode()}, "blob-abandoned")
            files = [make_file(self.rng, tag, k) for k in range(self.rng.choice([1, 1, 2]))]
            self.upload_next(dict(conv=conv, content=content, text=text, files=files, named=[]))
            return
        self.post_send(conv, content, text, [])

    def post_send(self, conv, content, text, named):
        with self.tracker.lock:
            self.tracker.sent[content] = named
        params = {"conversation": conv, "content": content}
        if named:
            params["attachments"] = [{"name": name, "sha256": digest} for name, digest in named]
        self.request("message.send", params, "send", (conv, text, content, named))

    def upload_next(self, state):
        name, data = state["files"][len(state["named"])]
        if len(data) > 1000 and self.rng.random() < 0.5:
            half = len(data) // 2
            self.request("blob.put", {"data": base64.b64encode(data[:half]).decode()}, "blob-part", (state, half))
        else:
            self.request("blob.put", {"data": base64.b64encode(data).decode(), "final": True}, "blob", state)

    def share(self, conv):
        uid = self.rng.choice(SHARE_UIDS)
        if self.rng.random() < 0.6:
            op = (uid, self.rng.choice(["read", "write"]))
            params = {"conversation": conv, "uid": uid, "role": op[1]}
        else:
            op = (uid, None)
            params = {"conversation": conv, "uid": uid}
        with self.tracker.lock:
            self.tracker.shares.setdefault(conv, [None, []])[1].append(op)
        self.request("conversation.share" if op[1] else "conversation.unshare", params, "share", (conv, op))

    def next_turn(self, conv):
        """What follows a reply that ended: mostly a send; sometimes a regenerate, an edit of the
        last user message, a continue of a reply cut by the token limit, a fork, or a change of
        the system prompt (with a send after it), so every record kind is written under the kills."""
        roll = self.rng.random()
        if conv in self.length_replies and roll < 0.7:
            self.length_replies.pop(conv)
            with self.tracker.lock:
                self.tracker.continues[conv] = self.round_no
            self.request("message.continue", {"conversation": conv}, "continue", conv)
        elif roll < 0.08 and conv in self.last_user:
            revision = self.tracker.revision_sent(conv, dict(kind="regenerate", round=self.round_no))
            self.request("message.regenerate", {"conversation": conv}, "regenerate", (conv, self.last_user[conv][1], revision))
        elif roll < 0.16 and conv in self.last_user:
            content, text = send_text(self.rng, self.tag() + " edited")
            with self.tracker.lock:
                self.tracker.sent[content] = self.last_user[conv][2]   # an edit keeps the message's files
            revision = self.tracker.revision_sent(conv, dict(kind="edit", round=self.round_no,
                                                             message=self.last_user[conv][0], content=content))
            self.request("message.edit", {"conversation": conv, "message": self.last_user[conv][0], "content": content},
                         "edit", (conv, text, revision))
        elif roll < 0.20:
            self.request("conversation.fork", {"conversation": conv, "title": "fork %s" % self.tag()}, "fork", conv)
            self.send_message(conv)
        elif roll < 0.26:
            system = "system %s" % self.tag()
            self.tracker.system_asked(conv, system)
            self.request("conversation.configure", {"conversation": conv, "system": system}, "configure", (conv, system))
            self.send_message(conv)
        elif roll < 0.26 + self.compactions:
            self.compact(conv)
            self.send_message(conv)
        elif roll < 0.26 + 1.5 * self.compactions:
            self.uncompact(conv)
            self.send_message(conv)
        else:
            self.send_message(conv)

    def compact(self, conv):
        """A summary of the conversation asked for, its text fixed by the focus (the fake upstream
        answers the summary request like any other, from the directives of its last user turn, where
        the focus is), recorded before it is sent: the compaction oracle's list of summaries the
        load asked for. The send after it may be stored while it is written, after its range. Half
        are written slowly (about 0.6 s), so that kills and cancels come while one is written."""
        summary = "summary %s" % self.tag()
        with self.tracker.lock:
            self.tracker.summaries.add(summary)
        slow = " [[delay:100]]" if self.rng.random() < 0.5 else ""
        self.request("conversation.compact", {"conversation": conv, "focus": "[[reply:%s]]%s the numbers" % (summary, slow)},
                     "compact", (conv, summary))

    def uncompact(self, conv):
        """The summary in force ended (refused when there is none, or one is being written)."""
        self.request("conversation.uncompact", {"conversation": conv}, "uncompact", conv)

    def rename(self, conv):
        title = "%s r%d %d" % (self.name, self.round_no, self.rng.randrange(10 ** 6))
        self.tracker.rename_asked(conv, title)
        self.request("conversation.rename", {"conversation": conv, "title": title}, "rename", (conv, title))

    def start_conv(self, conv):
        self.request("conversation.attach", {"conversation": conv, "history": 0}, "attach", conv)
        if not self.admin:
            self.send_message(conv)
            if self.rng.random() < 0.2:
                self.send_message(conv)     # queued behind the first

    def handle(self, frame):
        t = self.tracker
        if "id" in frame and "method" not in frame:
            kind, data = self.pending.pop(frame["id"], (None, None))
            if "error" in frame:
                code = frame["error"].get("code")
                if kind == "send" and code == -32004:
                    with t.lock:
                        t.refused.add(data[2])
                    return          # too many queued: allowed
                if kind in ("regenerate", "edit", "continue", "fork") and code == -32006:
                    # A reply in flight or queued (a second send), or nothing to act on: send instead.
                    if kind in ("regenerate", "edit"):
                        with t.lock:
                            data[2]["refused"] = True
                    if kind != "fork" and not self.stop.is_set():
                        self.send_message(data[0] if isinstance(data, tuple) else data)
                    return
                if kind in ("blob", "blob-part", "blob-abandoned") and code == -32004:
                    # Four uploads in progress on this connection already (its other
                    # conversations' files): the send goes without files.
                    with t.lock:
                        t.asked["blob.put refused: limit"] += 1
                    if kind != "blob-abandoned" and not self.stop.is_set():
                        state = data[0] if kind == "blob-part" else data
                        self.post_send(state["conv"], state["content"], state["text"], [])
                    return
                if kind == "delete" and code == -32001:
                    return          # already gone
                if kind in ("compact", "uncompact") and code in (-32006, -32008, -32001):
                    # A reply in flight or queued, a summary being written or cancelled (the load
                    # cancels), nothing new to summarise, none in force to undo; the model server
                    # failed the request; the conversation deleted meanwhile: nothing was stored.
                    with t.lock:
                        t.asked["%s refused (%d)" % ("conversation." + kind, code)] += 1
                    return
                if kind == "approve" and code == -32006:
                    return          # the call ended before the answer (the conversation's reply was cancelled)
                raise RuntimeError("%s failed: %s" % (kind, frame["error"]))
            result = frame["result"]
            if kind == "create":
                conv = result["conversation"]["id"]
                with t.lock:
                    t.conversations.add(conv)
                    t.titles.setdefault(conv, (result["conversation"]["title"], []))
                    t.systems.setdefault(conv, (result["conversation"].get("system"), []))
                    if result["conversation"].get("profile") == "tools":
                        t.tool_convs.add(conv)
                    if result["conversation"].get("profile") == "mcp":
                        t.mcp_convs.add(conv)
                self.convs.append(conv)
                self.start_conv(conv)
            elif kind == "send":
                conv, text, content, named = data
                t.announce(result["message"])
                self.last_user[conv] = (result["message"]["id"], text, named)
                with t.lock:
                    t.accepted.append((conv, result["message"]["id"], content))
                    if text is not None:
                        t.expected[(conv, result["reply"])] = text
            elif kind == "blob-part":
                state, half = data
                data_bytes = state["files"][len(state["named"])][1]
                self.request("blob.put", {"upload": result["upload"], "data": base64.b64encode(data_bytes[half:]).decode(),
                                          "final": True}, "blob", state)
            elif kind == "blob":
                state = data
                name, data_bytes = state["files"][len(state["named"])]
                digest = hashlib.sha256(data_bytes).hexdigest()
                with t.lock:
                    t.uploaded[digest] = len(data_bytes)
                    if result["attachment"]["sha256"] != digest or result["attachment"]["size"] != len(data_bytes):
                        t.problems.append("blob.put of %d bytes answered %r, the bytes' sha256 is %s" % (len(data_bytes), result, digest))
                state["named"].append((name, digest))
                if len(state["named"]) < len(state["files"]):
                    self.upload_next(state)
                elif not self.stop.is_set():
                    self.post_send(state["conv"], state["content"], state["text"], state["named"])
            elif kind == "share":
                conv, op = data
                with t.lock:
                    entry = t.shares.setdefault(conv, [None, []])
                    entry[0] = {s["uid"]: s["role"] for s in result["conversation"].get("shared_with", [])}
                    if op in entry[1]:
                        entry[1] = entry[1][entry[1].index(op) + 1:]
            elif kind == "delete":
                with t.lock:
                    t.deleted[data] = "acked"
            elif kind == "regenerate":
                conv, text, revision = data
                with t.lock:
                    revision["result"] = result
                    if text is not None:
                        t.expected[(conv, result["reply"])] = text
            elif kind == "edit":
                conv, text, revision = data
                t.announce(result["message"])
                self.last_user[conv] = (result["message"]["id"], text, self.last_user.get(conv, (None, None, []))[2])
                with t.lock:
                    t.accepted.append((conv, result["message"]["id"], revision["content"]))
                    revision["result"] = result
                    if text is not None:
                        t.expected[(conv, result["reply"])] = text
            elif kind == "fork":
                info = result["conversation"]
                with t.lock:
                    t.conversations.add(info["id"])
                    t.titles[info["id"]] = (info["title"], [])
                    t.systems[info["id"]] = (info.get("system"), [])
                    t.fork_counts[info["id"]] = info["message_count"]
                    if data in t.tool_convs:
                        t.tool_convs.add(info["id"])
                    if data in t.mcp_convs:
                        t.mcp_convs.add(info["id"])
                if self.rng.random() < 0.5 and not self.stop.is_set():
                    # Deleted again: the blobs only it names go with it, the ones its original
                    # names stay.
                    with t.lock:
                        t.deleted[info["id"]] = "asked"
                        t.conversations.discard(info["id"])
                    self.request("conversation.delete", {"conversation": info["id"]}, "delete", info["id"])
            elif kind == "compact":
                conv, summary = data
                with t.lock:
                    t.compacted.append((conv, result["compaction"]))
                    if result["compaction"].get("summary") != summary:
                        t.problems.append("oracle compaction-stored: conversation.compact of %s asked for the summary %r and was answered %r"
                                          % (conv, summary, result["compaction"].get("summary")))
            elif kind == "configure":
                t.system_acked(data[0], result["conversation"].get("system"))
            elif kind == "rename":
                t.rename_acked(data[0], result["conversation"]["title"])
            return
        method, params = frame.get("method"), frame.get("params", {})
        if method == "message.created":
            message = params["message"]
            if message["role"] == "user":
                t.announce(message)
            else:
                with t.lock:
                    t.started.add((message["conversation"], message["id"]))
        elif method in ("message.completed", "message.failed"):
            message = params["message"]
            t.announce(message)
            conv = message["conversation"]
            # A reply is over when a message of its chain ends without tool calls, or not complete.
            ended = message["role"] == "assistant" and (message["status"] != "complete" or not message.get("tool_calls"))
            if ended and message["status"] == "complete" and message.get("finish_reason") == "length":
                self.length_replies[conv] = message["id"]
            if ended and not self.admin and not self.stop.is_set() and conv in self.convs:
                self.next_turn(conv)
        elif method == "message.superseded":
            t.supersede(params["conversation"], params["message"], params["by"])
        elif method == "message.continued":
            t.continued(params["conversation"], params["message"]["id"])
        elif method == "tool.approval_requested":
            if not self.admin and params["conversation"] in self.convs:
                self.request("tool.approve", {"conversation": params["conversation"], "call": params["call"],
                                              "allow": self.rng.random() < 0.8}, "approve")

    def run(self):
        try:
            try:
                self.conn = LineSocket(self.path, timeout=0.02)
            except OSError:
                if self.killing.is_set():
                    self.started_after_kill = True
                    return
                raise
            self.conn.send("hello", {"client": "crashloop", "name": self.name})
            for conv in self.convs:
                self.start_conv(conv)
            if self.create:
                params = {"title": "%s r%d" % (self.name, self.round_no)}
                roll = self.rng.random()
                if roll < 0.4:
                    params["profile"] = "tools"
                elif roll < 0.6 and self.mcp:
                    params["profile"] = "mcp"
                self.request("conversation.create", params, "create")
            next_action = time.monotonic() + self.rng.uniform(0.02, 0.2)
            deadline = time.monotonic() + 30 + self.max_delay
            while not self.conn.closed and time.monotonic() < deadline:
                for frame in self.conn.frames():
                    self.handle(frame)
                if self.stop.is_set() or not self.convs or time.monotonic() < next_action:
                    continue
                next_action = time.monotonic() + self.rng.uniform(0.02, 0.2)
                conv = self.rng.choice(self.convs)
                roll = self.rng.random()
                if self.admin:
                    if roll < 0.85:
                        self.rename(conv)
                    else:
                        self.request("conversation.create", {"title": "admin r%d" % self.round_no}, "create")
                elif roll < 0.10:
                    self.conn.send("generation.cancel", {"conversation": conv})
                elif roll < 0.25:
                    self.rename(conv)
                elif roll < 0.30:
                    self.share(conv)
        except Exception as error:  # reported by the round
            self.error = "%s: %r" % (self.name, error)
        finally:
            if hasattr(self, "conn"):
                self.conn.close()


class Loop:
    name = "crashloop"
    # A SIGKILL cannot damage the index (it is renamed into place whole); a power cut can.
    index_damage_expected = False
    # A SIGKILL keeps every record written; a power cut can take a tool step's unsynced start.
    lost_steps_allowed = False

    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)
        self.failures = Failures()
        self.tracker = Tracker()
        self.tmp = tempfile.mkdtemp(prefix="confab-%s-" % self.name)
        self.socket = os.path.join(self.tmp, "confabd.sock")
        self.data = os.path.join(self.tmp, "data")
        self.logs = os.path.join(self.tmp, "logs")
        os.makedirs(self.logs)
        self.fake = None
        self.daemon = None
        self.in_flight_at_kill = []
        self.snapshot = {}           # conv -> {mid: message} as the last restart showed it
        # conv -> (its log's size, mtime and inode, its listed info) when its history was last
        # read and checked in full: a log that has not changed since, listed the same, with no
        # message announced or started since, holds what was checked, and its history is not
        # read again (reading every history every round made a round cost the whole data
        # directory). Every `--full-check-every` rounds all are read regardless.
        self.verified = {}
        self.pool = []               # conversations to load
        self.health = None
        self.stats = dict(rounds=0, kills=0, checked=0, unchanged_skipped=0, interrupted=0, restored_complete=0, torn=0,
                          unannounced_convs=0, announced=0, started_cut=0, compared_with_file=0)
        # (conv, reply id) -> [status or None while unfinished, text] as the log files held
        # them between the last kill and the restart; conv -> (log identity, its replies).
        self.stored = {}
        self.stored_cache = {}
        self.blob_checked = {}       # sha256 -> the blob file's identity when its bytes were last hashed
        self.planted = {}            # oracle -> the fault planted for it (--plant-faults)
        self.mcp_python = None if args.mcp_python == "none" else args.mcp_python
        self.mcp_call_log = os.path.join(self.tmp, "mcp-calls.jsonl")
        self.mcp_calls = (None, {})  # (the call log's size when read, text -> [results])
        self.mcp_health = None       # the conversation of the MCP call every check makes
        self.summary_conv = None     # the conversation the checks summarise (check_health_compaction)
        self.planted_in = {}         # oracle -> the conversation its fault must be reported in, when it matters

    # --- processes -------------------------------------------------------------

    def start_fake(self):
        binary = os.path.join(self.args.bin_dir, "confab-fake-upstream")
        self.fake = subprocess.Popen([binary, "--port", "0", "--max-lifetime", str(int(self.args.max_seconds) + 120),
                                      "--default-delay-ms", "2", "--exit-with-parent"],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=open(os.path.join(self.logs, "upstream.log"), "ab"))
        line = self.fake.stdout.readline().decode()
        words = line.split()
        if len(words) < 3 or words[0] != "listening":
            raise RuntimeError("fake upstream said %r" % line)
        config = os.path.join(self.tmp, "config.toml")
        with open(config, "w") as f:
            f.write('[upstream]\nbase_url = "http://127.0.0.1:%s/v1"\nmodel = "fake-model"\ntimeout_seconds = 10\n'
                    '[limits]\nmax_streams = %d\n[storage]\nfsync = %s\n'
                    % (words[2], self.args.streams + 8, "false" if self.args.no_fsync else "true"))
            # Two loopback tools (the fake upstream's /tool/ endpoints) and the profile offering them.
            tool = ('[tools.%s]\ndescription = "%s"\n%s'
                    'parameters = { type = "object", properties = { city = { type = "string" } }, required = ["city"] }\n'
                    '[tools.%s.request]\nurl = "http://127.0.0.1:%s/tool/echo/{city}"\ntimeout_seconds = 5\n')
            f.write(tool % ("echo", "Says back what it was asked", "", "echo", words[2]))
            f.write(tool % ("guarded", "Needs a yes", 'approval = "always"\n', "guarded", words[2]))
            f.write('[profiles.tools]\ntools = ["echo", "guarded"]\n')
            if self.mcp_python is not None:
                f.write(mcp_config(self.mcp_python, self.mcp_call_log))
        self.config = config

    def daemon_environment(self, round_no):
        """The environment confabd starts with (a subclass adds to it)."""
        if self.args.daemon_fault:
            return dict(os.environ, CONFAB_DEBUG_FAULT=self.args.daemon_fault)
        return None

    def after_kill(self, round_no):
        """Runs once the daemon is dead and the load clients have stopped, before the restart."""

    def extra_summary(self):
        """More summary lines (a subclass adds its own)."""
        return []

    def after_start(self, round_no, log_path):
        """Runs once a round's daemon listens, before the checks (a subclass adds to it)."""

    def before_load(self, round_no, log_path):
        """Runs after a round's checks, before its load (a subclass adds to it)."""

    def start_daemon(self, round_no):
        log_path = os.path.join(self.logs, "confabd-%03d.log" % round_no)
        environment = self.daemon_environment(round_no)
        log = open(log_path, "ab")
        self.daemon = subprocess.Popen([os.path.join(self.args.bin_dir, "confabd"), "--socket", self.socket,
                                        "--data-dir", self.data, "--config", self.config, "--log-level", "info"],
                                       stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=environment)
        log.close()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.daemon.poll() is not None:
                raise RuntimeError("confabd exited at start (status %s): %s" % (self.daemon.returncode, self.read(log_path)[-2000:]))
            try:
                LineSocket(self.socket, timeout=1).close()
                return log_path
            except OSError:
                time.sleep(0.01)
        raise RuntimeError("confabd did not listen within 20 s")

    @staticmethod
    def read(path):
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def end(self, proc, sig):
        if proc is not None and proc.poll() is None:
            proc.send_signal(sig)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)

    # --- checks ----------------------------------------------------------------

    @staticmethod
    def identity(path):
        try:
            st = os.stat(path)
            return (st.st_size, st.st_mtime_ns, st.st_ino)
        except OSError:
            return None

    @staticmethod
    def replies_in_log(path):
        """reply id -> [status or None while unfinished, text] from a log's whole lines, folded
        as the daemon folds them: `reply.started` sets the text, `reply.text` appends to an
        unfinished reply, `reply.finished` sets status and text. A torn last line is ignored
        (the daemon cuts it), and so is a line that is not JSON (the daemon reports it)."""
        with open(path, "rb") as f:
            data = f.read()
        replies = {}
        for line in data.split(b"\n")[:-1]:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            kind = record.get("type") if isinstance(record, dict) else None
            message = record.get("message") if kind else None
            if kind == "reply.started" and isinstance(message, dict):
                replies[message["id"]] = [None, message.get("content", "")]
            elif kind == "reply.text" and isinstance(message, str):
                if message in replies and replies[message][0] is None:
                    replies[message][1] += record.get("content", "")
            elif kind == "reply.finished" and isinstance(message, dict):
                replies[message["id"]] = [message.get("status"), message.get("content", "")]
        return replies

    def read_stored(self):
        """What every log holds of its replies, read from the files while the daemon is down."""
        directory = os.path.join(self.data, "conversations")
        stored = {}
        for name in os.listdir(directory) if os.path.isdir(directory) else []:
            if not name.endswith(".jsonl"):
                continue
            conv, path = name[:-6], os.path.join(directory, name)
            identity = self.identity(path)
            cached = self.stored_cache.get(conv)
            if cached is None or cached[0] != identity:
                cached = (identity, self.replies_in_log(path))
                self.stored_cache[conv] = cached
            for mid, state in cached[1].items():
                stored[(conv, mid)] = state
        self.stored = stored

    def running_again(self, client, conv, mid):
        """A reply whose start record did not reach the disk (a power cut) is owed again and
        runs after the restart with the id it was announced with: it is the conversation's
        reply in flight, or has ended since the history was read."""
        # It may wait behind other resumed replies for a stream: wait for it (bounded).
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            pending = client.call("conversation.attach", {"conversation": conv, "history": 0}).get("pending")
            client.call("conversation.detach", {"conversation": conv})
            if (pending and pending.get("id") == mid) or any(m["id"] == mid for m in self.history(client, conv)):
                self.stats["started_resumed"] = self.stats.get("started_resumed", 0) + 1
                return True
            time.sleep(0.2)
        return False

    def history(self, client, conv):
        messages, before = [], None
        for _ in range(1000):
            params = {"conversation": conv, "limit": 1000}
            if before:
                params["before"] = before
            page = client.call("conversation.history", params)
            messages = page["messages"] + messages
            if not page["more"] or not page["messages"]:
                return messages
            before = page["messages"][0]["id"]
        raise RuntimeError("history of %s did not end" % conv)

    def index_check(self):
        """Every index entry whose log is still the file it describes (same size) must count
        the messages a full read of that log finds: the list shows the index's summaries."""
        problems = []
        path = os.path.join(self.data, "index.jsonl")
        if not os.path.exists(path):
            return problems
        lines = open(path, encoding="utf-8").read().splitlines()
        fields = json.loads(lines[0])["fields"]
        for line in lines[1:]:
            entry = dict(zip(fields, json.loads(line)))
            log = os.path.join(self.data, "conversations", entry["id"] + ".jsonl")
            if not os.path.exists(log) or os.stat(log).st_size != entry["size"]:
                continue
            ids = set()
            for record in open(log, encoding="utf-8"):
                try:
                    message = json.loads(record).get("message")
                except ValueError:
                    continue
                if isinstance(message, dict) and "id" in message:
                    ids.add(message["id"])
            if len(ids) != entry["message_count"]:
                problems.append("index: %s counts %d messages, its log holds %d" % (entry["id"], entry["message_count"], len(ids)))
        self.stats["index_checked"] = len(lines) - 1
        return problems

    def scan_daemon_log(self, round_no, log_path):
        """What the daemon reported about its logs, read once it has ended (it may not have
        written its start-up lines yet while the check runs)."""
        for line in self.read(log_path).splitlines():
            if "log problem:" in line:
                if "torn last line" in line:
                    self.stats["torn"] += 1
                elif "empty log" in line or "no whole record" in line:
                    # A log created and never announced (its header not yet synced): removed.
                    self.stats["unannounced_logs_removed"] = self.stats.get("unannounced_logs_removed", 0) + 1
                elif self.index_damage_expected and "/index.jsonl" in line:
                    # Not synced by design: after a power cut it may be old, empty or garbage,
                    # and then the logs are read instead (docs/reliability.md).
                    self.stats["index_unreadable"] = self.stats.get("index_unreadable", 0) + 1
                else:
                    self.failures.add(round_no, "daemon reported: " + line)
            elif "cannot record interrupted" in line or line.startswith("error:"):
                self.failures.add(round_no, "daemon reported: " + line)
            elif any(mark in line for mark in ("Fatal error", "Program crashed", "Crash report", "Assertion failed")):
                self.failures.add(round_no, "confabd crashed by itself: " + line)

    @staticmethod
    def supersession_cause(revisions, by, messages, round_no, used):
        """The regenerate or edit the load sent in the round just killed that accounts for every
        message the history shows superseded by `by`, exactly as docs/protocol.md says it
        supersedes, or None. One answered is known by the id it gave (`reply`, or the edit's
        `message`); one whose answer the kill took, by what it left: an edit by its new message,
        found in the history with the content sent; a regenerate (whose new reply may not have
        run yet) by the reply chain it replaced, the newest before `by`. Answered ones are tried
        first, then unanswered ones from the last sent; `used` holds the unanswered ones already
        matched to another `by`."""
        superseded = {m["id"] for m in messages if m.get("superseded_by") == by}
        newer = next((m for m in messages if m["id"] == by), None)
        # What it found current: a message an earlier regenerate or edit replaced stays as it was.
        candidates = [m for m in messages if m.get("superseded_by") in (None, by)]
        this_round = [(number, revision) for number, revision in reversed(list(enumerate(revisions)))
                      if revision["round"] == round_no - 1 and not revision.get("refused") and number not in used]
        ordered = [entry for entry in this_round if "result" in entry[1]] + [entry for entry in this_round if "result" not in entry[1]]
        for number, revision in ordered:
            result = revision.get("result")
            if revision["kind"] == "regenerate":
                if result is not None:
                    if result["reply"] != by:
                        continue
                    replaced = sequence(result["replaces"])
                else:
                    if newer is not None and newer["role"] == "user":
                        continue
                    earlier = [sequence(m["id"]) for m in candidates if m["role"] == "assistant" and sequence(m["id"]) < sequence(by)]
                    if not earlier:
                        continue
                    replaced = max(earlier)
                # The reply replaced whole: every message of its chain.
                expected = {m["id"] for m in candidates if m["role"] != "user" and sequence(m["id"]) == replaced}
            else:
                if result is not None:
                    if result["message"]["id"] != by:
                        continue
                    edited = result["replaces"]
                else:
                    if newer is None or newer["role"] != "user" or newer["content"] != revision["content"]:
                        continue
                    edited = revision["message"]
                # The edited message and every reply to it.
                expected = {edited} | {m["id"] for m in candidates if m["role"] != "user"
                                       and sequence(edited) < sequence(m["id"]) < sequence(by)}
            if superseded != expected:
                continue
            if result is None:
                used.add(number)
            return revision
        return None

    def check_oracles(self, conv, messages, sent, refused, accepted, uploaded, fail):
        """The checks that take nothing from the daemon's word, only from what the load did:
        every stored user message is a text the load sent, with the files it named, and none
        whose send was refused; every reply is the text the fake upstream was asked to stream
        (whole when complete, a prefix when cut); every send and edit answered with a result is
        stored, with the text sent; every file a stored message names is a blob on disk whose
        bytes have that digest and that the load uploaded."""
        s = self.stats
        current = {m["id"]: m for m in messages}
        prompt = None
        for m in messages:
            files = [(a.get("name"), a.get("sha256")) for a in m.get("attachments") or []]
            if m["role"] == "user":
                prompt = m["content"]
                s["oracle_user_messages"] = s.get("oracle_user_messages", 0) + 1
                if prompt not in sent:
                    fail("oracle user-message: %s/%s holds a text the load never sent: %r" % (conv, m["id"], prompt[-120:]))
                elif files != [tuple(f) for f in sent[prompt]]:
                    fail("oracle user-message: %s/%s names files %r, the load sent %r" % (conv, m["id"], files, sent[prompt]))
                if prompt in refused:
                    fail("oracle user-message: %s/%s is stored, but its send was refused: %r" % (conv, m["id"], prompt[-120:]))
            elif m["role"] == "assistant" and not m.get("tool_calls"):
                want = expected_reply(prompt)
                if want is None or m["status"] == "failed":
                    s["oracle_replies_unknown"] = s.get("oracle_replies_unknown", 0) + 1
                elif m["status"] == "complete":
                    s["oracle_replies_complete"] = s.get("oracle_replies_complete", 0) + 1
                    if m["content"] != want:
                        at = next((i for i, (a, b) in enumerate(zip(m["content"], want)) if a != b), min(len(m["content"]), len(want)))
                        fail("oracle reply: %s/%s is complete, but its text is not what the fake streamed: from character %d %r, streamed %r"
                             % (conv, m["id"], at, m["content"][at:at + 40], want[at:at + 40]))
                elif not want.startswith(m["content"]):
                    fail("oracle reply: %s/%s is %s, and its text is no prefix of what the fake streamed: %r"
                         % (conv, m["id"], m["status"], m["content"][-80:]))
                else:
                    s["oracle_replies_cut"] = s.get("oracle_replies_cut", 0) + 1
        self.check_blobs(conv, messages, uploaded, fail)
        for mid, content in accepted:
            s["oracle_accepted_checked"] = s.get("oracle_accepted_checked", 0) + 1
            got = current.get(mid)
            if got is None:
                fail("oracle accepted-send: %s/%s was accepted (a result came) but is not stored" % (conv, mid))
            elif got["content"] != content:
                fail("oracle accepted-send: %s/%s is stored with %r, the load sent %r" % (conv, mid, got["content"][-80:], content[-80:]))

    def check_compactions(self, conv, summaries, compacted, fail):
        """The compaction oracle, from the conversation's log file read directly and what the load
        asked for: every `compaction` record's summary is one the load asked the fake upstream to
        write; its `first` and `last` are messages stored before it, in order, and the first current
        message after `last` there is a user message or none (the range never ends between a tool
        call and its result, nor mid-reply); an `uncompaction` comes only while a compaction is in
        force; every summary answered with a result is stored, with its range and text."""
        s = self.stats
        path = os.path.join(self.data, "conversations", conv + ".jsonl")
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            data = b""
        stored = []
        if b'compaction"' in data:
            roles, superseded, in_force = {}, set(), False
            covered, revised = set(), None   # what the summary in force covers; a covered message superseded since
            # Whole lines only: the daemon may be appending (a resumed reply) while this reads.
            for line in data.split(b"\n")[:-1]:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                kind = record.get("type") if isinstance(record, dict) else None
                message = record.get("message") if kind else None
                if isinstance(message, dict) and isinstance(message.get("id"), str):
                    roles.setdefault(message["id"], message.get("role"))
                elif kind == "superseded":
                    superseded.add(record.get("message"))
                    if in_force and record.get("message") in covered and revised is None:
                        revised = record.get("message")
                elif kind == "compaction":
                    if revised is not None:
                        fail("oracle compaction: %s: %s, which the summary in force covered, was superseded, and no uncompaction "
                             "ended that summary before the next" % (conv, revised))
                    s["oracle_compactions_checked"] = s.get("oracle_compactions_checked", 0) + 1
                    first, last, summary = record.get("first"), record.get("last"), record.get("summary")
                    stored.append((first, last, summary))
                    in_force, revised = True, None
                    if summary not in summaries:
                        fail("oracle compaction: %s holds a summary of %s…%s the load never asked for: %r" % (conv, first, last, summary))
                    if first not in roles or last not in roles:
                        fail("oracle compaction: %s summarises %s…%s, but %s is no message stored before it"
                             % (conv, first, last, first if first not in roles else last))
                        continue
                    if sequence_key(first) > sequence_key(last):
                        fail("oracle compaction: %s summarises %s…%s, which ends before it starts" % (conv, first, last))
                    covered = {mid for mid in roles if mid not in superseded
                               and sequence_key(first) <= sequence_key(mid) <= sequence_key(last)}
                    after = sorted((mid for mid in roles if mid not in superseded and sequence_key(mid) > sequence_key(last)),
                                   key=sequence_key)
                    if after and roles[after[0]] != "user":
                        fail("oracle compaction: %s summarises %s…%s, but %s (%s) came after %s when it was stored"
                             % (conv, first, last, after[0], roles[after[0]], last))
                elif kind == "uncompaction":
                    s["oracle_uncompactions_checked"] = s.get("oracle_uncompactions_checked", 0) + 1
                    if not in_force:
                        fail("oracle uncompaction: %s holds an uncompaction while no compaction is in force" % conv)
                    in_force, revised = False, None
            if revised is not None:
                fail("oracle compaction: %s: %s, which the summary in force covers, was superseded, and no uncompaction "
                     "ended that summary" % (conv, revised))
        for compaction in compacted:
            s["oracle_compactions_answered"] = s.get("oracle_compactions_answered", 0) + 1
            if (compaction.get("first"), compaction.get("last"), compaction.get("summary")) not in stored:
                fail("oracle compaction-stored: %s: the summary of %s…%s %r was answered, but no compaction record holds it"
                     % (conv, compaction.get("first"), compaction.get("last"), compaction.get("summary")))

    def check_health_compaction(self, client, round_no, fail):
        """After every restart, in a conversation of the checks' own (one exchange, left out of the
        load): the summary in force undone, and a new one asked for, its text fixed by its focus.
        So every log of it holds compactions and uncompactions, some in force across a kill; each
        answered one is checked like the load's at the next restart."""
        t = self.tracker
        if self.summary_conv is None:
            self.summary_conv = client.call("conversation.create", {"title": "summaries"})["conversation"]["id"]
            with t.lock:
                t.conversations.add(self.summary_conv)
                t.titles[self.summary_conv] = ("summaries", [])
                t.sent["[[reply:ok]] q1"] = []
            client.call("conversation.attach", {"conversation": self.summary_conv, "history": 0})
            sent = client.call("message.send", {"conversation": self.summary_conv, "content": "[[reply:ok]] q1"})
            t.announce(sent["message"])
            with t.lock:
                t.accepted.append((self.summary_conv, sent["message"]["id"], "[[reply:ok]] q1"))
            t.announce(client.await_note(lambda n: n.get("method") in ("message.completed", "message.failed")
                                         and n["params"]["message"]["id"] == sent["reply"], CALL_GUARD_SECONDS)["params"]["message"])
        elif "compaction" in client.call("conversation.history", {"conversation": self.summary_conv, "limit": 1}):
            client.call("conversation.uncompact", {"conversation": self.summary_conv})
        summary = "checked summary r%d" % round_no
        with t.lock:
            t.summaries.add(summary)
        compaction = client.call("conversation.compact", {"conversation": self.summary_conv,
                                                          "focus": "[[reply:%s]]" % summary})["compaction"]
        with t.lock:
            t.compacted.append((self.summary_conv, compaction))
        if compaction.get("summary") != summary:
            fail("summary after restart: asked for %r, answered %r" % (summary, compaction.get("summary")))
        self.stats["health_compactions"] = self.stats.get("health_compactions", 0) + 1

    def mcp_results(self):
        """text -> [results] of the MCP server's call log, read again when it grew."""
        size = os.path.getsize(self.mcp_call_log) if os.path.exists(self.mcp_call_log) else 0
        if self.mcp_calls[0] != size:
            self.mcp_calls = (size, read_mcp_calls(self.mcp_call_log))
        return self.mcp_calls[1]

    def check_tool_calls(self, conv, messages, fail):
        """Every tool call a stored assistant turn made has its result in the tool messages right
        after it, unless the kill cut the chain there (no turn of the chain follows); a chain
        that went on had every call answered (no result left `interrupted`). Every complete
        result of the MCP server's `note` is a receipt the server wrote in its call log for that
        call's text: what the server returned, not what the daemon says it returned."""
        s = self.stats
        results = None
        for i, m in enumerate(messages):
            if m["role"] != "assistant" or not m.get("tool_calls"):
                continue
            j = i + 1
            answers = {}
            while j < len(messages) and messages[j]["role"] == "tool":
                answers.setdefault(messages[j].get("tool_call_id"), []).append(messages[j])
                j += 1
            chain = m["id"].split(".")[0]
            went_on = j < len(messages) and messages[j]["id"].split(".")[0] == chain
            calls = {c.get("id"): c for c in m["tool_calls"]}
            for extra in set(answers) - set(calls):
                fail("oracle tool-result: %s/%s answers a call %r its turn %s did not make" % (conv, answers[extra][0]["id"], extra, m["id"]))
            for call_id, call in calls.items():
                s["oracle_tool_calls"] = s.get("oracle_tool_calls", 0) + 1
                got = answers.get(call_id, [])
                if len(got) > 1:
                    fail("oracle tool-result: %s/%s: call %s has %d results" % (conv, m["id"], call_id, len(got)))
                if not got:
                    if went_on:
                        fail("oracle tool-result: %s/%s: call %s (%s) has no result, but its chain went on with %s"
                             % (conv, m["id"], call_id, call.get("name"), messages[j]["id"]))
                    else:
                        s["oracle_tool_calls_cut"] = s.get("oracle_tool_calls_cut", 0) + 1
                    continue
                answer = got[0]
                if went_on and answer["status"] in ("interrupted", "streaming"):
                    fail("oracle tool-result: %s/%s is %s, but its chain went on with %s"
                         % (conv, answer["id"], answer["status"], messages[j]["id"]))
                if call.get("name") != MCP_NOTE:
                    continue
                if answer["status"] != "complete":
                    s["oracle_mcp_unfinished"] = s.get("oracle_mcp_unfinished", 0) + 1
                    continue
                try:
                    text = json.loads(call.get("arguments") or "")["text"]
                except (ValueError, TypeError, KeyError):
                    fail("oracle mcp-result: %s/%s: call %s has arguments the load never wrote: %r"
                         % (conv, m["id"], call_id, call.get("arguments")))
                    continue
                if results is None:
                    results = self.mcp_results()
                s["oracle_mcp_results"] = s.get("oracle_mcp_results", 0) + 1
                if answer["content"] not in results.get(text, []):
                    fail("oracle mcp-result: %s/%s is complete with %r, which the MCP server never returned for %r (it returned %r)"
                         % (conv, answer["id"], answer["content"][-100:], text, results.get(text, [])))

    def check_mcp_call(self, client, round_no, fail):
        """A call through the MCP server after every restart: a send in a conversation of the
        `mcp` profile whose reply calls `note`; its chain must end complete, with a result the
        server wrote. Its history is then checked like every other."""
        t = self.tracker
        if self.mcp_health is None:
            self.mcp_health = client.call("conversation.create", {"title": "mcp health", "profile": "mcp"})["conversation"]["id"]
            with t.lock:
                t.conversations.add(self.mcp_health)
                t.titles[self.mcp_health] = ("mcp health", [])
                t.mcp_convs.add(self.mcp_health)
        conv = self.mcp_health
        client.call("conversation.attach", {"conversation": conv, "history": 0})
        # Two calls in one turn: the self-test's two tool faults need two results in chains that went on.
        texts = ["health r%d" % round_no, "health r%d b" % round_no]
        content = " ".join('[[tool:%s {"text":"%s"}]]' % (MCP_NOTE, text) for text in texts)
        with t.lock:
            t.sent[content] = []
        sent = client.call("message.send", {"conversation": conv, "content": content})
        t.announce(sent["message"])
        with t.lock:
            t.accepted.append((conv, sent["message"]["id"], content))
        reply = sent["reply"]
        note = client.await_note(lambda n: n.get("method") in ("message.completed", "message.failed")
                                 and n["params"]["message"]["role"] == "assistant"
                                 and n["params"]["message"]["id"].split(".")[0] == reply
                                 and (n["params"]["message"]["status"] != "complete" or not n["params"]["message"].get("tool_calls")),
                                 CALL_GUARD_SECONDS)
        final = note["params"]["message"]
        t.announce(final)
        messages = self.history(client, conv)
        chain = [m for m in messages if m["id"].split(".")[0] == reply]
        tools = [m for m in chain if m["role"] == "tool"]
        results = self.mcp_results()
        returned = [r for text in texts for r in results.get(text, [])]
        if (final["status"] != "complete" or len(tools) != 2 or any(m["status"] != "complete" for m in tools)
                or any(m["content"] not in returned for m in tools)):
            fail("MCP call after restart: reply ended %s, its tool messages %r, the server returned %r"
                 % (final["status"], [(m["status"], m["content"][:200]) for m in tools], returned))
        self.stats["mcp_health_calls"] = self.stats.get("mcp_health_calls", 0) + 1
        self.check_tool_calls(conv, messages, fail)
        # The messages announced or seen here are compared again at the next restart.
        self.snapshot[conv] = {m["id"]: m for m in messages}
        self.verified.pop(conv, None)

    def plant_tool_faults(self, logs, records, rewrite):
        """The self-test's faults for the tool oracles: a byte of a complete MCP result changed
        (mcp-result), and another complete MCP result dropped, every record of it, in a chain
        that went on (tool-result). The MCP call of every check gives chains that went on; two
        different messages are damaged, in one conversation or two."""
        candidates = []      # (conv, tool message) of complete MCP results whose chain went on
        for conv in logs:
            found = [r["message"] for _, r in records(conv)]
            for m in found:
                if m.get("role") == "tool" and m.get("name") == MCP_NOTE and m.get("status") == "complete" and m.get("content"):
                    chain = m["id"].split(".")[0]
                    if any(o.get("role") == "assistant" and o["id"].split(".")[0] == chain and sequence_key(o["id"]) > sequence_key(m["id"])
                           for o in found) and (conv, m["id"]) not in [(c, x["id"]) for c, x in candidates]:
                        candidates.append((conv, m))
        if len(candidates) < 2:
            return
        conv, m = candidates[0]
        for number, record in records(conv):
            if record["message"].get("id") == m["id"] and record["message"].get("content") == m["content"]:
                changed = m["content"][:-1] + ("x" if m["content"][-1] != "x" else "y")
                rewrite(conv, number, dict(record, message=dict(record["message"], content=changed)))
        self.planted["mcp-result"] = "a byte of an MCP tool result changed (%s/%s)" % (conv, m["id"])
        conv, m = candidates[-1]
        for number in sorted((n for n, r in records(conv) if r["message"].get("id") == m["id"]), reverse=True):
            rewrite(conv, number, None)
        self.planted["tool-result"] = "an MCP tool result dropped in a chain that went on (%s/%s)" % (conv, m["id"])

    def check_blobs(self, conv, messages, uploaded, fail):
        """Every file the messages name is a blob on disk whose bytes hash to its name, of the
        size the load uploaded. Run on the messages a conversation's history last showed when
        it is not read again: a blob can go without its log changing."""
        s = self.stats
        for m in messages:
            for attachment in m.get("attachments") or []:
                name, digest = attachment.get("name"), attachment.get("sha256")
                s["oracle_blob_references"] = s.get("oracle_blob_references", 0) + 1
                path = os.path.join(self.data, "blobs", (digest or "")[:2], digest or "-")
                identity = self.identity(path)
                if identity is None:
                    fail("oracle blob: %s/%s names %s (%s), which is not on disk" % (conv, m["id"], digest, name))
                    continue
                if digest not in uploaded:
                    fail("oracle blob: %s/%s names %s (%s), which the load never uploaded" % (conv, m["id"], digest, name))
                if self.blob_checked.get(digest) != identity:
                    with open(path, "rb") as f:
                        data = f.read()
                    if hashlib.sha256(data).hexdigest() != digest or len(data) != uploaded.get(digest, len(data)):
                        fail("oracle blob: %s holds %d bytes whose sha256 is not its name" % (path, len(data)))
                    else:
                        self.blob_checked[digest] = identity
                        s["oracle_blobs_hashed"] = s.get("oracle_blobs_hashed", 0) + 1

    def check_shares(self, conv, info, known, fail):
        """A conversation's shares are the ones last acknowledged, or those with some of the
        shares and unshares asked for since applied in order (the kill took their answers)."""
        got = {s["uid"]: s["role"] for s in info.get("shared_with", [])}
        if known is not None and known[0] is not None:
            self.stats["oracle_shares_checked"] = self.stats.get("oracle_shares_checked", 0) + 1
            state = dict(known[0])
            candidates = [dict(state)]
            for uid, role in known[1]:
                if role is None:
                    state.pop(uid, None)
                else:
                    state[uid] = role
                candidates.append(dict(state))
            if got not in candidates:
                fail("oracle share: %s is shared as %r; acknowledged %r, asked since %r" % (conv, got, known[0], known[1]))
        with self.tracker.lock:
            self.tracker.shares[conv] = [got, []]

    def plant_faults(self):
        """For the self-test (`--plant-faults`): damage the data directory, while the daemon is
        down, in one way per oracle, each in a conversation of its own: a byte of a complete
        reply changed, a byte of a user message changed, an accepted send's record dropped, a
        blob a stored message names removed. Each must be reported by its oracle."""
        directory = os.path.join(self.data, "conversations")
        with self.tracker.lock:
            accepted = {(conv, mid) for conv, mid, _ in self.tracker.accepted}
        logs = {}
        for name in sorted(os.listdir(directory)):
            if name.endswith(".jsonl"):
                with open(os.path.join(directory, name), "rb") as f:
                    logs[name[:-6]] = f.read().split(b"\n")
        used = {self.summary_conv}   # the compaction faults' own (plant_compaction_faults)

        def records(conv):
            for number, line in enumerate(logs[conv]):
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if isinstance(record, dict) and isinstance(record.get("message"), dict):
                    yield number, record

        def rewrite(conv, number, record):
            lines = logs[conv]
            if record is None:
                del lines[number]
            else:
                lines[number] = json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode()
            with open(os.path.join(directory, conv + ".jsonl"), "wb") as f:
                f.write(b"\n".join(lines))
            used.add(conv)

        def plant(oracle, what, pick):
            for conv in logs:
                if conv in used:
                    continue
                for number, record in records(conv):
                    change = pick(conv, record)
                    if change is not None:
                        change(conv, number, record)
                        self.planted[oracle] = "%s in %s" % (what, conv)
                        return

        def reply_byte(conv, record):
            m = record["message"]
            if record.get("type") == "reply.finished" and m.get("status") == "complete" and m.get("content", "").startswith("alive"):
                # The health check's reply: its prompt fixes its text (a "w1 …" reply may be one
                # of a [[finish:length]] prompt, which the oracle does not judge).
                return lambda c, n, r: rewrite(c, n, dict(r, message=dict(m, content="x" + m["content"][1:])))
        def user_byte(conv, record):
            m = record["message"]
            if m.get("role") == "user" and "#" in m.get("content", ""):
                return lambda c, n, r: rewrite(c, n, dict(r, message=dict(m, content=m["content"].replace("#", "%", 1))))
        def drop_record(conv, record):
            m = record["message"]
            if m.get("role") == "user" and (conv, m.get("id")) in accepted:
                return lambda c, n, r: rewrite(c, n, None)
        def remove_blob(conv, record):
            for attachment in record["message"].get("attachments") or []:
                path = os.path.join(self.data, "blobs", attachment["sha256"][:2], attachment["sha256"])
                if os.path.exists(path):
                    def change(c, n, r, path=path):
                        os.remove(path)
                        used.add(c)
                    return change

        plant("reply", "a byte of a complete reply changed", reply_byte)
        plant("user-message", "a byte of a user message changed", user_byte)
        plant("accepted-send", "an accepted send's record dropped", drop_record)
        plant("blob", "a blob a message names removed", remove_blob)
        if self.mcp_python is not None:
            self.plant_tool_faults(logs, records, rewrite)
        self.plant_compaction_faults(logs, rewrite, used)

    def plant_compaction_faults(self, logs, rewrite, used):
        """The self-test's faults for the compaction oracles, each in a conversation of its own: a
        stored summary's text changed (compaction), a summary answered with a result dropped from
        its log (compaction-stored), and an uncompaction written twice (uncompaction)."""
        with self.tracker.lock:
            answered = {(conv, c.get("summary")) for conv, c in self.tracker.compacted}
        found = collections.defaultdict(list)    # conv -> [(line number, record)] of compaction and uncompaction records
        for conv, lines in logs.items():
            for number, line in enumerate(lines):
                if b'compaction"' not in line:
                    continue
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if isinstance(record, dict) and record.get("type") in ("compaction", "uncompaction"):
                    found[conv].append((number, record))
        # The checks' own conversation holds answered summaries and uncompactions in every run:
        # the last summary dropped, the first uncompaction written twice. A summary's text is
        # changed in another conversation if one holds a compaction (the load's), so that the
        # drop is what the compaction-stored oracle must find.
        mine = found.get(self.summary_conv, [])
        hits = [(n, r) for n, r in mine if r["type"] == "uncompaction"]
        if hits:
            number, record = hits[0]
            logs[self.summary_conv].insert(number + 1, logs[self.summary_conv][number])
            rewrite(self.summary_conv, number, record)
            self.planted["uncompaction"] = "an uncompaction written twice (%s)" % self.summary_conv
            self.planted_in["uncompaction"] = self.summary_conv
            mine = [(n + 1 if n > number else n, r) for n, r in mine]
        hits = [(n, r) for n, r in mine if r["type"] == "compaction" and (self.summary_conv, r.get("summary")) in answered]
        if hits:
            rewrite(self.summary_conv, hits[-1][0], None)
            self.planted["compaction-stored"] = "an answered summary's record dropped (%s, %r)" % (self.summary_conv, hits[-1][1]["summary"])
            self.planted_in["compaction-stored"] = self.summary_conv
            mine = [(n, r) for n, r in mine if n != hits[-1][0]]
        for conv in sorted(found, key=lambda c: c == self.summary_conv):
            hits = [(n, r) for n, r in (mine if conv == self.summary_conv else found[conv]) if r["type"] == "compaction"]
            if (conv not in used or conv == self.summary_conv) and hits:
                number, record = hits[0]
                rewrite(conv, number, dict(record, summary=record["summary"] + " (changed)"))
                self.planted["compaction"] = "a stored summary's text changed (%s, %r)" % (conv, record["summary"])
                self.planted_in["compaction"] = conv
                break

    def check(self, round_no, log_path, last_started):
        fail = lambda text: self.failures.add(round_no, text)
        t = self.tracker
        client = Client(self.socket)
        client.call("hello", {"client": "crashloop-check"})
        listed = {c["id"]: c for c in client.call("conversation.list", {"limit": 10000})["conversations"]}
        files = sorted(name[:-6] for name in os.listdir(os.path.join(self.data, "conversations")) if name.endswith(".jsonl"))
        for conv in files:
            if conv not in listed:
                fail("%s.jsonl is not a loaded conversation" % conv)
        with t.lock:
            announced = dict(t.announced)
            expected = dict(t.expected)
            created = set(t.conversations)
            titles = dict(t.titles)
            systems = dict(t.systems)
            fork_counts = dict(t.fork_counts)
            changed = set(t.changed)
            t.changed = set()
            conflicts = list(t.conflicts)
            t.conflicts = []
            sent = dict(t.sent)
            refused = set(t.refused)
            accepted = collections.defaultdict(list)
            for conv, mid, content in t.accepted:
                accepted[conv].append((mid, content))
            uploaded = dict(t.uploaded)
            problems, t.problems = list(t.problems), []
            shares = {conv: (entry[0], list(entry[1])) for conv, entry in t.shares.items()}
            deleted = dict(t.deleted)
            continues = dict(t.continues)
            summaries = set(t.summaries)
            compacted = collections.defaultdict(list)
            for conv, compaction in t.compacted:
                compacted[conv].append(compaction)
        for problem in problems:
            fail(problem if problem.startswith("oracle ") else "oracle upload: " + problem)
        for conv, state in deleted.items():
            if state == "acked" and (conv in listed or os.path.exists(os.path.join(self.data, "conversations", conv + ".jsonl"))):
                fail("oracle delete: %s was deleted (answered) but is %s" % (conv, "listed" if conv in listed else "on disk"))
            self.stats["deletes_" + state] = self.stats.get("deletes_" + state, 0) + 1
        with t.lock:
            for conv, state in deleted.items():
                if conv in listed:
                    # Asked, not answered, and kept by the kill: a conversation like any other.
                    t.conversations.add(conv)
                t.deleted.pop(conv, None)
        for key, old, new in conflicts:
            fail("message %s announced twice, differently: %s vs %s" % (key, old, new))
        for conv in created:
            if conv not in listed:
                fail("announced conversation %s is missing" % conv)
        by_conv = {}
        for (conv, mid), message in announced.items():
            by_conv.setdefault(conv, {})[mid] = message
        self.stats["announced"] = len(announced)
        # Announced messages whose difference was reported (or accepted) this round: from now on
        # they are expected as the history shows them, so a lasting difference is reported once.
        settled = {}
        for conv, info in listed.items():
            if conv not in created and conv not in self.snapshot:
                self.stats["unannounced_convs"] += 1   # created, killed before the answer went out
            # Replies still queued at the kill run again after the restart: one that ends
            # between the list and the history read adds a message in between. Compare a count
            # and a history read while the conversation stood still (same info before and after).
            # A count can change with no newer `updated`: `updated` moves when a record is
            # written, the count of a conversation in memory when the reply is announced, a sync
            # later. Summaries are checked against their logs directly instead (index_check).
            log = os.path.join(self.data, "conversations", conv + ".jsonl")
            known = self.snapshot.get(conv, {})
            if (round_no % self.args.full_check_every != 0 and self.verified.get(conv) == (self.identity(log), info)
                    and all(known.get(mid) == message for mid, message in by_conv.get(conv, {}).items())
                    and not any(key[0] == conv for key in last_started)):
                self.stats["unchanged_skipped"] += 1
                self.check_blobs(conv, known.values(), uploaded, fail)
                if compacted.get(conv):
                    # A summary answered but never written leaves the log as it was.
                    self.check_compactions(conv, summaries, compacted[conv], fail)
                continue
            messages = self.history(client, conv)
            for _ in range(50):
                after = client.call("conversation.get", {"conversation": conv})["conversation"]
                if after == info:
                    break
                info = after
                messages = self.history(client, conv)
            ids = [m["id"] for m in messages]
            if len(ids) != len(set(ids)):
                fail("%s: an id appears twice: %s" % (conv, sorted(i for i in set(ids) if ids.count(i) > 1)))
            sequences = [tuple(int(part) for part in i[1:].split(".")) for i in ids]
            if sequences != sorted(sequences):
                fail("%s: history out of id order" % conv)
            if info["message_count"] != len(messages):
                fail("%s: message_count %d but %d messages" % (conv, info["message_count"], len(messages)))
            current = {m["id"]: m for m in messages}
            check_thoughts(conv, messages, self.stats, fail)
            self.check_oracles(conv, messages, sent, refused, accepted.get(conv, []), uploaded, fail)
            self.check_tool_calls(conv, messages, fail)
            self.check_compactions(conv, summaries, compacted.get(conv, []), fail)
            self.check_shares(conv, info, shares.get(conv), fail)
            self.stats["tool_messages"] = self.stats.get("tool_messages", 0) + sum(1 for m in messages if m["role"] == "tool")
            self.stats["superseded_messages"] = self.stats.get("superseded_messages", 0) + sum(1 for m in messages if m.get("superseded_by"))
            for m in messages:
                if m["status"] == "streaming":
                    fail("%s/%s still streaming after restart" % (conv, m["id"]))
            causes = {}      # by -> the regenerate or edit that superseded messages with it, or None
            used = set()
            for mid, message in by_conv.get(conv, {}).items():
                self.stats["checked"] += 1
                got = current.get(mid)
                if got is None:
                    fail("%s/%s announced (%s, %s) but missing" % (conv, mid, message["role"], message["status"]))
                    settled[(conv, mid)] = None
                elif got != message:
                    diff = {k: (message.get(k), got.get(k)) for k in set(message) | set(got) if message.get(k) != got.get(k)}
                    settled[(conv, mid)] = got
                    by = got.get("superseded_by")
                    if (message.get("finish_reason") == "length" and continues.get(conv) == round_no - 1
                            and got["content"].startswith(message["content"]) and got["status"] != "streaming"):
                        # A continue the load sent in the round just killed went on with the
                        # reply, and the kill took its `message.continued`.
                        self.stats["continued_unnotified"] = self.stats.get("continued_unnotified", 0) + 1
                        continue
                    if set(diff) == {"superseded_by"} and message.get("superseded_by") is None and by:
                        # Superseded with no `message.superseded` seen: right if a regenerate or
                        # edit of the load did it and the kill took its answer or notifications.
                        if by not in causes:
                            with t.lock:
                                causes[by] = self.supersession_cause(t.revisions.get(conv, []), by, messages, round_no, used)
                        if causes[by] is not None:
                            cause = causes[by]
                            counter = "superseded_%s_%s" % (cause["kind"], "unnotified" if cause.get("result") else "unanswered")
                            self.stats[counter] = self.stats.get(counter, 0) + 1
                            continue
                        fail("%s/%s differs from what was announced: %s, and no regenerate or edit the load sent accounts for it"
                             % (conv, mid, json.dumps(diff)[:500]))
                        continue
                    fail("%s/%s differs from what was announced: %s" % (conv, mid, json.dumps(diff)[:500]))
            if conv in fork_counts and len(messages) < fork_counts[conv]:
                fail("%s: a fork announced with %d messages holds %d" % (conv, fork_counts[conv], len(messages)))
            for mid, message in self.snapshot.get(conv, {}).items():
                if (conv, mid) in changed:
                    self.stats["changed_since_restart"] = self.stats.get("changed_since_restart", 0) + 1
                    continue
                if current.get(mid) != message:
                    fail("%s/%s changed or vanished since the last restart: %s -> %s" % (conv, mid, message, current.get(mid)))
            for m in messages:
                key = (conv, m["id"])
                if m["role"] != "assistant" or m["id"] in self.snapshot.get(conv, {}) or key in announced:
                    continue
                full = expected.get(key)
                stored = self.stored.get(key)
                if stored is not None:
                    # The file is the oracle: the reply is what it held when the daemon was down.
                    self.stats["compared_with_file"] += 1
                    want_status = stored[0] or "interrupted"
                    if m["status"] != want_status:
                        fail("%s/%s is %s, its log held it %s" % (conv, m["id"], m["status"], stored[0] or "unfinished"))
                    elif m["content"] != stored[1]:
                        fail("%s/%s %s text differs from its log's: %r vs %r"
                             % (conv, m["id"], m["status"], m["content"][-60:], stored[1][-60:]))
                if m["status"] == "interrupted":
                    self.stats["interrupted"] += 1
                    if full is not None and not full.startswith(m["content"]):
                        fail("%s/%s interrupted text is not a prefix of the reply: %r" % (conv, m["id"], m["content"][-80:]))
                elif m["status"] == "complete":
                    self.stats["restored_complete"] += 1
                    if full is not None and m["content"] != full:
                        fail("%s/%s complete but text differs from the reply" % (conv, m["id"]))
                elif m["status"] == "cancelled":
                    if full is not None and not full.startswith(m["content"]):
                        fail("%s/%s cancelled text is not a prefix of the reply: %r" % (conv, m["id"], m["content"][-80:]))
                    if stored is None:
                        fail("%s/%s cancelled but no log record says so" % (conv, m["id"]))
                else:
                    fail("%s/%s cut off by the kill but %s" % (conv, m["id"], m["status"]))
            for key in last_started:
                if key[0] == conv and key not in announced:
                    self.stats["started_cut"] += 1
                    if key[1] in current:
                        continue
                    if self.lost_steps_allowed and "." in key[1]:
                        # A step of a tool chain whose start record a power cut took: chains are
                        # not resumed (docs/protocol.md, Tools), so it is gone, and nothing said otherwise.
                        self.stats["steps_lost"] = self.stats.get("steps_lost", 0) + 1
                    elif not self.running_again(client, conv, key[1]):
                        fail("%s/%s started streaming before the kill but is gone" % key)
            acked, pending = titles.get(conv, (None, []))
            if acked is not None and info["title"] not in [acked] + pending:
                fail("%s: title %r, announced %r (asked later: %r)" % (conv, info["title"], acked, pending))
            acked, pending = systems.get(conv, (None, []))
            if conv in systems and info.get("system") not in [acked] + pending:
                fail("%s: system prompt %r, announced %r (asked later: %r)" % (conv, info.get("system"), acked, pending))
            with t.lock:
                t.titles[conv] = (info["title"], [])
                if conv in systems:
                    t.systems[conv] = (info.get("system"), [])
            self.snapshot[conv] = current
            self.verified[conv] = (self.identity(log), info)
        with t.lock:
            for key, message in settled.items():
                if message is None:
                    t.announced.pop(key, None)
                else:
                    t.announced[key] = message
            # Every regenerate and edit of the round just killed has been accounted for.
            for conv in list(t.revisions):
                t.revisions[conv] = [r for r in t.revisions[conv] if r["round"] >= round_no]
                if not t.revisions[conv]:
                    del t.revisions[conv]
        self.pool = sorted(listed)
        # It serves: status, and a fresh send that completes.
        status = client.call("status")
        if status.get("server") != "confabd":
            fail("status answered %r" % status)
        if self.health is None:
            self.health = client.call("conversation.create", {"title": "health"})["conversation"]["id"]
            with t.lock:
                t.conversations.add(self.health)
                t.titles[self.health] = ("health", [])
        if self.mcp_round(round_no):
            self.check_mcp_call(client, round_no, fail)
        client.call("conversation.attach", {"conversation": self.health, "history": 0})
        with t.lock:
            t.sent["[[reply:alive %d]]" % round_no] = []
        sent = client.call("message.send", {"conversation": self.health, "content": "[[reply:alive %d]]" % round_no})
        t.announce(sent["message"])
        with t.lock:
            t.accepted.append((self.health, sent["message"]["id"], "[[reply:alive %d]]" % round_no))
        note = client.await_note(lambda n: n.get("method") in ("message.completed", "message.failed")
                                 and n["params"]["message"]["id"] == sent["reply"], CALL_GUARD_SECONDS)
        final = note["params"]["message"]
        t.announce(final)
        if final["status"] != "complete" or final["content"] != "alive %d" % round_no:
            fail("fresh send after restart ended %s %r" % (final["status"], final["content"]))
        self.check_health_compaction(client, round_no, fail)
        client.close()

    # --- the loop ---------------------------------------------------------------

    def in_flight(self):
        """Replies streaming right now (asked just before the kill), or None."""
        try:
            probe = Client(self.socket, timeout=1)
            try:
                return probe.call("status")["streams"]
            finally:
                probe.close()
        except Exception:
            return None

    def mcp_round(self, round_no):
        """Whether this round calls the MCP server: every `--mcp-every` rounds (its check makes a
        call and its load offers the `mcp` conversations). The server is a Python program on the
        SDK whose start costs more CPU than a round's checks, so the other rounds leave the
        `mcp` conversations out of the load and start no server (a reply of one resumed at
        start may still start it)."""
        return self.mcp_python is not None and round_no % self.args.mcp_every == 0

    def seed_params(self, round_no, index):
        """A conversation made for the load: one in six offers the MCP server's tool, so every
        round has a few replies calling it."""
        params = {"title": "seed r%d" % round_no}
        if self.mcp_python is not None and index % 6 == 5:
            params["profile"] = "mcp"
        return params

    def load_round(self, round_no):
        """Starts the load; returns (workers, stop event)."""
        stop = threading.Event()
        with self.tracker.lock:
            left_out = {self.health, self.mcp_health, self.summary_conv} | (set() if self.mcp_round(round_no) else self.tracker.mcp_convs)
        pool = [c for c in self.pool if c not in left_out]
        if len(pool) < self.args.streams + 10:
            # Enough conversations that every round has about `streams` replies going.
            setup = Client(self.socket)
            while len(pool) < self.args.streams + 10:
                info = setup.call("conversation.create", self.seed_params(round_no, len(pool)))["conversation"]
                with self.tracker.lock:
                    self.tracker.conversations.add(info["id"])
                    self.tracker.titles[info["id"]] = (info["title"], [])
                    if info.get("profile") == "mcp":
                        self.tracker.mcp_convs.add(info["id"])
                pool.append(info["id"])
                self.pool.append(info["id"])
            setup.close()
        self.rng.shuffle(pool)
        workers = []
        self.killing = threading.Event()
        per = self.args.streams // self.args.clients
        for n in range(self.args.clients):
            mine, pool = pool[:per], pool[per:]
            create = len(mine) < per or self.rng.random() < 0.25
            if create and len(mine) == per:
                mine = mine[:-1]
            workers.append(Worker("w%d" % n, self.socket, mine, create, random.Random(self.rng.random()),
                                  self.tracker, round_no, stop, max_delay=self.args.max_delay, attach_rate=self.args.attach_rate,
                                  mcp=self.mcp_round(round_no), compactions=self.args.compact_rate, killing=self.killing))
        # The admin renames only conversations no worker has, so rename answers for one
        # conversation all come back on one connection, in the daemon's order.
        admin_convs = pool[:10]
        workers.append(Worker("admin", self.socket, admin_convs, False, random.Random(self.rng.random()),
                              self.tracker, round_no, stop, admin=True, max_delay=self.args.max_delay, killing=self.killing))
        for w in workers:
            w.start()
        return workers, stop

    def run(self):
        args = self.args
        started = time.monotonic()
        print(self.name + ": seed %d, up to %d kills in %.0f s, %d clients, ~%d streams, kill after 0-%.2f s, fsync %s, %s"
              % (args.seed, args.kills, args.max_seconds, args.clients, args.streams, args.max_delay,
                 "off" if args.no_fsync else "on", os.path.realpath(args.bin_dir)), flush=True)
        self.start_fake()
        last_started = set()
        round_no = 0
        stopped_early = False
        try:
            while True:
                round_no += 1
                log_path = self.start_daemon(round_no)
                self.after_start(round_no, log_path)
                self.stats["rounds"] = round_no
                try:
                    self.check(round_no, log_path, last_started)
                except Exception as error:
                    self.failures.add(round_no, "check failed: %r" % error)
                if self.stats["kills"] >= args.kills:
                    break
                if time.monotonic() - started > args.max_seconds:
                    stopped_early = True
                    break
                self.before_load(round_no, log_path)
                with self.tracker.lock:
                    before = set(self.tracker.started)
                workers, stop = self.load_round(round_no)
                delay = self.rng.uniform(0, args.max_delay)
                time.sleep(delay)
                streams = self.in_flight()
                if self.daemon.poll() is not None:
                    self.failures.add(round_no, "confabd exited on its own (status %s) before the kill" % self.daemon.returncode)
                elif streams is None:
                    self.failures.add(round_no, "confabd did not answer status just before the kill")
                self.killing.set()
                self.daemon.send_signal(signal.SIGKILL)
                self.daemon.wait(timeout=10)
                self.stats["kills"] += 1
                if streams is not None:
                    self.in_flight_at_kill.append(streams)
                if args.verbose:
                    print("  round %d: killed after %.2f s with %s replies streaming" % (round_no, delay, streams), flush=True)
                stop.set()
                for w in workers:
                    w.join(timeout=15)
                    if w.is_alive():
                        self.failures.add(round_no, "%s did not see the daemon die" % w.name)
                    if w.error:
                        self.failures.add(round_no, "load client: " + w.error)
                    if w.started_after_kill:
                        self.stats["late_workers"] = self.stats.get("late_workers", 0) + 1
                with self.tracker.lock:
                    last_started = self.tracker.started - before
                self.after_kill(round_no)
                if args.plant_faults and self.stats["kills"] >= args.kills:
                    self.plant_faults()
                self.read_stored()
                self.scan_daemon_log(round_no, log_path)
                if args.verbose or self.stats["kills"] % 10 == 0:
                    print("  %d kills, %d announced messages, %d interrupted replies restored, %d failures, %.0f s"
                          % (self.stats["kills"], len(self.tracker.announced), self.stats["interrupted"],
                             len(self.failures.items), time.monotonic() - started), flush=True)
        except (Exception, KeyboardInterrupt) as error:
            self.failures.add(round_no, "aborted: %r" % error)
        finally:
            self.end(self.daemon, signal.SIGTERM)
            self.end(self.fake, signal.SIGTERM)
        if round_no and self.stats["rounds"] == round_no and self.stats["kills"] < round_no:
            self.scan_daemon_log(round_no, os.path.join(self.logs, "confabd-%03d.log" % round_no))
        for problem in self.index_check():
            self.failures.add(round_no, problem)
        wall = time.monotonic() - started
        s = self.stats
        print()
        print("%s summary (seed %d)" % (self.name, args.seed))
        print("  rounds (daemon starts): %d" % s["rounds"])
        print("  kills (SIGKILL under load): %d%s" % (s["kills"], "  (stopped at the time limit)" if stopped_early else ""))
        if self.in_flight_at_kill:
            f = self.in_flight_at_kill
            print("  replies streaming at the moment of the kill: mean %.1f, max %d, none in %d rounds"
                  % (sum(f) / len(f), max(f), f.count(0)))
        print("  announced messages checked: %d checks of %d distinct messages" % (s["checked"], s["announced"]))
        print("  conversation checks skipped as unchanged since their last full check: %d (all are read every %d rounds)"
              % (s["unchanged_skipped"], self.args.full_check_every))
        print("  replies cut off by a kill: %d restored as interrupted, %d found complete (stored, not yet announced);"
              " %d of them seen streaming by a client" % (s["interrupted"], s["restored_complete"], s["started_cut"]))
        if s.get("unannounced_logs_removed"):
            print("  logs created and never announced, removed at start (empty or a torn header): %d" % s["unannounced_logs_removed"])
        if s.get("steps_lost"):
            print("  tool-chain steps seen streaming whose start a cut took (not resumed, as for any chain): %d" % s["steps_lost"])
        if s.get("index_unreadable"):
            print("  starts that found the index unreadable and read every log instead: %d" % s["index_unreadable"])
        if s.get("started_resumed"):
            print("  replies seen streaming whose start a cut took away, running again after the restart: %d"
                  % s["started_resumed"])
        print("  torn last lines cut at load: %d; conversations created but not announced: %d"
              % (s["torn"], s["unannounced_convs"]))
        print("  load clients that first ran after the kill (no load from them that round): %d" % s.get("late_workers", 0))
        print("  cut-off replies compared with their log files' text: %d" % s["compared_with_file"])
        print("  stored thoughts checked against the ones the fake streamed: %d" % s.get("thoughts_checked", 0))
        print("  asked by the load: %s" % ", ".join("%s %d" % kv for kv in sorted(self.tracker.asked.items())))
        print("  seen in histories read after restarts: %d tool messages, %d superseded messages; %d announced messages "
              "changed since (superseded, continued)" % (s.get("tool_messages", 0), s.get("superseded_messages", 0),
                                                          s.get("changed_since_restart", 0)))
        lost = [(kind, how, s.get("superseded_%s_%s" % (kind, how), 0)) for kind in ("regenerate", "edit")
                for how in ("unanswered", "unnotified")]
        print("  messages found superseded by a regenerate or edit the kill kept while taking its answer "
              "(or only its notifications): %s" % ", ".join("%s %s %d" % entry for entry in lost))
        for line in self.extra_summary():
            print("  " + line)
        print("  oracles: %d stored user messages compared with what the load sent; %d complete replies and %d cut ones "
              "compared with what the fake streamed (%d whose text the prompt does not fix); %d accepted sends found stored; "
              "%d file references checked, %d blobs hashed; %d share states checked; deletes answered %d, unanswered %d"
              % (s.get("oracle_user_messages", 0), s.get("oracle_replies_complete", 0), s.get("oracle_replies_cut", 0),
                 s.get("oracle_replies_unknown", 0), s.get("oracle_accepted_checked", 0), s.get("oracle_blob_references", 0),
                 s.get("oracle_blobs_hashed", 0), s.get("oracle_shares_checked", 0), s.get("deletes_acked", 0), s.get("deletes_asked", 0)))
        print("  files uploaded by the load: %d distinct" % len(self.tracker.uploaded))
        print("  oracles: %d compaction records checked (summary asked for, range of stored messages ending before a user "
              "message or nothing), %d uncompaction records checked (each after a compaction in force); %d answered summaries "
              "checked for their record; summaries answered %d (%d of them the checks' own), refused %s"
              % (s.get("oracle_compactions_checked", 0), s.get("oracle_uncompactions_checked", 0),
                 s.get("oracle_compactions_answered", 0), len(self.tracker.compacted), s.get("health_compactions", 0),
                 ", ".join("%s %d" % (k.split(" ", 2)[-1], v) for k, v in sorted(self.tracker.asked.items())
                           if k.startswith("conversation.compact refused")) or "0"))
        if self.mcp_python is not None:
            print("  oracles: %d tool calls checked for their results (%d cut with the chain, no result); %d complete MCP "
                  "results found in the server's own call log, %d MCP calls unfinished; %d MCP calls after restarts; "
                  "%d calls the MCP server answered in all"
                  % (s.get("oracle_tool_calls", 0), s.get("oracle_tool_calls_cut", 0), s.get("oracle_mcp_results", 0),
                     s.get("oracle_mcp_unfinished", 0), s.get("mcp_health_calls", 0),
                     sum(len(v) for v in read_mcp_calls(self.mcp_call_log).values())))
        else:
            print("  MCP: none (--mcp-python none)")
        print("  conversations at the end: %d" % len(self.pool))
        print("  index entries checked against their logs at the end: %d" % s.get("index_checked", 0))
        print("  failures: %d" % len(self.failures.items))
        for item in self.failures.items[:50]:
            print("    " + item)
        if len(self.failures.items) > 50:
            print("    … %d more" % (len(self.failures.items) - 50))
        if self.failures.items:
            # Every failure, not just the first 50, outside the temporary directory so it
            # survives its removal.
            path = args.failures_file or os.path.join(tempfile.gettempdir(), "confab-%s-%d-failures.txt" % (self.name, args.seed))
            with open(path, "w") as out:
                for item in self.failures.items:
                    out.write(item + "\n")
            print("  all %d failures: %s" % (len(self.failures.items), path))
        print("  wall time: %.1f s" % wall)
        if args.keep:
            print("  kept: %s" % self.tmp)
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)
        if args.plant_faults:
            # The self-test: every oracle a fault was planted for must have reported it.
            missed = []
            for oracle in ("reply", "user-message", "accepted-send", "blob", "compaction", "compaction-stored", "uncompaction") + (("mcp-result", "tool-result") if self.mcp_python else ()):
                what = self.planted.get(oracle)
                caught = any(("oracle %s:" % oracle) in item and self.planted_in.get(oracle, "") in item for item in self.failures.items)
                print("  self-test: oracle %s: %s" % (oracle, "not planted (nothing to damage)" if what is None
                                                      else "%s: %s" % (what, "caught" if caught else "MISSED")))
                if what is None or not caught:
                    missed.append(oracle)
            print("  self-test: %s" % ("every planted fault caught" if not missed else "FAILED: %s" % ", ".join(missed)))
            return 1 if missed else 0
        if args.daemon_fault:
            # The self-test against the daemon: the oracle named for its fault must have reported it.
            oracle = DAEMON_FAULTS[args.daemon_fault]
            reports = collections.Counter(m.group(1) for item in self.failures.items
                                          for m in [re.search(r"oracle ([a-z-]+):", item)] if m)
            print("  self-test: daemon fault %s: oracle %s %s (oracle reports: %s)"
                  % (args.daemon_fault, oracle, "caught it" if reports[oracle] else "MISSED it",
                     ", ".join("%s %d" % kv for kv in sorted(reports.items())) or "none"))
            return 0 if reports[oracle] and s["kills"] > 0 else 1
        return 1 if self.failures.items or s["kills"] == 0 else 0


def arguments():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kills", type=int, default=100, help="SIGKILLs to deliver (default 100)")
    parser.add_argument("--max-seconds", type=float, default=600, help="stop starting rounds after this long (default 600)")
    parser.add_argument("--seed", type=int, default=None, help="RNG seed (default: random, printed)")
    parser.add_argument("--clients", type=int, default=5, help="load clients (default 5)")
    parser.add_argument("--streams", type=int, default=20, help="replies streaming at once, spread over the clients (default 20)")
    parser.add_argument("--max-delay", type=float, default=1.5, help="kill after a random 0..this many seconds of load (default 1.5)")
    parser.add_argument("--no-fsync", action="store_true", help="run confabd with [storage] fsync = false")
    parser.add_argument("--bin-dir", default=DEFAULT_BIN, help="where confabd and confab-fake-upstream are (default .build/release)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory (logs, data)")
    parser.add_argument("--failures-file", default=None,
                        help="where to write every failure (default: confab-crashloop-SEED-failures.txt in the temp dir)")
    parser.add_argument("--full-check-every", type=int, default=25,
                        help="read every conversation's history in full every N rounds; in between only those whose log "
                             "or listing changed, or that were written to (default 25)")
    parser.add_argument("--attach-rate", type=float, default=0.15,
                        help="share of sends that carry files, uploaded with blob.put first (default 0.15)")
    parser.add_argument("--compact-rate", type=float, default=0.08,
                        help="share of the turns after a reply that ask for a summary (conversation.compact), with a "
                             "send after it; half as many undo one (conversation.uncompact) (default 0.08)")
    parser.add_argument("--plant-faults", action="store_true",
                        help="self-test: after the last kill, damage the data directory once per oracle (a reply's byte, a user "
                             "message's byte, an accepted send's record, a blob, a summary's text, an answered summary's record, "
                             "an uncompaction written twice; with MCP a tool result's byte and a tool result) and pass only if "
                             "every oracle reports its fault")
    parser.add_argument("--daemon-fault", choices=sorted(DAEMON_FAULTS), default=None,
                        help="self-test: run a debug confabd with CONFAB_DEBUG_FAULT set to this mode and pass only if its "
                             "oracle reports the fault (%s)" % ", ".join("%s: %s" % kv for kv in sorted(DAEMON_FAULTS.items())))
    parser.add_argument("--mcp-python", default=DEFAULT_MCP_PYTHON,
                        help="the Python of the MCP virtual environment (make .build/venv-mcp/.installed), which runs "
                             "scripts/mcp-test-server.py as the load's MCP server; 'none' to run without MCP calls "
                             "(default .build/venv-mcp/bin/python)")
    parser.add_argument("--mcp-every", type=int, default=4,
                        help="call the MCP server in every Nth round: its check makes a call, its load offers the "
                             "conversations that call it (default 4)")
    parser.add_argument("--verbose", action="store_true")
    return parser


def main():
    parser = arguments()
    args = parser.parse_args()
    if args.seed is None:
        args.seed = int.from_bytes(os.urandom(4), "big")
    if args.kills < 1 or args.max_seconds <= 0 or args.clients < 1 or args.streams < args.clients:
        parser.error("need --kills >= 1, --max-seconds > 0, --clients >= 1, --streams >= --clients")
    if args.daemon_fault and args.plant_faults:
        parser.error("--daemon-fault and --plant-faults are separate self-tests")
    if args.mcp_every < 1:
        parser.error("need --mcp-every >= 1")
    if args.mcp_python != "none":
        args.mcp_python = os.path.abspath(args.mcp_python)
        if not os.access(args.mcp_python, os.X_OK):
            parser.error("no MCP environment at %s: make .build/venv-mcp/.installed, or --mcp-python none" % args.mcp_python)
    sys.exit(Loop(args).run())


if __name__ == "__main__":
    main()

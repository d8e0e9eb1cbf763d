#!/usr/bin/env python3
"""A bounded soak of confabd: many clients, many replies, faults mixed in, for a fixed time.

It starts confab-fake-upstream and confabd on a temporary directory (loopback and a Unix
socket only), then runs a mix of clients from several threads for --minutes (default 10):
chats with paced and long replies, upstream faults (429, 500, drop, stall, error mid-stream,
garbage, fail-first), cancels, detaches, clients attaching mid-reply, clients vanishing
mid-stream, conversations deleted (sometimes mid-reply) and created, malformed frames,
pipelined bursts, and now and then a client that never reads its socket (it must be cut).
Three watcher clients stay attached to every conversation in the pool for the whole run.

Every client checks the protocol as it goes: every request gets exactly one response, in
request order; every reply announced to an attached client ends with exactly one
message.completed or message.failed whose text is exactly the deltas it was sent (or the
client detached, or the conversation was deleted); nothing arrives for a conversation the
client is not attached to.

Regenerates, edits, continues, forks, system-prompt changes, calls of loopback tools (with
approvals), files (uploaded with blob.put, some in two chunks, some left unfinished or never
sent, then named by a send) and shares and unshares are among the scenarios. Every prompt is kept with the text the fake
upstream was asked to stream for it; at the end every stored reply is compared with that
text, and every history, message by message, with itself after the restart. Every stored
user message names the files the soak sent with its text, each a blob on disk that hashes to
its name; every conversation is shared as its last share or unshare answered; after the
restart the blobs on disk are exactly those stored messages name.

Every minute it prints confabd's RSS, open descriptors and `status` counts. At the end it
lets replies finish, disconnects everyone, samples once more, stops confabd with SIGTERM
(exit status must be 0), restarts it on the same data and checks that everything loads
cleanly and matches. Exit status: 0 when every check passed, 1 otherwise.

    scripts/soak.py [--minutes 10] [--seed N] [--bin DIR] [--upstream-bin FILE]
    make soak ARGS="--minutes 2"
"""
import argparse, base64, collections, hashlib, json, os, random, re, shutil, signal, socket, subprocess, sys, tempfile, threading, time

REPO = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
MIB = 1024 * 1024
MAX_LINE_BYTES = 256 * 1024
CLIENT_BUFFER_BYTES = 1 * MIB
MAX_STREAMS = 16
# The two Unix sockets libcurl opens for itself when it is loaded (its multi handle's wake-up).
LIBCURL_SOCKET_PAIR = 2


# The daemon's debug-only fault modes (LogStore's DebugFault) and what the oracle that must
# catch each reports (`compare_with_sources`, `check_files_and_shares`).
DAEMON_FAULTS = {
    "drop-record": "accepted (a result came) but not stored",
    "unstored-announce": "accepted (a result came) but not stored",
    "reply-byte": "complete, but not the text the upstream sent",
    "user-byte": "a stored user message the soak never sent",
    "blob-removed": "is named by a stored message but not on disk",
}


def log(text):
    print(text, flush=True)


# ---------------------------------------------------------------------------------------------
# Shared state

class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.ops = collections.Counter()        # scenarios run, by kind
        self.rpc = collections.Counter()        # requests sent, by method
        self.events = collections.Counter()     # everything else worth counting
        self.notifications = collections.Counter()
        self.violations = []
        # Every line an oracle reported, past the 20 of each check that become violations: the
        # self-test looks for its oracle here (a fault can make another check fill those 20).
        self.reports = []
        self.outcomes = {}                      # (conversation, reply) -> (status, error code, text)
        self.expected = {}                      # (conversation, reply) -> (kind, {(status, code)})
        self.cancelled = set()                  # replies generation.cancel said it stopped

    def bump(self, key, n=1, counter="events"):
        with self.lock:
            getattr(self, counter)[key] += n

    def report(self, lines):
        """What one oracle check found, all of it; the first 20 lines are violations."""
        with self.lock:
            self.reports.extend(lines)
        for line in lines[:20]:
            self.violation(line)

    def violation(self, text):
        with self.lock:
            self.violations.append(text)
            n = len(self.violations)
        if n <= 50:
            log("VIOLATION: " + text)

    def record_final(self, key, message, error, who):
        entry = (message.get("status"), (error or message.get("error") or {}).get("code"), message.get("content", ""))
        with self.lock:
            previous = self.outcomes.get(key)
            if previous is None:
                self.outcomes[key] = entry
                return
        if previous != entry:
            self.violation("%s: reply %s/%s ended as %s here but %s for another client"
                           % (who, key[0], key[1], entry[:2] + (entry[2][-60:],), previous[:2] + (previous[2][-60:],)))


class Pool:
    """The conversations clients pick from; watchers stay attached to all of them."""

    def __init__(self):
        self.lock = threading.Lock()
        self.sends = {}      # id -> sends so far
        self.busy = set()    # taken out for deletion

    def add(self, cid):
        with self.lock:
            self.sends[cid] = 0

    def ids(self):
        with self.lock:
            return list(self.sends)

    def pick(self, rng):
        with self.lock:
            ids = sorted(self.sends)
        return rng.choice(ids) if ids else None

    def note_send(self, cid):
        with self.lock:
            if cid in self.sends:
                self.sends[cid] += 1

    def take(self, rng):
        """Removes a conversation from the pool (the most used one, usually) for deletion."""
        with self.lock:
            if len(self.sends) <= 4:
                return None
            ids = sorted(self.sends)
            if rng.random() < 0.6:
                cid = max(ids, key=lambda c: self.sends[c])
            else:
                cid = rng.choice(ids)
            del self.sends[cid]
            return cid


class Disconnected(Exception):
    pass


class Request:
    __slots__ = ("id", "method", "params", "expect", "done", "result", "error", "sent_at")

    def __init__(self, rid, method, params, expect):
        self.id, self.method, self.params, self.expect = rid, method, params, expect
        self.done, self.result, self.error = False, None, None
        self.sent_at = time.monotonic()


# ---------------------------------------------------------------------------------------------
# A protocol-checking client

class Client:
    """One connection with a reader thread that checks every frame it gets."""

    def __init__(self, soak, role, hello=True):
        self.soak, self.stats, self.role = soak, soak.stats, role
        if not soak.slots.acquire(timeout=120):
            raise RuntimeError("no client slot free for two minutes")
        self.released = False
        self.release_lock = threading.Lock()
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.sock.connect(soak.socket_path)
        except OSError:
            self.sock.close()
            self._release()
            raise
        self.cond = threading.Condition()
        self.next_id = 1
        self.outstanding = collections.OrderedDict()
        self.null_expected = collections.deque()   # what each id-null answer must be, in order
        self.attached, self.detaching = set(), set()
        self.tracked = {}                          # (conversation, reply) -> [pieces]
        self.finals = set()
        self.tool_messages = set()                 # (conversation, id) of tool messages begun, not ended
        self.chain_ends = set()                    # (conversation, id) of assistant messages that ended a reply
        self.continues = collections.Counter()     # (conversation, reply) -> times it was continued
        self.approvals = []                        # (conversation, call) waiting for a yes
        self.sent = set()                          # (conversation, message id) of our stored sends
        self.client_id = None
        self.closed = False                        # we hung up
        self.eof = False                           # the connection is gone
        self.torn = False                          # the last frame had no newline
        self.cut_expected = False
        self.stopping_seen = False
        self.stats.bump("connections")
        self.reader = threading.Thread(target=self._read, name="reader-" + role, daemon=True)
        self.reader.start()
        soak.register(self)
        if hello:
            try:
                result, error = self.call("hello", {"client": "soak-" + role, "name": role})
            except Disconnected:
                self.close()
                raise

    @property
    def who(self):
        return "%s[%s]" % (self.role, self.client_id or "?")

    def _release(self):
        with self.release_lock:
            if self.released:
                return
            self.released = True
        self.soak.slots.release()

    # -- reading

    def _read(self):
        try:
            with self.sock.makefile("rb", buffering=1 << 16) as f:
                while True:
                    try:
                        line = f.readline()
                    except (OSError, ValueError):
                        break
                    if not line:
                        break
                    if not line.endswith(b"\n"):
                        self.torn = True
                        break
                    try:
                        frame = json.loads(line)
                    except ValueError:
                        self.stats.violation("%s: daemon sent a line that is not JSON: %r" % (self.who, line[:120]))
                        continue
                    with self.cond:
                        try:
                            self._frame(frame)
                        except Exception as error:  # a malformed frame from the daemon
                            self.stats.violation("%s: cannot handle frame %r: %r" % (self.who, line[:200], error))
                        self.cond.notify_all()
        finally:
            with self.cond:
                self.eof = True
                self.cond.notify_all()
            if not self.closed:
                self.soak.lost(self)

    def _frame(self, frame):
        if frame.get("jsonrpc") != "2.0":
            self.stats.violation("%s: frame without jsonrpc 2.0: %r" % (self.who, frame))
        if "method" not in frame:
            self._response(frame)
        else:
            self._notification(frame["method"], frame.get("params") or {})

    def _response(self, frame):
        rid = frame.get("id")
        if ("result" in frame) == ("error" in frame):
            self.stats.violation("%s: response needs exactly one of result and error: %r" % (self.who, frame))
        if rid is None:
            outcome = frame["error"]["code"] if "error" in frame else "result"
            if not self.null_expected:
                self.stats.violation("%s: unexpected answer with id null: %r" % (self.who, frame))
            else:
                allowed = self.null_expected.popleft()
                if outcome not in allowed:
                    self.stats.violation("%s: answer with id null was %r, expected one of %r" % (self.who, outcome, sorted(map(str, allowed))))
            return
        request = self.outstanding.get(rid)
        if request is None:
            self.stats.violation("%s: response to id %r, which is not waiting for one: %r" % (self.who, rid, frame))
            return
        oldest = next(iter(self.outstanding))
        if oldest != rid:
            self.stats.violation("%s: response to id %r (%s) arrived before the one to older id %r (%s)" %
                                 (self.who, rid, request.method, oldest, self.outstanding[oldest].method))
        del self.outstanding[rid]
        request.result, request.error = frame.get("result"), frame.get("error")
        if request.expect is not None:
            outcome = request.error["code"] if request.error else "result"
            if outcome not in request.expect:
                self.stats.violation("%s: %s id %r answered %r, expected one of %r" %
                                     (self.who, request.method, rid, frame.get("error") or "result", sorted(map(str, request.expect))))
        if request.error is None:
            self._apply(request)
        elif request.method == "conversation.detach":
            self.detaching.discard(request.params["conversation"])
        request.done = True

    def _apply(self, request):
        method, result = request.method, request.result
        if method == "hello":
            self.client_id = result.get("client_id")
        elif method == "conversation.attach":
            cid = request.params["conversation"]
            self.attached.add(cid)
            pending = result.get("pending")
            if pending is not None:
                key = (cid, pending["id"])
                if pending.get("status") != "streaming":
                    self.stats.violation("%s: attach returned %s/%s as pending with status %r instead of \"streaming\""
                                         % (self.who, key[0], key[1], pending.get("status")))
                if key in self.finals:
                    self.stats.violation("%s: attach returned %s as pending after its final" % (self.who, key))
                elif key in self.tracked:
                    so_far = "".join(self.tracked[key])
                    if so_far != pending.get("content", ""):
                        self.stats.violation("%s: re-attach: pending %s holds %d chars, deltas gave %d" %
                                             (self.who, key, len(pending.get("content", "")), len(so_far)))
                    self.tracked[key] = [pending.get("content", "")]
                else:
                    self.tracked[key] = [pending.get("content", "")]
                    self.stats.bump("attached mid-reply")
        elif method == "conversation.detach":
            cid = request.params["conversation"]
            self.attached.discard(cid)
            self.detaching.discard(cid)
            self._forget(cid)
        elif method in ("message.send", "message.edit"):     # an edit is answered as a send is
            self.sent.add((request.params["conversation"], result["message"]["id"]))
            with self.soak.sources_lock:
                self.soak.accepted.append((request.params["conversation"], result["message"]["id"], request.params["content"]))

    def _forget(self, cid):
        for key in [k for k in self.tracked if k[0] == cid]:
            del self.tracked[key]

    def _notification(self, method, params):
        self.stats.bump(method, counter="notifications")
        if method == "server.stopping":
            self.stopping_seen = True
            return
        cid = params.get("conversation")
        if cid not in self.attached:
            if cid not in self.detaching:
                self.stats.violation("%s: %s for %s, which it is not attached to" % (self.who, method, cid))
            return
        if method == "message.created":
            message = params["message"]
            if message["role"] == "tool":
                self.tool_messages.add((cid, message["id"]))
            elif message["role"] == "assistant":
                key = (cid, message["id"])
                if key in self.finals or key in self.tracked:
                    self.stats.violation("%s: message.created for reply %s again" % (self.who, key))
                if message.get("status") != "streaming" or message.get("content"):
                    self.stats.violation("%s: reply %s created as %r with %d chars" % (self.who, key, message.get("status"), len(message.get("content", ""))))
                self.tracked[key] = []
            else:
                author = message.get("author") or {}
                if self.client_id and author.get("client_id") == self.client_id and (cid, message["id"]) not in self.sent:
                    self.stats.violation("%s: message.created for its own send %s before the send's result" % (self.who, message["id"]))
        elif method == "message.delta":
            pieces = self.tracked.get((cid, params["message"]))
            if pieces is None:
                self.stats.violation("%s: delta for reply %s/%s, never announced" % (self.who, cid, params["message"]))
            else:
                pieces.append(params["content"])
        elif method in ("message.completed", "message.failed") and params["message"].get("role") == "tool":
            key = (cid, params["message"]["id"])
            if key not in self.tool_messages:
                self.stats.violation("%s: %s for tool message %s, never announced" % (self.who, method, key))
            self.tool_messages.discard(key)
            self.stats.record_final(key, params["message"], params.get("error"), self.who)
        elif method == "message.continued":
            key = (cid, params["message"]["id"])
            if key not in self.finals:
                self.stats.violation("%s: message.continued for %s, which had not ended" % (self.who, key))
            self.finals.discard(key)
            self.chain_ends.discard(key)
            self.continues[key] += 1
            self.tracked[key] = [params["message"].get("content", "")]
        elif method == "tool.approval_requested":
            self.approvals.append((cid, params["call"]))
        elif method in ("message.completed", "message.failed"):
            message = params["message"]
            key = (cid, message["id"])
            if key in self.finals:
                self.stats.violation("%s: a second final (%s) for reply %s" % (self.who, method, key))
                return
            pieces = self.tracked.pop(key, None)
            if pieces is None:
                self.stats.violation("%s: %s for reply %s, never announced" % (self.who, method, key))
                return
            self.finals.add(key)
            text = "".join(pieces)
            if text != message.get("content", ""):
                self.stats.violation("%s: reply %s: deltas gave %d chars, the final holds %d" % (self.who, key, len(text), len(message.get("content", ""))))
            status = message.get("status")
            if (method == "message.failed") != (status == "failed") or status not in ("complete", "cancelled", "interrupted", "failed"):
                self.stats.violation("%s: %s with status %r" % (self.who, method, status))
            if method == "message.failed" and not params.get("error"):
                self.stats.violation("%s: message.failed without error" % self.who)
            if status != "complete" or not message.get("tool_calls"):
                self.chain_ends.add(key)
            # A reply cut by the token limit may be continued and end again: its endings are told
            # apart by their finish reason and status (a client attached mid-continuation saw only
            # the second), and each is compared with the same ending elsewhere.
            length = message.get("finish_reason") == "length"
            self.stats.record_final(key + (("length", status),) if length else key, message, params.get("error"), self.who)
        elif method == "conversation.deleted":
            self.attached.discard(cid)
            self.detaching.discard(cid)
            stopped = [k for k in self.tracked if k[0] == cid]
            self.stats.bump("replies in flight when their conversation was deleted (per watching client)", len(stopped))
            self._forget(cid)
        elif method not in ("message.retrying", "generation.cancelled", "client.attached", "client.detached", "conversation.updated",
                            "message.superseded", "tool.approved", "tool.denied", "tool.started", "tool.completed"):
            self.stats.violation("%s: unknown notification %s" % (self.who, method))

    # -- writing

    def _send(self, data):
        try:
            self.sock.sendall(data)
        except OSError as error:
            raise Disconnected(str(error))

    def request(self, method, params=None, expect=None):
        """Sends a request and returns at once; wait() for its answer."""
        with self.cond:
            if self.eof or self.closed:
                raise Disconnected("connection gone")
            rid = self.next_id
            self.next_id += 1
            request = Request(rid, method, params or {}, expect)
            self.outstanding[rid] = request
            if method == "conversation.detach":
                self.detaching.add(params["conversation"])
        self.stats.bump(method, counter="rpc")
        self._send((json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params or {}}) + "\n").encode())
        return request

    def wait(self, request, timeout=60):
        deadline = time.monotonic() + timeout
        with self.cond:
            while not request.done:
                if self.eof:
                    raise Disconnected("connection gone while waiting for %s" % request.method)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    self.stats.violation("%s: no response to %s (id %d) within %d s" % (self.who, request.method, request.id, timeout))
                    raise Disconnected("no response")
                self.cond.wait(min(remaining, 1.0))
        return request.result, request.error

    def call(self, method, params=None, timeout=60, expect=None):
        return self.wait(self.request(method, params, expect), timeout)

    def send_raw(self, data, null_answers=()):
        with self.cond:
            self.null_expected.extend(null_answers)
        self._send(data)

    # -- waiting for the stream

    def wait_for(self, predicate, timeout):
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                value = predicate()
                if value:
                    return value
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.eof:
                    return None
                self.cond.wait(min(remaining, 1.0))

    def wait_final(self, key, timeout=120):
        """'final', 'gone' (detached, deleted or disconnected) or None (timed out)."""
        def done():
            if key in self.finals:
                return "final"
            if self.eof or key[0] not in self.attached:
                return "gone"
            return None
        return self.wait_for(done, timeout)

    def wait_deltas(self, key, count, timeout=60):
        def enough():
            if key in self.finals or self.eof or key[0] not in self.attached:
                return "over"
            pieces = self.tracked.get(key)
            return "ok" if pieces is not None and len(pieces) > count else None
        return self.wait_for(enough, timeout)

    def close(self):
        with self.cond:
            if self.closed:
                return
            self.closed = True
            abandoned = len(self.outstanding)
        if abandoned:
            self.stats.bump("requests abandoned by a hang-up", abandoned)
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        self.reader.join(10)
        self._release()
        self.soak.unregister(self)


# ---------------------------------------------------------------------------------------------
# Processes, samples, the daemon's log

class DaemonLog:
    """Follows confabd's stderr: disconnect reasons, reply endings, problems."""

    def __init__(self, path):
        self.path, self.offset, self.rest = path, 0, b""
        self.lock = threading.Lock()
        self.disconnects = {}
        self.counts = collections.Counter()
        self.problems = []
        self.errors = []

    def poll(self):
        with self.lock:
            try:
                with open(self.path, "rb") as f:
                    f.seek(self.offset)
                    data = f.read()
            except OSError:
                return
            self.offset += len(data)
            lines = (self.rest + data).split(b"\n")
            self.rest = lines.pop()
            for raw in lines:
                line = raw.decode("utf-8", "replace")
                m = re.search(r"client=(c\d+) disconnected: (.*)", line)
                if m:
                    self.disconnects[m.group(1)] = m.group(2)
                    if m.group(2).startswith("slow reader"):
                        self.counts["slow reader cut"] += 1
                    continue
                m = re.search(r" reply=\S+ (complete|cancelled) chars=", line)
                if m:
                    self.counts["reply " + m.group(1)] += 1
                    continue
                m = re.search(r" reply=\S+ failed: (\S*)", line)
                if m:
                    self.counts["reply failed"] += 1
                    self.counts["reply failed " + m.group(1)] += 1
                    continue
                if "interrupted by shutdown" in line:
                    self.counts["reply interrupted"] += 1
                elif "log problem" in line:
                    self.problems.append(line)
                elif line.startswith("error:"):
                    self.errors.append(line)
                elif "retrying in" in line:
                    self.counts["retries"] += 1

    def reason(self, client_id):
        self.poll()
        with self.lock:
            return self.disconnects.get(client_id)


class Daemon:
    def __init__(self, binary, tmp, config, log_path, env):
        self.socket_path = os.path.join(tmp, "confabd.sock")
        self.log_path = log_path
        self.stderr = open(log_path, "ab")
        self.proc = subprocess.Popen([binary, "--socket", self.socket_path, "--data-dir", os.path.join(tmp, "data"),
                                      "--config", config, "--log-level", "info"],
                                     stdin=subprocess.DEVNULL, stdout=self.stderr, stderr=self.stderr, env=env)
        self.log = DaemonLog(log_path)
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("confabd exited with status %d at start-up; see %s" % (self.proc.returncode, log_path))
            try:
                s = socket.socket(socket.AF_UNIX)
                s.connect(self.socket_path)
                s.close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("confabd did not start listening within 60 s")

    @property
    def pid(self):
        return self.proc.pid

    def rss_kib(self):
        try:
            with open("/proc/%d/status" % self.pid) as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1])
        except OSError:
            return None

    def fds(self):
        """Open descriptors by kind: unix sockets, tcp sockets (to the upstream), logs, other."""
        def inodes(names, column):
            found = set()
            for name in names:
                try:
                    with open("/proc/%d/net/%s" % (self.pid, name)) as f:
                        next(f)
                        for line in f:
                            parts = line.split()
                            if len(parts) > column:
                                found.add(parts[column])
                except OSError:
                    pass
            return found
        unix, tcp = inodes(["unix"], 6), inodes(["tcp", "tcp6"], 9)
        kinds = collections.Counter()
        base = "/proc/%d/fd" % self.pid
        try:
            names = os.listdir(base)
        except OSError:
            return kinds
        for name in names:
            try:
                target = os.readlink(os.path.join(base, name))
            except OSError:
                continue
            if target.endswith(".jsonl") or target.endswith(".jsonl (deleted)"):
                kinds["log"] += 1
            elif target.startswith("socket:["):
                inode = target[8:-1]
                kinds["unix" if inode in unix else "tcp" if inode in tcp else "other socket"] += 1
            else:
                kinds["other"] += 1
        kinds["total"] = sum(v for k, v in kinds.items() if k != "total")
        return kinds

    def stop(self, timeout=30):
        """SIGTERM, then the exit status (None if it had to be killed)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                self.stderr.close()
                return None
        self.stderr.close()
        self.log.poll()
        return self.proc.returncode


def is_asan(binary):
    try:
        with open(binary, "rb") as f:
            return b"__asan_init" in f.read()
    except OSError:
        return False


def demangle(names):
    tool = shutil.which("swift-demangle")
    if not tool or not names:
        return names
    try:
        out = subprocess.run([tool, "--simplified"], input="\n".join(names), capture_output=True, text=True, timeout=30).stdout
        lines = out.splitlines()
        return lines if len(lines) == len(names) else names
    except (OSError, subprocess.SubprocessError):
        return names


def sanitizer_findings(path):
    """AddressSanitizer errors (whole reports) and LeakSanitizer leaks (one dict per stack) in a log."""
    try:
        with open(path, "rb") as f:
            lines = f.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return [], []
    errors, leaks = [], []
    current, leak = None, None
    for line in lines:
        if re.search(r"ERROR: AddressSanitizer|LeakSanitizer has encountered|WARNING: AddressSanitizer", line):
            current, leak = [line], None
            errors.append(current)
            continue
        if "ERROR: LeakSanitizer: detected memory leaks" in line:
            current, leak = None, None
            continue
        m = re.match(r"(Direct|Indirect) leak of (\d+) byte\(s\) in (\d+) object", line)
        if m:
            leak = {"kind": m.group(1), "bytes": int(m.group(2)), "objects": int(m.group(3)), "frames": []}
            leaks.append(leak)
            continue
        frame = re.match(r"\s+#\d+ 0x[0-9a-f]+ in (\S+)(?: (\S+))?", line)
        if frame and leak is not None:
            leak["frames"].append((frame.group(1), frame.group(2) or ""))
            continue
        if current is not None:
            current.append(line)
            if line.startswith("SUMMARY:"):
                current = None
        if line.startswith("SUMMARY:"):
            leak = None
    for leak in leaks:
        where = " ".join(f + " " + loc for f, loc in leak["frames"])
        # Only the old TOMLKit package is excused; the config parser's own shim (Sources/CTOML)
        # and the toml++ code compiled into it count as confab's.
        if "TOMLKit" in where:
            leak["origin"] = "TOMLKit (config file decoding)"
        elif "/Sources/" in where and REPO in where:
            leak["origin"] = "confab"
        elif all(re.match(r"(malloc|calloc|realloc|operator|posix_memalign)", f) for f, _ in leak["frames"]):
            # The fast unwinder stops at libstdc++: C++ code (toml++ or ICU), caller unknown.
            # ASAN_OPTIONS=fast_unwind_on_malloc=0 shows the whole stack, slowly.
            leak["origin"] = "unattributed (C++ operator new, stack cut at libstdc++)"
        else:
            leak["origin"] = "other"
    return ["\n".join(e) for e in errors], leaks


def describe_leaks(leaks, limit=12):
    """Lines grouping leaks by origin, then each non-TOMLKit stack (demangled, allocator frames dropped)."""
    by_origin = collections.defaultdict(lambda: [0, 0, 0])
    for leak in leaks:
        group = by_origin[leak["origin"]]
        group[0] += leak["bytes"]
        group[1] += leak["objects"]
        group[2] += 1
    lines = ["  %s: %d bytes in %d allocations (%d stacks)" % (origin, b, o, n) for origin, (b, o, n) in sorted(by_origin.items())]
    shown = 0
    for leak in sorted(leaks, key=lambda l: -l["bytes"]):
        if leak["origin"].startswith("TOMLKit") or shown >= limit:
            continue
        shown += 1
        frames = [(f, loc) for f, loc in leak["frames"]
                  if not re.match(r"(malloc|calloc|realloc|posix_memalign|swift_slowAlloc|swift_allocObject|operator|strdup)", f)]
        names = demangle([f for f, _ in frames[:8]])
        lines.append("  %s leak of %d bytes in %d objects [%s]:" % (leak["kind"], leak["bytes"], leak["objects"], leak["origin"]))
        if not frames:
            lines.append("      (no frames beyond the allocator)")
        for name, (_, loc) in zip(names, frames[:8]):
            lines.append("      %s  %s" % (name[:110], loc.replace(REPO + "/", "")))
    return lines


def mib(kib):
    return "%.1f MiB" % (kib / 1024.0) if kib is not None else "?"


# ---------------------------------------------------------------------------------------------
# The soak

class Soak:
    def __init__(self, args):
        self.args = args
        self.seed = args.seed
        self.stats = Stats()
        self.pool = Pool()
        self.slots = threading.BoundedSemaphore(args.max_clients)
        self.stop = threading.Event()
        self.clients_lock = threading.Lock()
        self.clients = set()
        self.lost_clients = []
        self.samples = []          # (seconds since start, rss KiB, fds, status)
        self.rss_peak = 0
        self.uniq = 0
        self.uniq_lock = threading.Lock()
        self.watchers = []
        self.daemon = None
        self.load_log = None
        # Every prompt sent whose reply the fake upstream's directives decide (all but tool
        # calls): what it was asked to send is the oracle every stored reply is compared with
        # (not the daemon with itself).
        self.sources = set()
        self.prompts = set()      # every text the soak sent as a user message, tool calls' included
        self.accepted = []        # (conversation, message id, text) of every send and edit answered with a result
        self.sources_lock = threading.Lock()
        self.tool_conversations = []
        # Files and shares, the oracle's own record (check_files_and_shares):
        self.files_sent = {}      # text of every send that named files -> [(name, sha256)]
        self.uploaded = {}        # sha256 the soak computed of every file it finished uploading -> size
        self.shares = {}          # conv -> {uid: role} as its last share or unshare answered
        self.share_locks = collections.defaultdict(threading.Lock)   # one share or unshare at a time per conversation

    # -- bookkeeping

    def register(self, client):
        with self.clients_lock:
            self.clients.add(client)

    def unregister(self, client):
        with self.clients_lock:
            self.clients.discard(client)

    def lost(self, client):
        """The daemon ended a connection we did not close: judged at the end, with its reason."""
        with self.clients_lock:
            self.lost_clients.append(client)
        client._release()
        self.unregister(client)

    def tag(self):
        with self.uniq_lock:
            self.uniq += 1
            return "soak-%d-%d" % (self.seed, self.uniq)

    @property
    def socket_path(self):
        return self.daemon.socket_path

    # -- prompts: text for message.send and what the reply should end as

    # A directive as confab-fake-upstream's extractDirectives reads one: [[name]] or
    # [[name:value]], the value running to the first "]]", across lines too.
    DIRECTIVE = re.compile(r"\[\[([0-9A-Za-z_-]+)(?:\]\]|:(.*?)\]\])", re.S)

    @classmethod
    def upstream_script(cls, turn):
        """What confab-fake-upstream streams for a last user turn, and whether it ends cut by the
        token limit: as its Script reads the directives, a later one of a name wins, and
        [[reply:]] goes before [[words:]] whatever their order; without either, an echo of the
        text without its directives."""
        reply = words = finish = None
        for directive in cls.DIRECTIVE.finditer(turn):
            name, value = directive.group(1).lower(), directive.group(2)
            if value is None:
                continue
            if name == "reply":
                reply = value
            elif name == "words" and re.fullmatch(r"[+-]?[0-9]+", value.strip(" \t")) and int(value) >= 0:
                words = min(int(value), 1000000)
            elif name == "finish" and value:
                finish = value
        if reply is not None:
            text = reply
        elif words is not None:
            text = " ".join("w%d" % i for i in range(1, words + 1))
        else:
            text = "You said: " + cls.DIRECTIVE.sub("", turn).strip()
        return text, finish == "length"

    def prompt(self, rng, kind):
        text, expected = self.make_prompt(rng, kind)
        with self.sources_lock:
            self.prompts.add(text)
            if "[[tool:" not in text:     # a chain of tool calls: its text depends on the tool's answer
                self.sources.add(text)
        return text, expected

    def make_prompt(self, rng, kind):
        tag = self.tag()
        complete = {("complete", None)}
        if kind == "short":
            return "[[words:%d]] [[chunk:%d]] [[delay:%d]] %s" % (rng.randint(3, 60), rng.randint(3, 12), rng.randint(5, 30), tag), complete
        if kind == "echo":
            return "hello there, %s" % tag, complete
        if kind == "unicode":
            return "[[reply:héllo wörld ✓ 日本語 🎉👍🏽 ‘quotes’ — done]] [[chunk:%d]] [[delay:10]] %s" % (rng.randint(1, 4), tag), complete
        if kind == "long":
            return "[[words:%d]] [[chunk:%d]] [[delay:%d]] %s" % (rng.randint(800, 3000), rng.randint(16, 40), rng.randint(2, 8), tag), complete
        if kind == "paced":   # long enough to cancel, attach to, or hang up on
            return "[[words:%d]] [[chunk:8]] [[delay:%d]] %s" % (rng.randint(400, 1200), rng.randint(8, 14), tag), complete
        if kind == "429":
            return "[[status:429]] %s" % tag, {("failed", "rate_limited")}
        if kind == "500":
            return "[[status:500]] %s" % tag, {("failed", "upstream_http")}
        if kind == "drop":
            return "[[words:200]] [[delay:5]] [[drop:%d]] %s" % (rng.randint(0, 20), tag), {("failed", "upstream_protocol")}
        if kind == "stall":
            return "[[words:200]] [[delay:5]] [[stall:%d]] %s" % (rng.choice([0, 1, 5, 20]), tag), {("failed", "upstream_timeout")}
        if kind == "error-mid":
            return "[[words:200]] [[delay:5]] [[error-mid:%d]] %s" % (rng.randint(0, 20), tag), {("failed", "upstream_error")}
        if kind == "garbage":
            return "[[garbage]] %s" % tag, {("failed", "upstream_protocol")}
        if kind == "fail-first-1":
            return "[[fail-first:1]] [[words:20]] [[delay:5]] %s" % tag, complete
        if kind == "fail-first-2":
            return "[[fail-first:2]] [[words:20]] %s" % tag, {("failed", "upstream_http")}
        if kind == "length":      # cut by the token limit, to be continued
            return "[[words:%d]] [[chunk:8]] [[delay:5]] [[finish:length]] %s" % (rng.randint(20, 200), tag), complete
        if kind in ("tool-echo", "tool-guarded"):
            return '[[tool:%s {"city":"c%d"}]] [[delay:5]] %s' % (kind[5:], rng.randrange(1000), tag), complete
        raise ValueError(kind)

    NORMAL = ["short"] * 6 + ["echo", "unicode", "long"]
    FAULTS = ["429", "500", "drop", "stall", "error-mid", "garbage", "fail-first-1", "fail-first-2"]

    def send(self, client, rng, cid, kind, timeout=60):
        """message.send; returns the reply's key, or None when refused (deleted, queue full)."""
        text, expected = self.prompt(rng, kind)
        result, error = client.call("message.send", {"conversation": cid, "content": text}, timeout=timeout,
                                    expect={"result", -32001, -32004})
        if error:
            self.stats.bump("send refused: " + {-32001: "conversation deleted", -32004: "queue full"}.get(error["code"], str(error["code"])))
            return None
        self.pool.note_send(cid)
        key = (cid, result["reply"])
        with self.stats.lock:
            self.stats.expected[key] = (kind, expected)
        self.stats.bump("sends: " + kind)
        return key

    def attach(self, client, cid, history=0):
        result, error = client.call("conversation.attach", {"conversation": cid, "history": history}, expect={"result", -32001})
        return error is None

    # -- scenarios (each runs in a worker thread with its own clients)

    def sc_chat(self, rng):
        cid = self.pool.pick(rng)
        c = Client(self, "chat")
        try:
            attached = rng.random() < 0.8 and self.attach(c, cid, rng.choice([0, 0, 3, 20]))
            keys = []
            for _ in range(rng.randint(1, 3)):
                key = self.send(c, rng, cid, rng.choice(self.NORMAL))
                if key is None:
                    break
                keys.append(key)
            if attached:
                for key in keys:
                    if c.wait_final(key, 150) is None:
                        self.stats.bump("chat gave up waiting for a final")
                if rng.random() < 0.5:
                    c.call("conversation.detach", {"conversation": cid}, expect={"result", -32001})
            if rng.random() < 0.3:
                c.call("conversation.history", {"conversation": cid, "limit": rng.randint(1, 30)}, expect={"result", -32001})
        finally:
            c.close()

    def sc_revise(self, rng):
        """A send, then one of regenerate, edit, continue, fork or configure on it (each may be
        refused with -32006 when another scenario's reply is in flight there, or -32001 when the
        conversation was deleted meanwhile)."""
        cid = self.pool.pick(rng)
        c = Client(self, "revise")
        refused = {"result", -32001, -32006}
        try:
            if not self.attach(c, cid):
                return
            op = rng.choice(["regenerate", "edit", "continue", "fork", "configure"])
            key = self.send(c, rng, cid, "length" if op == "continue" else "short")
            if key is None or c.wait_final(key, 150) != "final":
                return
            reply = None
            if op == "regenerate":
                result, error = c.call("message.regenerate", {"conversation": cid}, expect=refused)
                reply = None if error else result["reply"]
            elif op == "edit":
                text, expected = self.prompt(rng, "short")
                user = "m%d" % (int(key[1][1:]) - 1)
                result, error = c.call("message.edit", {"conversation": cid, "message": user, "content": text}, expect=refused | {-32602})
                reply = None if error else result["reply"]
                if reply:
                    with self.stats.lock:
                        self.stats.expected[(cid, reply)] = ("edit", expected)
            elif op == "continue":
                result, error = c.call("message.continue", {"conversation": cid}, expect=refused)
                reply = None if error else result["reply"]
            elif op == "fork":
                # Up to its own reply: a fork of everything would copy another scenario's send still
                # in flight and answer it in the fork, a second request with the same text, which
                # spends a [[fail-first:N]] directive's failures and lets the original succeed.
                result, error = c.call("conversation.fork", {"conversation": cid, "at": key[1], "title": "fork " + self.tag()},
                                       expect=refused)
            else:
                result, error = c.call("conversation.configure", {"conversation": cid, "system": "soak system " + self.tag()},
                                       expect={"result", -32001})
            self.stats.bump("revisions: %s%s" % (op, " refused" if error else ""))
            if reply is not None and c.wait_final((cid, reply), 150) is None:
                self.stats.bump("revise gave up waiting for a final")
        finally:
            c.close()

    def sc_tools(self, rng):
        """A send that calls a loopback tool (the fake upstream's /tool/echo), sometimes one that
        waits for tool.approve, which this client answers; followed to the end of the chain."""
        cid = rng.choice(self.tool_conversations)
        c = Client(self, "tools")
        try:
            if not self.attach(c, cid):
                return
            kind = rng.choice(["tool-echo", "tool-echo", "tool-guarded"])
            key = self.send(c, rng, cid, kind)
            if key is None:
                return
            step = key[1] + "."

            def over():
                with_tools = [k for k in c.chain_ends if k[0] == cid and (k[1] == key[1] or k[1].startswith(step))]
                if with_tools:
                    return "over"
                if c.approvals:
                    return "approval"
                return None
            for _ in range(20):
                state = c.wait_for(over, 150)
                if state == "approval":
                    with c.cond:
                        waiting, c.approvals = list(c.approvals), []
                    for conv, call in waiting:
                        allow = rng.random() < 0.8
                        c.call("tool.approve", {"conversation": conv, "call": call, "allow": allow}, expect={"result", -32006})
                        self.stats.bump("tool calls approved" if allow else "tool calls denied")
                    continue
                if state is None:
                    self.stats.bump("tools gave up waiting for the end of the chain")
                break
        finally:
            c.close()

    # Uids the soak shares with: users every Debian system has (a share to a uid that may not
    # connect is kept all the same).
    SHARE_UIDS = (1, 2)

    def upload(self, c, rng, data):
        """blob.put of data, in two chunks half the time; returns its sha256, or None when refused."""
        if len(data) > 1000 and rng.random() < 0.5:
            half = len(data) // 2
            result, error = c.call("blob.put", {"data": base64.b64encode(data[:half]).decode()}, expect={"result", -32004})
            if error:
                return None
            result, error = c.call("blob.put", {"upload": result["upload"], "data": base64.b64encode(data[half:]).decode(),
                                                "final": True}, expect={"result", -32004})
        else:
            result, error = c.call("blob.put", {"data": base64.b64encode(data).decode(), "final": True}, expect={"result", -32004})
        if error:
            self.stats.bump("uploads refused: room")
            return None
        digest = hashlib.sha256(data).hexdigest()
        if result["attachment"]["sha256"] != digest or result["attachment"]["size"] != len(data):
            self.stats.violation("blob.put of %d bytes answered %r; their sha256 is %s" % (len(data), result["attachment"], digest))
        with self.sources_lock:
            self.uploaded[digest] = len(data)
        self.stats.bump("files uploaded")
        return digest

    def sc_files(self, rng):
        """Files uploaded (`blob.put`, text or a PNG signature and bytes that are no UTF-8, some in
        two chunks) and a send naming them; now and then an upload left unfinished when the
        connection closes, or files uploaded and never sent (both must be collected)."""
        cid = self.pool.pick(rng)
        c = Client(self, "files")
        try:
            if not self.attach(c, cid):
                return
            tag = self.tag()
            if rng.random() < 0.15:
                c.call("blob.put", {"data": base64.b64encode(b"unfinished " + tag.encode()).decode()}, expect={"result", -32004})
                self.stats.bump("uploads left unfinished")
            named = []
            for k in range(rng.choice([1, 1, 2])):
                if rng.random() < 0.5:
                    name, data = "notes-%d.txt" % k, "".join("%s line %d\n" % (tag, i) for i in range(rng.randint(1, 300))).encode()
                else:
                    size = rng.choice([600, 5000, 60000])
                    body = bytes((rng.randrange(256) | 0x80) for _ in range(64)) * (size // 64 + 1)
                    name, data = "shot-%d.png" % k, b"\x89PNG\r\n\x1a\n" + body[:size]
                digest = self.upload(c, rng, data)
                if digest is not None:
                    named.append((name, digest))
            if not named or rng.random() < 0.1:
                self.stats.bump("uploads never sent")
                return
            text, expected = self.prompt(rng, "short")
            with self.sources_lock:
                self.files_sent[text] = named
            result, error = c.call("message.send", {"conversation": cid, "content": text,
                                                    "attachments": [{"name": n, "sha256": d} for n, d in named]},
                                   expect={"result", -32001, -32004})
            if error:
                self.stats.bump("send refused: " + {-32001: "conversation deleted", -32004: "queue full"}.get(error["code"], str(error["code"])))
                return
            self.pool.note_send(cid)
            key = (cid, result["reply"])
            with self.stats.lock:
                self.stats.expected[key] = ("files", expected)
            self.stats.bump("sends with files")
            if c.wait_final(key, 150) is None:
                self.stats.bump("files gave up waiting for a final")
        finally:
            c.close()

    def sc_share(self, rng):
        """A pool conversation shared with another uid (read or write) or unshared, one at a time per
        conversation, so the last answer is the state the daemon must keep."""
        cid = self.pool.pick(rng)
        uid = rng.choice(self.SHARE_UIDS)
        c = Client(self, "share")
        try:
            with self.share_locks[cid]:
                if rng.random() < 0.6:
                    role = rng.choice(["read", "write"])
                    result, error = c.call("conversation.share", {"conversation": cid, "uid": uid, "role": role}, expect={"result", -32001})
                else:
                    result, error = c.call("conversation.unshare", {"conversation": cid, "uid": uid}, expect={"result", -32001})
                if error:
                    return          # deleted meanwhile
                with self.sources_lock:
                    self.shares[cid] = {entry["uid"]: entry["role"] for entry in result["conversation"].get("shared_with", [])}
                self.stats.bump("shares and unshares answered")
        finally:
            c.close()

    def check_files_and_shares(self, convs, histories, failures, data_dir, collected):
        """Every stored user message names the files the soak sent with its text (none for a text
        sent without), each a blob on disk whose bytes hash to its name, of the size uploaded;
        every conversation is shared as its last share or unshare answered. With `collected`
        (after a restart, which collects what nothing references) the blobs on disk are exactly
        those the stored messages name: a deleted conversation's, an unfinished upload's and one
        never sent are gone."""
        with self.sources_lock:
            files_sent = dict(self.files_sent)
            uploaded = dict(self.uploaded)
            shares = dict(self.shares)
        wrong = []
        referenced = set()
        for cid, messages in histories.items():
            for m in messages:
                files = [(a.get("name"), a.get("sha256")) for a in m.get("attachments") or []]
                if m["role"] == "user" and files != files_sent.get(m["content"], []):
                    wrong.append("%s/%s names files %r, the soak sent %r" % (cid, m["id"], files, files_sent.get(m["content"], [])))
                for name, digest in files:
                    referenced.add(digest)
                    self.stats.bump("file references checked")
        for digest in sorted(referenced):
            path = os.path.join(data_dir, "blobs", (digest or "")[:2], digest or "-")
            try:
                with open(path, "rb") as f:
                    data = f.read()
            except OSError:
                wrong.append("blob %s is named by a stored message but not on disk" % digest)
                continue
            if hashlib.sha256(data).hexdigest() != digest or len(data) != uploaded.get(digest):
                wrong.append("blob %s holds %d bytes whose sha256 is not its name, or that the soak never uploaded" % (digest, len(data)))
            self.stats.bump("blobs hashed")
        if collected:
            on_disk = set()
            for root, _, names in os.walk(os.path.join(data_dir, "blobs")):
                on_disk.update(name for name in names if re.fullmatch(r"[0-9a-f]{64}", name))
            for digest in sorted(on_disk - referenced)[:10]:
                wrong.append("blob %s is on disk after the restart, but no stored message names it" % digest)
            self.stats.bump("blobs on disk after the restart", len(on_disk))
        for cid, want in shares.items():
            if cid not in convs:
                continue          # deleted since
            got = {entry["uid"]: entry["role"] for entry in convs[cid].get("shared_with", [])}
            self.stats.bump("share states checked")
            if got != want:
                wrong.append("%s is shared as %r, its last share or unshare answered %r" % (cid, got, want))
        self.stats.report(wrong)
        if wrong:
            failures.append("%d files, blobs or shares differ from what the soak sent%s" % (len(wrong), " (after the restart)" if collected else ""))

    def sc_fault(self, rng):
        cid = self.pool.pick(rng)
        c = Client(self, "fault")
        try:
            if not self.attach(c, cid):
                return
            key = self.send(c, rng, cid, rng.choice(self.FAULTS))
            if key is not None and c.wait_final(key, 150) is None:
                self.stats.bump("fault gave up waiting for a final")
        finally:
            c.close()

    def sc_attach_mid(self, rng):
        cid = self.pool.pick(rng)
        a = Client(self, "mid-sender")
        b = None
        try:
            if not self.attach(a, cid):
                return
            key = self.send(a, rng, cid, "paced")
            if key is None or a.wait_deltas(key, rng.randint(3, 40), 90) != "ok":
                return
            b = Client(self, "mid-attacher")
            result, error = b.call("conversation.attach", {"conversation": cid, "history": rng.choice([0, 5])}, expect={"result", -32001})
            if error is None and result.get("pending") and result["pending"]["id"] == key[1]:
                self.stats.bump("attached mid-reply to a reply it then followed to the end")
            for client in (a, b):
                if client.wait_final(key, 150) is None:
                    self.stats.bump("attach-mid gave up waiting for a final")
        finally:
            a.close()
            if b:
                b.close()

    def sc_cancel(self, rng):
        cid = self.pool.pick(rng)
        c = Client(self, "cancel")
        try:
            if not self.attach(c, cid):
                return
            key = self.send(c, rng, cid, "paced")
            if key is None:
                return
            c.wait_deltas(key, rng.randint(0, 60), 90)
            for _ in range(3):
                result, error = c.call("generation.cancel", {"conversation": cid}, expect={"result", -32001})
                if error:
                    return
                cancelled = result.get("cancelled")
                if cancelled:
                    with self.stats.lock:
                        self.stats.cancelled.add((cid, cancelled))
                    self.stats.bump("cancels that stopped a reply")
                else:
                    self.stats.bump("cancels with nothing in flight")
                if c.wait_final(key, 30) is not None:
                    return
        finally:
            c.close()

    def sc_hangup(self, rng):
        """Disconnects abruptly: right after sending, after the send's result, or mid-stream."""
        cid = self.pool.pick(rng)
        c = Client(self, "hangup")
        try:
            attached = rng.random() < 0.8 and self.attach(c, cid)
            text, expected = self.prompt(rng, rng.choice(["paced", "long"]))
            when = rng.choice(["unanswered", "answered", "mid-stream"])
            request = c.request("message.send", {"conversation": cid, "content": text})
            if when != "unanswered":
                result, error = c.wait(request)
                if error is None:
                    key = (cid, result["reply"])
                    with self.stats.lock:
                        self.stats.expected[key] = ("hangup", expected)
                    if when == "mid-stream" and attached:
                        c.wait_deltas(key, rng.randint(1, 50), 60)
            self.stats.bump("hang-ups: " + when)
        finally:
            c.close()

    def sc_delete(self, rng):
        """Deletes a pool conversation (sometimes mid-reply) and puts a fresh one in its place."""
        cid = self.pool.take(rng)
        c = Client(self, "admin")
        try:
            if cid is not None:
                if rng.random() < 0.5 and self.attach(c, cid):
                    key = self.send(c, rng, cid, "paced")
                    if key is not None and c.wait_deltas(key, rng.randint(1, 30), 60) == "ok":
                        self.stats.bump("deletes mid-reply")
                result, error = c.call("conversation.delete", {"conversation": cid}, expect={"result"})
                self.stats.bump("conversations deleted")
            result, error = c.call("conversation.create", {"title": "soak %s" % self.tag(),
                                                            **({"system": "You are terse."} if rng.random() < 0.3 else {})})
            new = result["conversation"]["id"]
            if rng.random() < 0.3:
                c.call("conversation.rename", {"conversation": new, "title": "renamed %s" % self.tag()}, expect={"result"})
            self.pool.add(new)
            self.stats.bump("conversations created")
        finally:
            c.close()

    def sc_scratch(self, rng):
        """A conversation outside the pool: created, used once, deleted."""
        c = Client(self, "scratch")
        try:
            result, _ = c.call("conversation.create", {"title": "scratch"}, expect={"result"})
            cid = result["conversation"]["id"]
            self.stats.bump("conversations created")
            self.attach(c, cid)
            key = self.send(c, rng, cid, rng.choice(["short", "echo", "fail-first-1"]))
            if key is not None:
                c.wait_final(key, 60)
            c.call("conversation.delete", {"conversation": cid}, expect={"result"})
            self.stats.bump("conversations deleted")
        finally:
            c.close()

    def sc_burst(self, rng):
        """Pipelined sends into one conversation; beyond 16 waiting the daemon says -32004."""
        cid = self.pool.pick(rng)
        c = Client(self, "burst")
        try:
            if not self.attach(c, cid):
                return
            requests = []
            for _ in range(rng.randint(3, 8)):
                text, expected = self.prompt(rng, rng.choice(["short", "echo"]))
                requests.append((c.request("message.send", {"conversation": cid, "content": text}, expect={"result", -32001, -32004}), expected))
            keys = []
            for request, expected in requests:
                result, error = c.wait(request)
                if error:
                    self.stats.bump("send refused: " + {-32001: "conversation deleted", -32004: "queue full"}.get(error["code"], str(error["code"])))
                    continue
                key = (cid, result["reply"])
                with self.stats.lock:
                    self.stats.expected[key] = ("burst", expected)
                keys.append(key)
            for key in keys:
                if c.wait_final(key, 150) is None:
                    self.stats.bump("burst gave up waiting for a final")
        finally:
            c.close()

    def sc_malformed(self, rng):
        c = Client(self, "malformed")
        try:
            cid = self.pool.pick(rng) or "000000000000"
            frames = [
                (b"this is not json\n", {-32700}),
                (b"\xff\xfe{\"jsonrpc\":\"2.0\"}\n", {-32700}),
                (b"[1,2,3]\n", {-32600}),
                (b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"status\",}\n", {-32700}),
                (b"{\"jsonrpc\":\"2.0\",\"id\":{\"a\":1},\"method\":\"status\"}\n", {-32600}),
                (b"{\"jsonrpc\":\"2.0\",\"id\":\"r\",\"result\":{}}\n", {-32600}),
                (b"{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"status\"}\n", {"result"}),
                (b"{\"jsonrpc\":\"2.0\",\"method\":\"status\"}\n", None),            # a notification: no answer
                (b"   \r\n", None),                                                # blank: ignored
                (b"[" * 600 + b"]" * 600 + b"\n", {-32700, -32600}),
                (b"{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"no.such.method\"}\n", {-32601}),
                (b"{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"message.send\",\"params\":{\"conversation\":\"ILLEGAL\",\"content\":\"x\"}}\n", {-32602}),
                (("{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"message.send\",\"params\":{\"conversation\":\"%s\",\"content\":\"  \"}}\n" % cid).encode(), {-32602, -32001}),
                (("{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"conversation.attach\",\"params\":{\"conversation\":\"%s\",\"history\":5000}}\n" % cid).encode(), {-32602, -32001}),
                (b"{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"conversation.get\",\"params\":{\"conversation\":\"000000000000\"}}\n", {-32001}),
                (b"{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"status\",\"params\":7}\n", {-32600}),
                (b"{\"jsonrpc\":\"1.0\",\"id\":null,\"method\":\"status\"}\n", {-32600}),
                (b"{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"conversation.history\",\"params\":{\"conversation\":\"%s\",\"before\":\"m01\"}}\n" % cid.encode(), {-32602, -32001}),
            ]
            rng.shuffle(frames)
            data = b"".join(f for f, _ in frames)
            answers = [a for _, a in frames if a is not None]
            # Every frame split at random points, to exercise the framer.
            cuts = sorted(rng.sample(range(1, len(data)), min(8, len(data) - 1)))
            with c.cond:
                c.null_expected.extend(answers)
            start = 0
            for cut in cuts + [len(data)]:
                c._send(data[start:cut])
                start = cut
                time.sleep(rng.random() * 0.01)
            self.stats.bump("malformed frames sent", len(frames))
            c.call("status", expect={"result"})        # everything before it has been answered
            with c.cond:
                missing = len(c.null_expected)
                c.null_expected.clear()
            if missing:
                self.stats.violation("%s: %d malformed frames got no answer" % (c.who, missing))
            if rng.random() < 0.25:
                # Longer than max_line_bytes: -32002 with id null, then the daemon hangs up.
                c.cut_expected = True
                with c.cond:
                    c.null_expected.append({-32002})
                try:
                    c._send(b"{\"jsonrpc\":\"2.0\",\"method\":\"" + b"x" * (MAX_LINE_BYTES + 4096))
                except Disconnected:
                    pass
                if c.wait_for(lambda: c.eof, 15) is None:
                    self.stats.violation("%s: still connected after a line over the limit" % c.who)
                elif c.null_expected:
                    self.stats.violation("%s: no -32002 before the hang-up for a long line" % c.who)
                self.stats.bump("over-long lines sent")
        except Disconnected:
            if not c.cut_expected:
                raise
        finally:
            c.close()

    def sc_idle(self, rng):
        """Short visits: a lookup or two, or connecting and leaving without a word (or half a frame)."""
        what = rng.choice(["silent", "half-frame", "lookups"])
        c = Client(self, "visitor", hello=(what == "lookups"))
        try:
            if what == "half-frame":
                c._send(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"meth")
            elif what == "lookups":
                cid = self.pool.pick(rng)
                c.call("status", expect={"result"})
                c.call("conversation.list", {"limit": rng.randint(1, 50)}, expect={"result"})
                c.call("conversation.get", {"conversation": cid}, expect={"result", -32001})
                c.call("conversation.history", {"conversation": cid, "limit": 10}, expect={"result", -32001})
                c.call("hello", {"client": "soak-visitor", "name": "renamed visitor"}, expect={"result"})
            self.stats.bump("visits: " + what)
        finally:
            c.close()

    SCENARIOS = [("chat", 30), ("fault", 16), ("attach-mid", 8), ("cancel", 8), ("hangup", 8), ("delete+create", 5),
                 ("scratch", 3), ("burst", 4), ("malformed", 5), ("visit", 6), ("revise", 8), ("tools", 6),
                 ("files", 6), ("share", 3)]

    def worker(self, n):
        rng = random.Random("%d-worker-%d" % (self.seed, n))
        names, weights = zip(*self.SCENARIOS)
        run = {"chat": self.sc_chat, "fault": self.sc_fault, "revise": self.sc_revise, "tools": self.sc_tools, "attach-mid": self.sc_attach_mid, "cancel": self.sc_cancel,
               "hangup": self.sc_hangup, "delete+create": self.sc_delete, "scratch": self.sc_scratch, "burst": self.sc_burst,
               "malformed": self.sc_malformed, "visit": self.sc_idle,
               "files": self.sc_files, "share": self.sc_share}
        while not self.stop.is_set():
            name = rng.choices(names, weights)[0]
            self.stats.bump(name, counter="ops")
            try:
                run[name](rng)
            except (Disconnected, OSError) as error:
                if self.daemon.proc.poll() is not None:
                    return              # the daemon is gone: the main thread reports that
                if isinstance(error, Disconnected):
                    self.stats.bump("scenarios ended by a lost connection")
                else:
                    self.stats.violation("worker %d: %s: %r" % (n, name, error))
            except Exception as error:
                self.stats.violation("worker %d: %s raised %r" % (n, name, error))
                time.sleep(1)
            time.sleep(rng.random() * 0.3)

    # -- the client that never reads

    def slow_reader(self):
        rng = random.Random("%d-slow" % self.seed)
        next_at = time.monotonic() + min(20, self.args.minutes * 15)
        while not self.stop.wait(max(0, next_at - time.monotonic())):
            next_at = time.monotonic() + self.args.slow_every
            self.stats.bump("slow reader", counter="ops")
            ctl = Client(self, "slow-ctl")
            s = None
            try:
                result, _ = ctl.call("conversation.create", {"title": "slow reader"}, expect={"result"})
                cid = result["conversation"]["id"]
                if not self.slots.acquire(timeout=60):
                    continue
                s = socket.socket(socket.AF_UNIX)
                s.connect(self.socket_path)
                s.sendall(b'{"jsonrpc":"2.0","id":1,"method":"hello","params":{"client":"soak-never-reads"}}\n')
                hello = b""
                while not hello.endswith(b"\n"):
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    hello += chunk
                client_id = json.loads(hello)["result"]["client_id"]
                # From here on it never reads: the attach result and every delta pile up.
                text = "[[words:150000]] [[chunk:48]] [[delay:0]] %s" % self.tag()
                with self.sources_lock:
                    self.prompts.add(text)
                s.sendall(('{"jsonrpc":"2.0","id":2,"method":"conversation.attach","params":{"conversation":"%s"}}\n'
                           '{"jsonrpc":"2.0","id":3,"method":"message.send","params":{"conversation":"%s","content":'
                           '"%s"}}\n' % (cid, cid, text)).encode())
                reason = None
                deadline = time.monotonic() + 90
                while time.monotonic() < deadline:
                    reason = self.daemon.log.reason(client_id)
                    if reason:
                        break
                    time.sleep(0.5)
                if reason and reason.startswith("slow reader"):
                    self.stats.bump("slow readers cut")
                else:
                    self.stats.violation("the client that never reads (%s) was not cut within 90 s (reason: %r)" % (client_id, reason))
                s.close()
                s = None
                self.slots.release()
                ctl.call("generation.cancel", {"conversation": cid}, expect={"result"})
                ctl.call("conversation.delete", {"conversation": cid}, expect={"result"})
            except Disconnected:
                pass
            except Exception as error:
                if self.daemon.proc.poll() is not None:
                    return
                self.stats.violation("slow reader: %r" % error)
            finally:
                if s is not None:
                    s.close()
                    self.slots.release()
                ctl.close()

    # -- watchers: attached to every pool conversation for the whole run

    def watch(self):
        while not self.stop.is_set():
            for i, w in enumerate(self.watchers):
                if w.eof:
                    self.stats.bump("watchers replaced after losing their connection")
                    try:
                        w = self.watchers[i] = Client(self, "watcher")
                    except (OSError, Disconnected):
                        continue
                for cid in self.pool.ids():
                    if cid not in w.attached:
                        try:
                            self.attach(w, cid, 0)
                        except Disconnected:
                            break
            self.stop.wait(0.5)

    # -- samples

    def status(self):
        try:
            c = Client(self, "sampler", hello=False)
        except (OSError, RuntimeError):
            return None
        try:
            result, _ = c.call("status", expect={"result"}, timeout=30)
            return result
        except Disconnected:
            return None
        finally:
            c.close()

    def sample(self, label, start):
        rss, fds = self.daemon.rss_kib(), self.daemon.fds()   # before the sampler connects
        status = self.status() or {}
        t = time.monotonic() - start
        self.samples.append((t, rss, fds, status, label))
        if rss:
            self.rss_peak = max(self.rss_peak, rss)
        with self.stats.lock:
            ops = sum(self.stats.ops.values())
        log("[%3d:%02d] %-7s rss %9s  fds %3d (unix %d, tcp %d, logs %d, other %d)  status: clients %s streams %s queued %s conversations %s  scenarios %d" %
            (t // 60, t % 60, label, mib(rss), fds.get("total", 0), fds.get("unix", 0), fds.get("tcp", 0), fds.get("log", 0),
             fds.get("other", 0) + fds.get("other socket", 0), status.get("clients", "?"), status.get("streams", "?"),
             status.get("queued", "?"), status.get("conversations", "?"), ops))
        return rss, fds, status

    def sampler(self, start):
        next_minute = start + 60
        while not self.stop.wait(5):
            rss = self.daemon.rss_kib()
            if rss:
                self.rss_peak = max(self.rss_peak, rss)
            self.daemon.log.poll()
            if time.monotonic() >= next_minute:
                next_minute += 60
                self.sample("load", start)

    # -- the run

    def run(self):
        args = self.args
        tmp = tempfile.mkdtemp(prefix="confab-soak-")
        upstream = None
        env = dict(os.environ)
        asan = is_asan(args.confabd)
        if asan:
            env.setdefault("ASAN_OPTIONS", "detect_leaks=1:halt_on_error=0")
        if args.daemon_fault:
            env["CONFAB_DEBUG_FAULT"] = args.daemon_fault
            symbolizer = shutil.which("llvm-symbolizer")
            if symbolizer:
                env.setdefault("ASAN_SYMBOLIZER_PATH", symbolizer)
        failures = []
        try:
            upstream = subprocess.Popen([args.upstream, "--port", "0", "--exit-with-parent",
                                         "--max-lifetime", str(int(args.minutes * 60 + 900))],
                                        stdout=subprocess.PIPE, stderr=open(os.path.join(tmp, "upstream.log"), "ab"), stdin=subprocess.DEVNULL)
            line = upstream.stdout.readline().decode().split()
            if len(line) != 3 or line[0] != "listening":
                raise RuntimeError("confab-fake-upstream did not start: %r" % line)
            port = int(line[2])
            config = os.path.join(tmp, "config.toml")
            with open(config, "w") as f:
                f.write('[upstream]\nbase_url = "http://127.0.0.1:%d/v1"\nmodel = "soak"\ntimeout_seconds = 3\n'
                        'connect_timeout_seconds = 3\nmax_retries = 1\n'
                        '[limits]\nmax_client_buffer_bytes = %d\nmax_line_bytes = %d\nmax_streams = %d\n' %
                        (port, CLIENT_BUFFER_BYTES, MAX_LINE_BYTES, MAX_STREAMS))
                # Two loopback tools (the fake upstream's /tool/ endpoints) and a profile offering them.
                tool = ('[tools.%s]\ndescription = "%s"\n%s'
                        'parameters = { type = "object", properties = { city = { type = "string" } }, required = ["city"] }\n'
                        '[tools.%s.request]\nurl = "http://127.0.0.1:%d/tool/echo/{city}"\ntimeout_seconds = 5\n')
                f.write(tool % ("echo", "Says back what it was asked", "", "echo", port))
                f.write(tool % ("guarded", "Needs a yes", 'approval = "always"\n', "guarded", port))
                f.write('[profiles.tools]\ntools = ["echo", "guarded"]\n')
            log("confab soak: seed %d, %.1f minutes, confabd %s%s, upstream %s, %d workers, at most %d clients, temp %s" %
                (self.seed, args.minutes, os.path.relpath(args.confabd, REPO) if args.confabd.startswith(REPO) else args.confabd,
                 " (AddressSanitizer)" if asan else "", os.path.relpath(args.upstream, REPO) if args.upstream.startswith(REPO) else args.upstream,
                 args.workers, args.max_clients, tmp))
            self.daemon = Daemon(args.confabd, tmp, config, os.path.join(tmp, "confabd.log"), env)
            self.load_log = self.daemon.log
            time.sleep(1.0)
            start = time.monotonic()
            first = self.sample("start", start)

            setup = Client(self, "setup")
            for i in range(args.conversations):
                result, _ = setup.call("conversation.create", {"title": "pool %d" % i}, expect={"result"})
                self.pool.add(result["conversation"]["id"])
                self.stats.bump("conversations created")
            # Conversations offering the tools, kept out of the pool (no scenario deletes them).
            for i in range(2):
                result, _ = setup.call("conversation.create", {"title": "tools %d" % i, "profile": "tools"}, expect={"result"})
                self.tool_conversations.append(result["conversation"]["id"])
            setup.close()
            self.watchers = [Client(self, "watcher") for _ in range(3)]
            threads = [threading.Thread(target=self.watch, name="watch", daemon=True),
                       threading.Thread(target=self.sampler, args=(start,), name="sampler", daemon=True),
                       threading.Thread(target=self.slow_reader, name="slow", daemon=True)]
            workers = [threading.Thread(target=self.worker, args=(n,), name="worker-%d" % n, daemon=True) for n in range(args.workers)]
            for t in threads + workers:
                t.start()

            deadline = start + args.minutes * 60
            while time.monotonic() < deadline:
                if self.daemon.proc.poll() is not None:
                    failures.append("confabd died during the soak with status %d" % self.daemon.proc.returncode)
                    break
                time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))
            load_seconds = time.monotonic() - start
            log("time is up: letting the scenarios in progress finish")
            self.stop.set()
            for t in workers + threads:
                t.join(240)
                if t.is_alive():
                    failures.append("thread %s did not finish within 240 s" % t.name)
            if self.daemon.proc.poll() is None:
                self.settle(failures)
            if self.daemon.proc.poll() is not None and not any("died" in f for f in failures):
                failures.append("confabd died with status %d" % self.daemon.proc.returncode)

            alive = self.daemon.proc.poll() is None
            if alive:
                time.sleep(3)
                end = self.sample("end", start)
                before, before_histories = self.snapshot()
                self.compare_with_sources(before_histories, failures, before)
                self.check_files_and_shares(before, before_histories, failures, os.path.join(tmp, "data"), collected=False)
            log("stopping confabd with SIGTERM")
            code = self.daemon.stop()
            self.daemon.log.poll()
            if code != 0:
                failures.append("confabd exited with status %r after SIGTERM (expected 0)" % code)
            findings = {"confabd.log": sanitizer_findings(self.daemon.log_path)}

            restart = None
            if alive:
                restart = self.restart(args, tmp, config, env, before, before_histories, failures)
                findings["confabd-restart.log"] = sanitizer_findings(os.path.join(tmp, "confabd-restart.log"))
            if args.save_logs:
                os.makedirs(args.save_logs, exist_ok=True)
                for name in ("confabd.log", "confabd-restart.log", "upstream.log"):
                    if os.path.exists(os.path.join(tmp, name)):
                        shutil.copy(os.path.join(tmp, name), os.path.join(args.save_logs, name))
            ok = self.summary(load_seconds, first, end if alive else None, failures, findings, asan, restart)
            if args.daemon_fault:
                # The self-test against the daemon: the oracle named for its fault must have reported it.
                what = DAEMON_FAULTS[args.daemon_fault]
                caught = sum(what in line for line in self.stats.reports)
                log("self-test: daemon fault %s: %s (\"%s\": %d reports; %d violations in all)"
                    % (args.daemon_fault, "caught" if caught else "MISSED", what, caught, len(self.stats.violations)))
                return 0 if caught else 1
            return 0 if ok else 1
        finally:
            self.stop.set()
            for client in list(self.clients):
                try:
                    client.close()
                except Exception:
                    pass
            if self.daemon and self.daemon.proc.poll() is None:
                self.daemon.proc.kill()
                self.daemon.proc.wait()
            if upstream is not None and upstream.poll() is None:
                upstream.send_signal(signal.SIGTERM)
                try:
                    upstream.wait(10)
                except subprocess.TimeoutExpired:
                    upstream.kill()
                    upstream.wait()
            if args.keep:
                log("kept %s" % tmp)
            else:
                shutil.rmtree(tmp, ignore_errors=True)

    def settle(self, failures):
        """Waits for every reply to end (cancelling what still runs after 60 s), then checks the watchers."""
        c = Client(self, "settle")
        try:
            deadline = time.monotonic() + 120
            cancelled_at = None
            while True:
                result, _ = c.call("status", expect={"result"})
                if result["streams"] == 0 and result["queued"] == 0:
                    break
                if time.monotonic() > deadline:
                    failures.append("replies still streaming 120 s after the load stopped: %r" % result)
                    break
                if cancelled_at is None and time.monotonic() > deadline - 60:
                    cancelled_at = time.monotonic()
                    listing, _ = c.call("conversation.list", {"limit": 10000}, expect={"result"})
                    for conv in listing["conversations"]:
                        c.call("generation.cancel", {"conversation": conv["id"]}, expect={"result", -32001})
                    self.stats.bump("replies cancelled to settle")
                time.sleep(0.5)
            c.close()
        except Disconnected:
            failures.append("lost the connection to confabd while settling")
            return
        # Every reply a watcher saw start must have its final by now.
        for w in self.watchers:
            w.wait_for(lambda: not w.tracked, 20)
            with w.cond:
                for key in w.tracked:
                    self.stats.violation("%s: reply %s/%s never got a final notification (attached throughout)" % (w.who, key[0], key[1]))
                if w.outstanding:
                    self.stats.violation("%s: %d requests never answered" % (w.who, len(w.outstanding)))
                if w.eof:
                    self.stats.bump("watchers that lost their connection")
        for w in self.watchers:
            w.close()
        for client in list(self.clients):
            client.close()

    def snapshot(self):
        """Every conversation's listing and whole history: (listing by id, history by id)."""
        c = Client(self, "snapshot")
        try:
            listing, _ = c.call("conversation.list", {"limit": 10000}, expect={"result"})
            convs = {conv["id"]: conv for conv in listing["conversations"]}
            return convs, {cid: self.history(c, cid) for cid in convs}
        finally:
            c.close()

    @staticmethod
    def history(c, cid):
        messages, before = [], None
        for _ in range(10000):
            params = {"conversation": cid, "limit": 1000}
            if before:
                params["before"] = before
            page, _ = c.call("conversation.history", params, expect={"result"})
            messages = page["messages"] + messages
            if not page["more"] or not page["messages"]:
                return messages
            before = page["messages"][0]["id"]
        raise RuntimeError("history of %s did not end" % cid)

    @staticmethod
    def message_order(message):
        sequence, _, step = message["id"][1:].partition(".")
        return int(sequence), int(step or 0)

    @staticmethod
    def user_turn(messages, index):
        """The user turn the upstream is sent for a reply to messages[index], a user message:
        that message's text, joined by a blank line after those of the user messages straight
        before it, as confabd sends user messages with no reply between them as one turn. A fork
        copies sends whose replies were still queued or in flight without those replies, and
        answers the last of them: its reply answers them all. (Messages superseded before it are
        not in the context; none before it can have been superseded after it was sent.)"""
        run = [messages[index]]
        for earlier in reversed(messages[:index]):
            if earlier.get("superseded_by"):
                continue
            if earlier["role"] != "user":
                break
            if earlier["content"]:
                run.insert(0, earlier)
        return run

    def compare_with_sources(self, histories, failures, convs=None, when=""):
        """Every stored send holds the prompt it was sent with, and its reply the text the fake
        upstream was asked to send for the user turn it answered: all of it when complete, a
        prefix of it otherwise. Run before the stop on what the daemon holds and again after the
        restart on what it read back from its logs (`when`, which names the second run's counts)."""
        with self.sources_lock:
            sources = set(self.sources)
            prompts = set(self.prompts)
            accepted = list(self.accepted)
        compared = 0
        wrong = []
        # Every send and edit answered with a result is stored, with the text sent, in every
        # conversation still there; every stored user message is a text the soak sent.
        for cid, mid, text in accepted:
            if cid not in histories:
                continue          # deleted since
            stored = next((m for m in histories[cid] if m["id"] == mid), None)
            self.stats.bump("accepted sends found stored" + when)
            if stored is None or stored["content"] != text:
                wrong.append("%s/%s: accepted (a result came) but %s" % (cid, mid, "not stored" if stored is None else
                                                                         "stored with another text: %r" % stored["content"][:80]))
        for cid, messages in histories.items():
            messages = sorted(messages, key=self.message_order)
            by_id = {m["id"]: m for m in messages}
            for m in messages:
                if m["role"] == "user":
                    self.stats.bump("stored user messages compared with what the soak sent" + when)
                    if m["content"] not in prompts:
                        wrong.append("%s/%s: a stored user message the soak never sent: %r" % (cid, m["id"], m["content"][:80]))
            for index, m in enumerate(messages):
                if m["role"] != "user" or m["content"] not in sources:
                    continue
                reply = by_id.get("m%d" % (self.message_order(m)[0] + 1))
                if reply is None or reply["role"] != "assistant":
                    # A fork copies a user message without a reply that was in flight then.
                    if not (convs or {}).get(cid, {}).get("forked_from"):
                        wrong.append("%s/%s: a stored send with no reply after it" % (cid, m["id"]))
                    continue
                run = self.user_turn(messages, index)
                if any(earlier["content"] not in sources for earlier in run):
                    continue          # joined with a tool call's prompt: its text depends on the tool's answer
                turn = "\n\n".join(earlier["content"] for earlier in run)
                if len(run) > 1 and not when:
                    self.stats.bump("stored replies that answered several copied sends as one turn")
                # A reply cut by the token limit may be continued: then it starts with the text.
                source, continued = self.upstream_script(turn)
                # The reply, then every reply that regenerated it (same prompt, same text).
                for _ in range(100):
                    compared += 1
                    text = reply["content"]
                    if continued and text.startswith(source):
                        pass                  # continued past the token limit: the rest is the continuation's
                    elif reply["status"] == "complete" and text != source:
                        wrong.append("%s/%s: complete, but not the text the upstream sent for %s (%d chars, expected %d)"
                                     % (cid, reply["id"], "+".join(earlier["id"] for earlier in run), len(text), len(source)))
                    elif reply["status"] != "complete" and not source.startswith(text):
                        wrong.append("%s/%s: %s (%s), and its text is not a prefix of what the upstream sent for %r: "
                                     "%d chars ending %r, expected a prefix of %d chars"
                                     % (cid, reply["id"], reply["status"], (reply.get("error") or {}).get("code"),
                                        turn[:80], len(text), text[-60:], len(source)))
                    newer = by_id.get(reply.get("superseded_by"))
                    if newer is None or newer["role"] != "assistant":
                        break
                    reply = newer
        self.stats.report(wrong)
        if wrong:
            failures.append("%d stored messages differ from what the soak sent or the upstream was asked to send%s" % (len(wrong), when))
        self.stats.bump("stored replies compared with the upstream's text" + when, compared)
        return compared

    def restart(self, args, tmp, config, env, before, before_histories, failures):
        """Starts confabd again on the same data: clean load, same conversations, no reply left streaming."""
        log("restarting confabd on the same data")
        try:
            self.daemon = Daemon(args.confabd, tmp, config, os.path.join(tmp, "confabd-restart.log"), env)
        except RuntimeError as error:
            failures.append("restart: %s" % error)
            return None
        self.daemon.log.poll()
        statuses = collections.Counter()
        c = Client(self, "verify")
        after_histories = {}
        try:
            listing, _ = c.call("conversation.list", {"limit": 10000}, expect={"result"})
            after = {conv["id"]: conv for conv in listing["conversations"]}
            if set(after) != set(before):
                failures.append("restart: conversations differ: %d before, %d after, %d missing, %d new" %
                                (len(before), len(after), len(set(before) - set(after)), len(set(after) - set(before))))
            for cid, conv in after.items():
                old = before.get(cid)
                if old and (old["message_count"], old["title"]) != (conv["message_count"], conv["title"]):
                    failures.append("restart: %s was %r/%d messages, now %r/%d" % (cid, old["title"], old["message_count"], conv["title"], conv["message_count"]))
                messages = self.history(c, cid)
                after_histories[cid] = messages
                for message in messages:
                    if message["role"] == "assistant":
                        statuses[message["status"]] += 1
                if messages and messages[-1]["status"] == "streaming":
                    failures.append("restart: %s has a reply still streaming" % cid)
                # The whole history, message by message, is what it was before the stop.
                old_messages = before_histories.get(cid)
                if old_messages is not None and old_messages != messages:
                    changed = [m["id"] for m, n in zip(old_messages, messages) if m != n]
                    failures.append("restart: %s's history changed: %d messages before, %d after, first differing %s"
                                    % (cid, len(old_messages), len(messages), changed[:3] or "(a message added or lost)"))
                self.stats.bump("messages compared before and after the restart", len(messages))
            self.check_files_and_shares(after, after_histories, failures, os.path.join(tmp, "data"), collected=True)
            self.compare_with_sources(after_histories, failures, after, when=" after the restart")
        except Disconnected:
            failures.append("restart: lost the connection while verifying")
        finally:
            c.close()
        if statuses.get("interrupted") or statuses.get("streaming"):
            failures.append("restart: replies left interrupted/streaming after a clean stop: %r" % dict(statuses))
        self.daemon.log.poll()
        code = self.daemon.stop()
        if code != 0:
            failures.append("restarted confabd exited with status %r after SIGTERM" % code)
        problems = self.daemon.log.problems
        torn = [p for p in problems if "torn last line" in p]
        if problems:
            failures.append("restart logged %d log problems (%d torn tails): %s" % (len(problems), len(torn), problems[:3]))
        return {"conversations": len(before), "statuses": statuses, "problems": problems}

    # -- verdict

    def summary(self, seconds, first, end, failures, findings, asan, restart):
        st = self.stats
        first_rss, first_fds, _ = first
        log("")
        log("=" * 78)
        log("soak summary (seed %d)" % self.seed)
        log("duration: %.1f minutes of load (%d s)" % (seconds / 60, seconds))
        log("scenarios: " + ", ".join("%s %d" % kv for kv in sorted(st.ops.items(), key=lambda kv: -kv[1])) +
            " (total %d)" % sum(st.ops.values()))
        log("requests: " + ", ".join("%s %d" % kv for kv in sorted(st.rpc.items(), key=lambda kv: -kv[1])) +
            " (total %d)" % sum(st.rpc.values()))
        log("notifications received: " + ", ".join("%s %d" % kv for kv in sorted(st.notifications.items(), key=lambda kv: -kv[1])))
        log("events: " + ", ".join("%s %d" % kv for kv in sorted(st.events.items())))
        first_log = self.load_log
        first_log.poll()
        counts = first_log.counts
        log("replies ended (daemon log): complete %d, failed %d, cancelled %d, interrupted %d; retries %d; failures by code: %s" %
            (counts["reply complete"], counts["reply failed"], counts["reply cancelled"], counts["reply interrupted"], counts["retries"],
             ", ".join("%s %d" % (k[len("reply failed "):], v) for k, v in sorted(counts.items()) if k.startswith("reply failed "))))
        seen = collections.Counter(status for status, _, _ in st.outcomes.values())
        log("replies seen to their end by attached clients: %d (%s)" % (len(st.outcomes), ", ".join("%s %d" % kv for kv in sorted(seen.items()))))
        log("slow readers cut: %d (daemon log: %d)" % (st.events["slow readers cut"], counts["slow reader cut"]))

        # Expected outcomes of the sends whose end an attached client saw.
        mismatched = collections.Counter()
        for key, (kind, allowed) in st.expected.items():
            outcome = st.outcomes.get(key)
            if outcome is None:
                continue
            status, code, _ = outcome
            if (status, code) in allowed or status == "cancelled":
                continue
            mismatched["%s -> %s/%s" % (kind, status, code)] += 1
        for key in st.cancelled:
            outcome = st.outcomes.get(key)
            if outcome is not None and outcome[0] != "cancelled":
                mismatched["cancelled by generation.cancel -> %s" % outcome[0]] += 1
        if mismatched:
            failures.append("replies that ended otherwise than their directive says: %r" % dict(mismatched))

        # Connections the daemon ended: only slow readers and over-long lines may be cut.
        unexpected = collections.Counter()
        died = any("died" in f for f in failures)
        for client in ([] if died else self.lost_clients):
            reason = (client.client_id and first_log.reason(client.client_id)) or "no reason logged"
            if client.cut_expected and reason.startswith("line over"):
                continue
            if reason.startswith("slow reader"):
                st.bump("readers of ours cut as slow (the harness fell behind)")
                continue
            if client.stopping_seen or reason.startswith("shutdown"):
                continue
            unexpected["%s: %s" % (client.role, reason)] += 1
            if client.torn:
                st.violation("%s: torn frame before the daemon hung up (%s)" % (client.who, reason))
        if unexpected:
            failures.append("connections ended by the daemon for no good reason: %r" % dict(unexpected))

        log("RSS: start %s, peak %s, end %s" % (mib(first_rss), mib(self.rss_peak), mib(end[0] if end else None)))
        if end:
            end_fds = end[1]
            log("fds: start %d, end %d (start %s; end %s)" % (first_fds["total"], end_fds["total"], self.kinds(first_fds), self.kinds(end_fds)))
        if restart:
            log("restart: %d conversations loaded, stored replies %s, log problems %d" %
                (restart["conversations"], dict(restart["statuses"]), len(restart["problems"])))
        log("files and shares: %d sends with files, %d files uploaded (%d left unfinished, %d never sent); %d file references "
            "checked in stored messages, %d blobs hashed, %d blobs on disk after the restart (each named by a stored message); "
            "%d shares and unshares answered, %d share states checked"
            % (st.events["sends with files"], st.events["files uploaded"], st.events["uploads left unfinished"],
               st.events["uploads never sent"], st.events["file references checked"], st.events["blobs hashed"],
               st.events["blobs on disk after the restart"], st.events["shares and unshares answered"], st.events["share states checked"]))
        log("stored replies compared with the text the upstream was asked to send: %d; messages compared "
            "before and after the restart: %d" % (st.events["stored replies compared with the upstream's text"],
                                                  st.events["messages compared before and after the restart"]))
        log("after the restart, read back from the logs: %d stored replies compared with the upstream's text, %d stored user "
            "messages with what the soak sent, %d accepted sends found stored"
            % (st.events["stored replies compared with the upstream's text after the restart"],
               st.events["stored user messages compared with what the soak sent after the restart"],
               st.events["accepted sends found stored after the restart"]))

        # Descriptors: every kind back where it started, except one log per live conversation,
        # idle upstream connections in libcurl's cache, and libcurl's own wake-up socket pair:
        # libcurl is loaded by the first request upstream, after the start was counted.
        if end:
            conversations = end[2].get("conversations")
            if end_fds.get("unix", 0) != first_fds.get("unix", 0) + LIBCURL_SOCKET_PAIR \
                    or end_fds.get("other", 0) != first_fds.get("other", 0) \
                    or end_fds.get("other socket", 0) != first_fds.get("other socket", 0):
                failures.append("fds: unix/other descriptors went from %s to %s" % (self.kinds(first_fds), self.kinds(end_fds)))
            # At most one per conversation: a fork or a tool conversation left alone leaves memory
            # (its log closed) when idle long enough.
            if conversations is not None and end_fds.get("log", 0) > conversations:
                failures.append("fds: %d log descriptors open for %d conversations" % (end_fds.get("log", 0), conversations))
            if end_fds.get("tcp", 0) > MAX_STREAMS:
                failures.append("fds: %d upstream connections still open after the load" % end_fds.get("tcp", 0))

        # Memory: after warm-up, the samples taken under load must not climb.
        loaded = [(t, rss) for t, rss, _, _, label in self.samples if label == "load" and rss]
        warm = [(t, rss) for t, rss in loaded if t >= min(180, seconds * 0.3)]
        if len(warm) >= 2:
            base = sum(r for _, r in warm[:2]) / min(2, len(warm))
            last = sum(r for _, r in warm[-2:]) / min(2, len(warm))
            allowed = max(10 * 1024, 0.2 * base)
            growth = last - base
            line = "RSS after warm-up: %s -> %s over %d samples (growth %+.1f MiB, allowed %.1f MiB)" % (
                mib(base), mib(last), len(warm), growth / 1024, allowed / 1024)
            log(line)
            if growth > allowed or (end and end[0] > max(r for _, r in warm) + allowed):
                if asan:
                    log("  (not judged: AddressSanitizer's quarantine and shadow memory make RSS grow by design)")
                else:
                    failures.append("memory: " + line)
        else:
            log("RSS: too few samples after warm-up to judge growth (run longer than 4 minutes)")

        for name, (errors, leaks) in findings.items():
            if not asan and not errors and not leaks:
                continue
            log("AddressSanitizer (%s): %d error reports" % (name, len(errors)))
            for report in errors:
                lines = report.splitlines()
                log("\n".join("  " + l for l in lines[:60]) + ("\n  ... (%d more lines)" % (len(lines) - 60) if len(lines) > 60 else ""))
            if errors:
                failures.append("%s: %d AddressSanitizer error reports" % (name, len(errors)))
            total = sum(l["bytes"] for l in leaks)
            log("LeakSanitizer (%s): %d bytes leaked in %d allocations" % (name, total, sum(l["objects"] for l in leaks)))
            for line in describe_leaks(leaks):
                log(line)
            ours = [l for l in leaks if l["origin"] in ("confab", "other")]
            if ours:
                failures.append("%s: %d bytes leaked from confab's code or its C libraries" % (name, sum(l["bytes"] for l in ours)))

        if asan and len(findings) == 2:
            (_, loaded), (_, idle) = findings.values()
            total = lambda leaks: (sum(l["bytes"] for l in leaks), sum(l["objects"] for l in leaks))
            log("leaks after the soak vs after the idle restart (same config, no clients): %d bytes/%d allocations vs %d/%d: %s" %
                (total(loaded) + total(idle) + ("the same: nothing leaked grows with load" if total(loaded) == total(idle) else "they differ",)))
        if first_log.errors:
            log("daemon error lines: %d, e.g. %s" % (len(first_log.errors), first_log.errors[:3]))
        if st.violations:
            failures.append("%d protocol violations" % len(st.violations))
            for v in st.violations[:20]:
                log("  " + v)
        log("")
        if failures:
            log("VERDICT: FAIL")
            for f in failures:
                log("  - " + f)
        else:
            log("VERDICT: PASS")
        return not failures

    @staticmethod
    def kinds(fds):
        return ", ".join("%s %d" % (k, v) for k, v in sorted(fds.items()) if k != "total")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="how long the load runs (default 10)")
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: from the clock; printed)")
    parser.add_argument("--bin", default=os.path.join(REPO, ".build", "release"), help="directory holding confabd (default .build/release)")
    parser.add_argument("--upstream-bin", default=None, help="confab-fake-upstream to use (default: the one in --bin)")
    parser.add_argument("--workers", type=int, default=10, help="threads running scenarios (default 10)")
    parser.add_argument("--max-clients", type=int, default=50, help="connections open at once, at most (default 50)")
    parser.add_argument("--conversations", type=int, default=12, help="conversations in the pool (default 12)")
    parser.add_argument("--slow-every", type=float, default=120, help="seconds between clients that never read (default 120)")
    parser.add_argument("--save-logs", default=None, help="copy confabd's and the upstream's logs to this directory")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    parser.add_argument("--daemon-fault", choices=sorted(DAEMON_FAULTS), default=None,
                        help="self-test: run a debug confabd with CONFAB_DEBUG_FAULT set to this mode and pass only if the "
                             "soak's oracle for it reports the fault")
    args = parser.parse_args()
    if args.seed is None:
        args.seed = int(time.time() * 1000) % 1_000_000
    args.bin = os.path.realpath(args.bin)
    args.confabd = os.path.join(args.bin, "confabd")
    args.upstream = os.path.realpath(args.upstream_bin) if args.upstream_bin else os.path.join(args.bin, "confab-fake-upstream")
    for path in (args.confabd, args.upstream):
        if not os.access(path, os.X_OK):
            sys.exit("soak: %s is missing; build first (make release)" % path)
    sys.exit(Soak(args).run())


if __name__ == "__main__":
    main()

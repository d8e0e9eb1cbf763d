#!/usr/bin/env python3
"""Writes a golden data directory: the logs and index an earlier confabd leaves behind.

    scripts/make-golden.py --confabd OLD/.build/debug/confabd \
        --fake .build/debug/confab-fake-upstream --level 3 --out Tests/Fixtures/golden/NAME

Starts the given confabd on a temporary socket and data directory, wired to the fake upstream
on loopback, and drives it through every kind of record its version writes (see LEVELS), ending
with a SIGKILL while a reply streams (and, from level 3, while a tool call runs), so the data
directory also holds what a crash leaves. The data directory is then copied to --out.
Methods the daemon does not know (-32601) are an error: pick the level that matches the version.

Levels (what the version has):
  1  messages, replies (complete, failed, cancelled, interrupted), titles
  2  + regenerate and edit (superseded), continue, fork, a second provider
  3  + profiles (welcome messages), conversation.configure (settings), tool calls and results
  4  + a share link's messages (hello's `link`): authors and a tool call's requested_by that are a link's
  5  + reasoning: a reply's thought (reply.reasoning, the message's reasoning and usage counts),
       a thinking tool loop of each API (the replay kept beside the message: Anthropic's signed
       and redacted blocks), a budget spent thinking, and the crash while a reply thinks
  6  + files and shares: blobs (a text file, an image, one uploaded in two chunks), messages that
       carry them, an edit that keeps them, a fork that shares them, a deleted conversation whose
       blob is collected, and a conversation shared with two uids and unshared from one
  7  + compaction: a summary (conversation.compact, with a focus) and a reply sent it, a fork
       after it that carries it, one undone (conversation.uncompact), one ended by an edit inside
       its range, and one made before a reply that would pass a profile's compact_at
"""
import argparse
import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

DEADLINE = 60  # seconds for any one wait: a failure guard, not a timing


class Client:
    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.buffer = b""
        self.next_id = 1
        self.notes = []

    def frame(self):
        end = time.monotonic() + DEADLINE
        while b"\n" not in self.buffer:
            self.sock.settimeout(max(0.1, end - time.monotonic()))
            chunk = self.sock.recv(65536)
            if not chunk:
                raise RuntimeError("connection closed")
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def call(self, method, **params):
        request_id = self.next_id
        self.next_id += 1
        self.sock.sendall((json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}) + "\n").encode())
        while True:
            frame = self.frame()
            if "method" in frame and "id" not in frame:
                self.notes.append(frame)
                continue
            if frame.get("id") != request_id:
                raise RuntimeError(f"unexpected frame {frame}")
            if "error" in frame:
                raise RuntimeError(f"{method} {params}: {frame['error']}")
            return frame["result"]

    def until(self, match):
        while True:
            while self.notes:
                note = self.notes.pop(0)
                if match(note["method"], note.get("params", {})):
                    return note
            self.notes.append(self.frame())

    def reply_ends(self, reply):
        """Waits for the end of reply `reply`: the last message of its chain that ends without tool calls."""
        def ended(method, params):
            message = params.get("message") or {}
            if method not in ("message.completed", "message.failed"):
                return False
            mid = message.get("id", "")
            if mid != reply and not mid.startswith(reply + "."):
                return False
            return method == "message.failed" or not message.get("tool_calls")
        return self.until(ended)


def http(port, method, path):
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return json.loads(data.split(b"\r\n\r\n", 1)[1])


def wait_for(condition, what):
    end = time.monotonic() + DEADLINE
    while not condition():
        if time.monotonic() > end:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.01)


def log_has(data, conversation, needle):
    path = os.path.join(data, "conversations", conversation + ".jsonl")
    try:
        with open(path, encoding="utf-8") as f:
            return needle in f.read()
    except FileNotFoundError:
        return False


def config(port, level):
    text = f"""[upstream]
base_url = "http://127.0.0.1:{port}/v1"
model = "fake-model"
timeout_seconds = 30
max_retries = 0
"""
    if level >= 2:
        text += f"""
[providers.claude]
api = "anthropic"
base_url = "http://127.0.0.1:{port}/anthropic/v1"
api_key = "anthropic-golden-key"
model = "fake-claude"
"""
    if level >= 3:
        text += f"""
[tools.echo]
description = "Says back what it was asked"
parameters = {{ type = "object", properties = {{ city = {{ type = "string" }} }}, required = ["city"] }}
[tools.echo.request]
method = "GET"
url = "http://127.0.0.1:{port}/tool/echo/{{city}}"

[tools.hang]
description = "Never answers"
[tools.hang.request]
url = "http://127.0.0.1:{port}/tool/hang"

[profiles.helper]
system = "Use the tools."
temperature = 0.5
tools = ["echo", "hang"]

[profiles.guide]
welcome = ["Hello, I am your guide.", "Shall we start?"]
quick_replies = ["yes", "no"]
"""
    if level >= 5:
        text += """
[profiles.claude-tools]
provider = "claude"
tools = ["echo"]

[profiles.reason]
max_tokens = 64
"""
    if level >= 7:
        text += """
[profiles.auto]
system = "Be brief."
max_tokens = 100
context_tokens = 400
compact_at = 0.5
compact_prompt = "Summarise it. [[reply:AUTO SUMMARY]]"
"""
    return text


def drive(client, data, port, level, sock):
    def send(conversation, text):
        sent = client.call("message.send", conversation=conversation, content=text)
        return client.reply_ends(sent["reply"])

    def create(title, **extra):
        conversation = client.call("conversation.create", title=title, **extra)["conversation"]["id"]
        client.call("conversation.attach", conversation=conversation)
        return conversation

    basics = create("basics", system="Be terse.")
    send(basics, "hi [[reply:Hello there.]]")
    send(basics, 'quoting [[reply:naïve café ✓ "quoted" \\ back-slash\ttab\nsecond line]]')
    send(basics, "[[status:401]] refused")
    client.call("conversation.rename", conversation=basics, title="basics, renamed")

    cancelled = create("cancelled")
    sent = client.call("message.send", conversation=cancelled, content="[[words:40]] [[hold:5 golden-cancel]]")
    wait_for(lambda: "golden-cancel" in http(port, "GET", "/holds")["holding"], "the held reply")
    client.call("generation.cancel", conversation=cancelled)
    client.reply_ends(sent["reply"])
    http(port, "POST", "/release/golden-cancel")

    if level >= 2:
        revisions = create("revisions")
        send(revisions, "first question [[reply:first answer]]")
        regenerated = client.call("message.regenerate", conversation=revisions)
        client.reply_ends(regenerated["reply"])
        edited = client.call("message.edit", conversation=revisions, message="m1", content="edited question [[reply:edited answer]]")
        client.reply_ends(edited["reply"])
        send(revisions, "long one [[reply:cut off here]] [[finish:length]]")
        continued = client.call("message.continue", conversation=revisions)
        client.reply_ends(continued["reply"])
        fork = client.call("conversation.fork", conversation=revisions, at="m4", title="a fork")["conversation"]["id"]
        client.call("conversation.attach", conversation=fork)
        send(fork, "on the fork [[reply:forked answer]]")

        claude = create("claude", provider="claude")
        send(claude, "hello claude [[reply:Hello from the other API.]]")

    if level >= 3:
        guide = create("guided", profile="guide")
        send(guide, "yes")
        client.call("conversation.configure", conversation=guide, system="Be kind.", params={"temperature": 0.25, "max_tokens": 64})
        send(guide, "after configure [[reply:configured]]")

        tools = create("tools", profile="helper")
        send(tools, 'weather? [[tool:echo {"city":"Paris"}]] [[tool-text:Let me check.]]')

    if level >= 4:
        # A share link's page, as confab-web opens it: what it sends is the link's, and its
        # tool call waits for the owner's yes.
        linked = create("linked", profile="helper")
        link = Client(sock)
        link.call("hello", client="confab-web", name="web:share-golden1", gateway=True,
                  link={"id": "golden1", "conversation": linked, "role": "write"})
        sent = link.call("message.send", conversation=linked, content='from a link [[tool:echo {"city":"Oslo"}]]')
        asked = client.until(lambda method, params: method == "tool.approval_requested" and params.get("conversation") == linked)
        client.call("tool.approve", conversation=linked, call=asked["params"]["call"], allow=True)
        client.reply_ends(sent["reply"])
        link.sock.close()

    if level >= 5:
        thinking = create("thinking", profile="helper")
        send(thinking, "[[think:Six times seven.]] [[reply:42]] [[cached:1]]")
        send(thinking, '[[think:Look it up.]] [[tool-id:call_g]] [[tool:echo {"city":"Oslo"}]]')
        claude_tools = create("claude thinking", profile="claude-tools")
        send(claude_tools, '[[think:Look it up.]] [[think-redacted]] [[tool:echo {"city":"Lyon"}]] [[cached:2]] [[cache-write:1]]')
        budget = create("budget", profile="reason")
        send(budget, "[[think-only]] [[think-words:5]]")
        # Killed mid-thought: its thought saved as it streams, the text never reached.
        mid_thought = create("crash while thinking")
        client.call("message.send", conversation=mid_thought, content="[[think-words:400]] [[think-delay:100]] [[reply:never]]")
        wait_for(lambda: log_has(data, mid_thought, '"reply.reasoning"'), "a saved piece of the thought")

    if level >= 6:
        def put(data, chunks=1):
            cut = len(data) // chunks
            upload = None
            for i in range(chunks):
                piece = data[i * cut:] if i == chunks - 1 else data[i * cut:(i + 1) * cut]
                params = {"data": base64.b64encode(piece).decode(), "final": i == chunks - 1}
                if upload:
                    params["upload"] = upload
                answer = client.call("blob.put", **params)
                upload = answer.get("upload")
            return answer["attachment"]["sha256"]

        notes = put("notes: naïve café ✓\n```fenced```\n".encode() * 40, chunks=2)
        # A 1x1 PNG: what the daemon knows by its signature.
        pixel = put(base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="))
        files = create("files")
        sent = client.call("message.send", conversation=files, content="read these [[reply:read]]",
                           attachments=[{"name": "notes.txt", "sha256": notes}, {"name": "pixel.png", "sha256": pixel}])
        client.reply_ends(sent["reply"])
        edited = client.call("message.edit", conversation=files, message=sent["message"]["id"], content="")
        client.reply_ends(edited["reply"])
        fork = client.call("conversation.fork", conversation=files, title="files, forked")["conversation"]["id"]
        client.call("conversation.attach", conversation=fork)
        client.reply_ends(send_only(client, fork, "[[reply:forked]]"))
        # A blob only a deleted conversation named: collected, absent from the fixture.
        doomed = put(b"gone with its conversation\n")
        gone = create("deleted")
        sent = client.call("message.send", conversation=gone, content="[[reply:ok]]", attachments=[{"name": "gone.txt", "sha256": doomed}])
        client.reply_ends(sent["reply"])
        client.call("conversation.delete", conversation=gone)
        shared = create("shared")
        send(shared, "[[reply:shared answer]]")
        client.call("conversation.share", conversation=shared, uid=4242, role="read")
        client.call("conversation.share", conversation=shared, uid=4243, role="write")
        client.call("conversation.unshare", conversation=shared, uid=4242)

    if level >= 7:
        def compact(conversation, focus):
            return client.call("conversation.compact", conversation=conversation, focus=focus)

        compacted = create("compacted", system="Be brief.")
        send(compacted, "q1 [[reply:one]]")
        send(compacted, "q2 [[reply:two]]")
        compact(compacted, "[[reply:They said one and two.]] the numbers")
        send(compacted, "q3 [[reply:three]]")
        fork = client.call("conversation.fork", conversation=compacted, at="m6", title="compacted, forked")["conversation"]["id"]
        client.call("conversation.attach", conversation=fork)
        undone = create("uncompacted")
        send(undone, "q1 [[reply:one]]")
        compact(undone, "[[reply:S1]]")
        client.call("conversation.uncompact", conversation=undone)
        send(undone, "q2 [[reply:two]]")
        ended = create("compaction ended by an edit")
        send(ended, "q1 [[reply:one]]")
        send(ended, "q2 [[reply:two]]")
        compact(ended, "[[reply:S1]]")
        edited = client.call("message.edit", conversation=ended, message="m3", content="q2 changed [[reply:changed]]")
        client.reply_ends(edited["reply"])
        # About 54 estimated tokens a question, no usage: the fourth passes compact_at.
        automatic = create("automatic compaction", profile="auto")
        for label in ["q1", "q2", "q3", "q4"]:
            send(automatic, "[[no-usage]][[reply:ok]] " + label + " " + "x" * 170)

    # The crash: a reply streaming (some of its text saved), and from level 3 a tool call running.
    crash = create("crash")
    # Slow pieces: the daemon saves a streaming reply's text with the first piece a quarter
    # second after the last save, so text must keep coming for one to be saved.
    client.call("message.send", conversation=crash, content="[[words:400]] [[delay:100]]")
    wait_for(lambda: log_has(data, crash, '"reply.text"'), "a saved piece of the reply")
    if level >= 3:
        hanging = create("hanging tool", profile="helper")
        client.call("message.send", conversation=hanging, content="[[tool:hang]]")
        wait_for(lambda: any(r["path"].startswith("/tool/hang") for r in requests(data)), "the tool call")


def send_only(client, conversation, text):
    return client.call("message.send", conversation=conversation, content=text)["reply"]


def answers(sock):
    try:
        client = Client(sock)
        client.call("status")
        client.sock.close()
        return True
    except OSError:
        return False


def requests(data):
    path = os.path.join(os.path.dirname(data), "upstream.jsonl")
    try:
        with open(path, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--confabd", required=True)
    parser.add_argument("--fake", required=True)
    parser.add_argument("--level", type=int, choices=[1, 2, 3, 4, 5, 6, 7], required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix="confab-golden-")
    data = os.path.join(work, "data")
    sock = os.path.join(work, "confabd.sock")
    fake = subprocess.Popen([args.fake, "--port", "0", "--max-lifetime", "600", "--default-delay-ms", "1",
                             "--log", os.path.join(work, "upstream.jsonl")],
                            stdout=subprocess.PIPE, stderr=open(os.path.join(work, "upstream.log"), "w"))
    daemon = None
    try:
        port = int(fake.stdout.readline().split()[2])
        with open(os.path.join(work, "config.toml"), "w") as f:
            f.write(config(port, args.level))
        daemon = subprocess.Popen([args.confabd, "--socket", sock, "--data-dir", data, "--config", os.path.join(work, "config.toml")],
                                  stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "confabd.log"), "w"))
        wait_for(lambda: os.path.exists(sock), "the socket")
        client = Client(sock)
        client.call("hello", client="make-golden", name="golden")
        drive(client, data, port, args.level, sock)
        daemon.send_signal(signal.SIGKILL)
        daemon.wait()
        # Started once more and stopped cleanly: the version's own recovery of the crash is
        # stored, and its index is written.
        daemon = subprocess.Popen([args.confabd, "--socket", sock, "--data-dir", data, "--config", os.path.join(work, "config.toml")],
                                  stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "confabd.log"), "a"))
        wait_for(lambda: answers(sock), "the restarted daemon")
        daemon.send_signal(signal.SIGTERM)
        if daemon.wait(timeout=DEADLINE) != 0:
            raise RuntimeError("the restarted daemon did not stop cleanly")
        daemon = None
        if os.path.exists(args.out):
            shutil.rmtree(args.out)
        shutil.copytree(data, args.out, ignore=shutil.ignore_patterns("*.lock", "*.sock"))
        print(f"wrote {args.out}: {sorted(os.listdir(args.out))}")
    finally:
        if daemon:
            daemon.kill()
            daemon.wait()
        fake.terminate()
        fake.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

"""The browser tests' world: a fake model server, confabd and confab-web, all on loopback
and temporary paths, and a headless Chromium (Debian's) driven by Playwright."""
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import pytest
from playwright.sync_api import sync_playwright

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("CONFAB_BIN_DIR", os.path.join(ROOT, ".build", "debug"))
CHROMIUM = os.environ.get("CONFAB_CHROMIUM", "/usr/bin/chromium")


def wait_for(condition, what, timeout=60.0):
    """Waits for a condition, polling; the bound is only a guard against a hang."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("timed out waiting for " + what)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Terminal:
    """A client of confabd's socket, as a terminal's is: JSON-RPC lines."""

    def __init__(self, path, name="terminal"):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.buffer = b""
        self.next_id = 1
        self.events = []
        self.call("hello", {"client": "confab-attach", "name": name})

    def _read_frames(self, timeout):
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(65536)
        except socket.timeout:
            return []
        if not data:
            raise EOFError("confabd closed the connection")
        self.buffer += data
        frames = []
        while b"\n" in self.buffer:
            line, self.buffer = self.buffer.split(b"\n", 1)
            if line.strip():
                frames.append(json.loads(line))
        return frames

    def call(self, method, params=None):
        request_id = self.next_id
        self.next_id += 1
        self.sock.settimeout(60)   # a big request (a file's chunk) on a busy machine
        self.sock.sendall((json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params or {}}) + "\n").encode())
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            answer = None
            for frame in self._read_frames(1.0):
                if frame.get("id") == request_id:
                    answer = frame
                elif "method" in frame:
                    self.events.append(frame)
            if answer is not None:
                if "error" in answer:
                    raise RuntimeError(answer["error"])
                return answer["result"]
        raise AssertionError("no answer to " + method)

    def poll(self):
        for frame in self._read_frames(0.05):
            if "method" in frame:
                self.events.append(frame)

    def wait_event(self, predicate, what, timeout=60.0):
        def found():
            self.poll()
            for event in self.events:
                if predicate(event):
                    return event
            return None
        return wait_for(found, what, timeout)

    def reply_text(self, reply_id):
        """The reply's text as a terminal sees it: the deltas appended."""
        return "".join(e["params"]["content"] for e in self.events
                       if e["method"] == "message.delta" and e["params"]["message"] == reply_id)

    def close(self):
        self.sock.close()


CONFIG = """
[upstream]
base_url = "http://127.0.0.1:{port}/v1"
model = "fake-model"
timeout_seconds = 10
max_retries = 0

[tools.guarded]
description = "Echo what it is given, once somebody allows it"
parameters = {{ type = "object", properties = {{ city = {{ type = "string" }} }}, required = ["city"] }}
approval = "always"
[tools.guarded.request]
method = "GET"
url = "http://127.0.0.1:{port}/tool/echo?x=2"

[access]
allow_uids = [4242]

[profiles.helper]
tools = ["guarded"]

[tools.secret_echo]
description = "Looks a ticket up with the owner's key (no approval asked of the owner)"
parameters = {{ type = "object", properties = {{ q = {{ type = "string" }} }}, required = ["q"] }}
[tools.secret_echo.request]
method = "GET"
url = "http://127.0.0.1:{port}/tool/echo/secret"
headers = {{ X-Api-Key = "owner-secret-key-4711" }}

[profiles.tickets]
tools = ["secret_echo"]

[profiles.guide]
welcome = ["Welcome aboard.", "Which way?"]
quick_replies = ["go left [[reply:went left]]", "go right [[reply:went right]]"]
"""


class World:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="confab-web-")
        self.children = []
        self.upstream = subprocess.Popen(
            [os.path.join(BIN, "confab-fake-upstream"), "--port", "0", "--max-lifetime", "900",
             "--default-delay-ms", "2", "--exit-with-parent"],
            stdout=subprocess.PIPE, stderr=open(os.path.join(self.dir, "upstream.log"), "w"))
        self.children.append(self.upstream)
        line = self.upstream.stdout.readline().decode().split()
        assert line[0] == "listening", line
        self.upstream_port = int(line[2])
        self.config = os.path.join(self.dir, "config.toml")
        with open(self.config, "w") as f:
            f.write(CONFIG.format(port=self.upstream_port))
        self.socket = os.path.join(self.dir, "confabd.sock")
        self.state = os.path.join(self.dir, "web")
        self.start_daemon()
        self.port = free_port()
        self.gateway = None
        self.start_gateway()
        self.base = "http://127.0.0.1:%d" % self.port
        self.owner_url = self.web("url").strip()
        # The token travels in the fragment, which no server sees.
        assert self.owner_url.startswith(self.base + "/#token="), self.owner_url
        self.owner_token = self.owner_url.split("#token=", 1)[1]

    def start_daemon(self):
        env = dict(os.environ)
        env.pop("NOTIFY_SOCKET", None)
        self.daemon = subprocess.Popen(
            [os.path.join(BIN, "confabd"), "--socket", self.socket, "--data-dir", os.path.join(self.dir, "data"),
             "--config", self.config],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(self.dir, "confabd.log"), "a"), env=env)
        self.children.append(self.daemon)
        wait_for(lambda: self._daemon_answers(), "confabd to answer")

    def stop_daemon(self):
        self.daemon.send_signal(signal.SIGTERM)
        self.daemon.wait(timeout=60)

    def _daemon_answers(self):
        try:
            Terminal(self.socket).close()
            return True
        except OSError:
            return False

    def web(self, *arguments):
        result = subprocess.run(
            [os.path.join(BIN, "confab-web"), *arguments, "--config", self.config, "--socket", self.socket,
             "--state-dir", self.state, "--listen", "127.0.0.1:%d" % self.port],
            capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        return result.stdout

    def start_gateway(self):
        self.gateway_log = open(os.path.join(self.dir, "confab-web.log"), "a")
        self.gateway = subprocess.Popen(
            [os.path.join(BIN, "confab-web"), "serve", "--config", self.config, "--socket", self.socket,
             "--state-dir", self.state, "--listen", "127.0.0.1:%d" % self.port, "--log-level", "debug"],
            stdout=subprocess.DEVNULL, stderr=self.gateway_log)
        self.children.append(self.gateway)

        def listening():
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return True
            except OSError:
                return False
        wait_for(listening, "confab-web to listen")

    def stop_gateway(self):
        """SIGTERM, as systemd stops it: the pages are closed and it exits 0."""
        self.gateway.send_signal(signal.SIGTERM)
        assert self.gateway.wait(timeout=60) == 0

    def terminal(self, name="terminal"):
        return Terminal(self.socket, name)

    def close(self):
        for child in reversed(self.children):
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        for child in self.children:
            try:
                child.wait(timeout=20)
            except subprocess.TimeoutExpired:
                child.kill()
        if os.environ.get("CONFAB_WEB_KEEP"):
            print("kept", self.dir)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def world():
    w = World()
    yield w
    w.close()


@pytest.fixture(scope="session")
def browser():
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        yield b
        b.close()


def sign_in(context, url, base):
    """A first visit with a link: the page keeps the token and moves on by itself."""
    page = context.new_page()
    page.goto(url)
    page.wait_for_selector("#status:text('live')")
    assert "#" not in page.url, "the address bar keeps no token"
    return page


@pytest.fixture
def owner(world, browser):
    """A browser context holding the owner's token in the gateway origin's storage (its
    first visit had the token in the fragment)."""
    context = browser.new_context()
    sign_in(context, world.owner_url, world.base).close()
    yield context
    context.close()

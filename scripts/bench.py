#!/usr/bin/env python3
"""Measures confab on a release build and prints the figures, next to a peer measured in the
same run where one exists (Redis for fan-out and memory, a minimal C client for the client's
cold start), then a table of the goals and whether each is met.

Sections (all by default; pick some with --only):
- idle:     idle RSS of confabd and of redis-server
- client:   `confab ls` / `confab --version` wall time next to Benchmarks/rpcclient.c
- complete: upstream's last byte to an attached client's message.completed, fsync on and off
- fanout:   one conversation, a burst of one-word deltas from confab-fake-upstream to
            {1, 10, 100} attached readers, and Redis pub/sub with the same readers
            (Benchmarks/fanout-reader.c for both); deliveries/s and CPU per delivery; and the
            same burst as a thought's pieces ([[burst-thinking]]: message.reasoning), beside
            the text in every round
- latency:  upstream write to reader read per delta ([[stamp]]), p50/p99/p999 at 10 and 100 readers
- cpu:      100 conversations streaming at once: confabd CPU time per delta
- allocs:   allocations per delta (Benchmarks/malloc-count.c preloaded into confabd)
- reuse:    TCP connections the fake upstream accepted for replies in a row
- startup:  exec to first answered `status`, RSS, conversation.list and the first attach of a
            100-message conversation, on data directories written by confab-loggen
- long:     one conversation of 20,000 messages of 1,000 bytes: its first conversation.history
            {limit: 20}, confabd's RSS with it attached and idle, and `confab export --format jsonl`
            of it, beside Python's json module parsing the same log in the same run.
- coldstart: (only with --only coldstart) the first start on 10,000 x 100 messages written
            without an index (every log read), beside Python's json module parsing the same logs
- cache:    input tokens billed at full price over a 50-turn conversation with an Anthropic
            provider, with the prompt cache's breakpoints and without, counted by the fake
            upstream by Anthropic's caching rules.
- search:   (only with --only search) conversation.search over 10,000 conversations of 100
            messages written by confab-loggen, and the latency of another conversation's
            deltas to a reader while searches run back to back, next to the same without
- profile:  (only with --only profile) perf record -g of confabd during a 10-reader burst
- mcp:      one MCP tool call (`get_current_time` of mcp-server-time) through confabd, next to
            the official Python SDK's client and a raw JSON-RPC client calling their own
            running server; confabd's RSS with three idle servers ready, and without
- mcptrace: (only with --only mcptrace) confabd's own part of an MCP call, from strace -ttt of
            its system calls: model turn's end to the server's request, answer to tool.completed
- web:      confab-web with 10 headless Chromium pages on one conversation: a delta's arrival
            at an attached terminal client to its text in each page, p50/p99, and the
            gateway's RSS with the pages idle (scripts/bench_web.py, in .build/venv's Python)

Everything runs on loopback and Unix sockets in temporary directories; every run has a
count and a deadline; every process started here is ended by its PID.
"""
import argparse, json, os, shutil, signal, socket, statistics, subprocess, sys, tempfile, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")
BIN = os.environ.get("CONFAB_BIN_DIR", os.path.join(ROOT, ".build", "release"))
CONFABD, CONFAB = os.path.join(BIN, "confabd"), os.path.join(BIN, "confab")
FAKE, LOGGEN = os.path.join(BIN, "confab-fake-upstream"), os.path.join(BIN, "confab-loggen")
TICK = os.sysconf("SC_CLK_TCK")

last_byte = {}           # reply content -> monotonic time the Python upstream finished writing
PIECES = int(os.environ.get("BENCH_PIECES", "50"))
results = []             # rows of the closing table


def record(figure, confab, peer=None, ratio=None, goal=None, met=None):
    results.append((figure, confab, peer or "", ratio or "", goal or "", "" if met is None else ("met" if met else "NOT met")))


class Upstream(BaseHTTPRequestHandler):
    """A Python upstream for the last-byte latency: it runs in this process, so the moment it
    finished writing and the moment the client read are on one clock."""
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        prompt = body["messages"][-1]["content"]
        pieces = int(prompt.split()[0].split(":")[1]) if prompt.startswith("pieces:") else PIECES
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        chunk = lambda delta, finish=None: ("data: " + json.dumps({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}) + "\n\n").encode()
        out = [chunk({"role": "assistant", "content": ""})]
        out += [chunk({"content": "tok%d " % i}) for i in range(pieces)]
        out.append(chunk({}, "stop"))
        out.append(b"data: [DONE]\n\n")
        for piece in out:
            self.wfile.write(piece)
        self.wfile.flush()
        last_byte[prompt] = time.monotonic()
        self.close_connection = True


class Client:
    def __init__(self, path, timeout=60):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(path)
        self.sock.settimeout(timeout)
        self.file = self.sock.makefile("rb")
        self.next_id = 1

    def send(self, method, params=None):
        rid = self.next_id
        self.next_id += 1
        self.sock.sendall((json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params or {}}) + "\n").encode())
        return rid

    def response(self, rid):
        while True:
            line = self.file.readline()
            if not line:
                raise RuntimeError("connection closed")
            frame = json.loads(line)
            if frame.get("id") == rid:
                if "error" in frame:
                    raise RuntimeError(frame["error"])
                return frame["result"]

    def call(self, method, params=None):
        return self.response(self.send(method, params))

    def until(self, method, reply_id):
        """Reads frames until `method` for reply_id; returns (arrival time, number of deltas seen)."""
        deltas = 0
        while True:
            line = self.file.readline()
            if not line:
                raise RuntimeError("connection closed")
            frame = json.loads(line)
            m = frame.get("method")
            if m == "message.delta":
                deltas += 1
            elif m == method and frame["params"]["message"]["id"] == reply_id:
                return time.monotonic(), deltas

    def close(self):
        self.sock.close()


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])


def cpu_seconds(pid):
    """utime + stime of a process so far."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


class Daemon:
    def __init__(self, tmp, port, fsync=True, data=None, extra_config="", env=None, wait=True):
        self.tmp = tmp
        self.socket = os.path.join(tmp, "confabd.sock")
        config = os.path.join(tmp, "config.toml")
        with open(config, "w") as f:
            f.write('[upstream]\nbase_url = "http://127.0.0.1:%d/v1"\nmodel = "bench"\ntimeout_seconds = 30\n'
                    '[storage]\nfsync = %s\n%s' % (port, "true" if fsync else "false", extra_config))
        self.started = time.monotonic()
        self.proc = subprocess.Popen([CONFABD, "--socket", self.socket, "--data-dir", data or os.path.join(tmp, "data"),
                                      "--config", config, "--log-level", "warning"],
                                     stdin=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "confabd.log"), "ab"),
                                     env=env)
        self.ready_seconds = self.await_status() if wait else None

    def await_status(self, limit=300):
        """Seconds from exec to the first answered `status` (the socket may listen before the
        daemon serves: a connection alone proves nothing)."""
        deadline = self.started + limit
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("confabd exited at start-up, see %s/confabd.log" % self.tmp)
            try:
                client = Client(self.socket, timeout=max(1, deadline - time.monotonic()))
            except OSError:
                time.sleep(0.001)
                continue
            try:
                client.call("status")
                return time.monotonic() - self.started
            except (OSError, RuntimeError, ValueError):
                time.sleep(0.001)
            finally:
                client.close()
        raise RuntimeError("confabd did not answer within %d s" % limit)

    def rss_kib(self):
        return rss_kib(self.proc.pid)

    def cpu_seconds(self):
        return cpu_seconds(self.proc.pid)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)


class FakeUpstream:
    """confab-fake-upstream on an ephemeral loopback port."""

    def __init__(self, tmp):
        self.proc = subprocess.Popen([FAKE, "--port", "0", "--max-lifetime", "1200", "--exit-with-parent"],
                                     stdout=subprocess.PIPE, stderr=open(os.path.join(tmp, "fake-upstream.log"), "ab"))
        words = self.proc.stdout.readline().split()
        if len(words) != 3 or words[0] != b"listening":
            raise RuntimeError("confab-fake-upstream did not start")
        self.port = int(words[2])

    def stats(self):
        with socket.create_connection(("127.0.0.1", self.port), timeout=10) as s:
            s.sendall(b"GET /stats HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
        return json.loads(data.split(b"\r\n\r\n", 1)[1])

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=10)


class Redis:
    """redis-server on a Unix socket in a temporary directory, nothing saved."""

    def __init__(self, tmp):
        self.socket = os.path.join(tmp, "redis.sock")
        self.proc = subprocess.Popen(["redis-server", "--port", "0", "--unixsocket", self.socket, "--unixsocketperm", "700",
                                      "--save", "", "--appendonly", "no", "--dir", tmp, "--daemonize", "no",
                                      "--client-output-buffer-limit", "pubsub 0 0 0"],
                                     stdout=open(os.path.join(tmp, "redis.log"), "ab"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if subprocess.run(["redis-cli", "-s", self.socket, "ping"], capture_output=True).stdout.strip() == b"PONG":
                return
            time.sleep(0.02)
        raise RuntimeError("redis-server did not start")

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=10)


def timed(argv, env, runs):
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def describe(samples, unit="ms"):
    samples = sorted(samples)
    p95 = samples[min(len(samples) - 1, int(len(samples) * 0.95))]
    return "median %.2f %s, p95 %.2f %s, min %.2f %s (n=%d)" % (statistics.median(samples), unit, p95, unit, samples[0], unit, len(samples))


def compile_helpers(out):
    """The C helpers, built here so the benchmark needs nothing but a C compiler."""
    built = {}
    for name, flags in (("rpcclient", []), ("fanout-reader", []), ("malloc-count.so", ["-shared", "-fPIC"])):
        source = os.path.join(ROOT, "Benchmarks", name.replace(".so", "") + ".c")
        built[name] = os.path.join(out, name)
        subprocess.run(["cc", "-O2"] + flags + ["-o", built[name], source], check=True)
    return built


class Readers:
    """Benchmarks/fanout-reader with N connections; returns once all of them are attached."""

    def __init__(self, reader, mode, socket_path, count, readers, targets, stamps=False, timeout=120, reasoning=False):
        argv = [reader, mode, socket_path, str(count), str(readers), ",".join(targets), "--timeout", str(timeout)]
        if stamps:
            argv.append("--stamps")
        if reasoning:
            argv.append("--reasoning")
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        line = self.proc.stdout.readline()
        if line.strip() != b"ready":
            self.proc.kill()
            raise RuntimeError("fanout-reader did not attach: %s %s" % (line, self.proc.stderr.read()))

    def result(self, timeout):
        out, err = self.proc.communicate(timeout=timeout)
        fields = dict(item.split("=", 1) for item in out.decode().split())
        if err:
            sys.stderr.write(err.decode())
        return {k: float(v) if "." in v else int(v.split("/")[0]) for k, v in fields.items()}


def delta_frame_bytes():
    """Size of a typical message.delta line, the payload Redis publishes to be comparable."""
    frame = {"jsonrpc": "2.0", "method": "message.delta",
             "params": {"content": "w12345 ", "conversation": "k3v9q2m8x7ad", "message": "m2"}}
    return len(json.dumps(frame, separators=(",", ":")))


# ---------------------------------------------------------------------------------------------
# Sections


def bench_idle(ctx):
    with tempfile.TemporaryDirectory(prefix="confab-bench-") as tmp:
        redis = Redis(tmp)
        daemon = Daemon(tmp, ctx.py_port)
        time.sleep(1.0)
        confab_kib, redis_kib = daemon.rss_kib(), rss_kib(redis.proc.pid)
        ctx.empty_rss_kib = confab_kib
        print("idle RSS: confabd %d KiB, redis-server %d KiB (%.2fx)" % (confab_kib, redis_kib, confab_kib / redis_kib))
        record("idle RSS", "%.1f MiB" % (confab_kib / 1024), "Redis %.1f MiB" % (redis_kib / 1024),
               "%.2fx" % (confab_kib / redis_kib), "≤ Redis", confab_kib <= redis_kib)
        daemon.stop()
        redis.stop()


def bench_client(ctx):
    with tempfile.TemporaryDirectory(prefix="confab-bench-") as tmp:
        daemon = Daemon(tmp, ctx.py_port)
        client = Client(daemon.socket)
        client.call("hello", {"client": "bench"})
        for i in range(200):
            client.call("conversation.create", {"title": "bench %d" % i})
        client.close()
        daemon.stop()
        # Restart so all 200 conversations are loaded from their logs, as after a reboot.
        daemon = Daemon(tmp, ctx.py_port)
        time.sleep(0.3)
        print("idle RSS, 200 conversations loaded: %d KiB" % daemon.rss_kib())
        env = dict(os.environ, CONFAB_SOCKET=daemon.socket)
        timed([CONFAB, "ls"], env, 5)  # warm the page cache
        ls_samples = timed([CONFAB, "ls"], env, 30)
        print("confab ls (200 conversations): " + describe(ls_samples))
        # The same request from a minimal C client is the floor a client's cold start can reach.
        request = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "conversation.list", "params": {}})
        rpcclient = ctx.helpers["rpcclient"]
        timed([rpcclient, daemon.socket, request], env, 5)
        c_samples = timed([rpcclient, daemon.socket, request], env, 30)
        print("C client, same conversation.list: " + describe(c_samples))
        ratio = statistics.median(ls_samples) / statistics.median(c_samples)
        print("confab ls / C client (medians): %.2fx" % ratio)
        record("`confab ls`, 200 conversations (median)", "%.1f ms" % statistics.median(ls_samples),
               "C client %.1f ms" % statistics.median(c_samples), "%.1fx" % ratio, "≤ 2× C client", ratio <= 2)
        print("confab --version: " + describe(timed([CONFAB, "--version"], env, 30)))
        daemon.stop()


def bench_complete(ctx):
    for fsync in (True, False):
        with tempfile.TemporaryDirectory(prefix="confab-bench-") as tmp:
            daemon = Daemon(tmp, ctx.py_port, fsync=fsync)
            client = Client(daemon.socket)
            cid = client.call("conversation.create", {"title": "latency"})["conversation"]["id"]
            client.call("conversation.attach", {"conversation": cid, "history": 0})
            samples = []
            for i in range(40):
                prompt = "pieces:%d run %d" % (PIECES, i)
                reply = client.call("message.send", {"conversation": cid, "content": prompt})["reply"]
                arrived, _ = client.until("message.completed", reply)
                samples.append((arrived - last_byte[prompt]) * 1000)
            print("upstream last byte -> message.completed (fsync %s): %s" % ("on" if fsync else "off", describe(samples[5:])))
            record("last upstream byte → `message.completed`, fsync %s (median)" % ("on" if fsync else "off"),
                   "%.2f ms" % statistics.median(samples[5:]))
            client.close()
            daemon.stop()


def confab_burst(ctx, tmp, readers, count, stamps=False, delay_us=None, timeout=120, thinking=False):
    """One conversation, `readers` attached readers, one reply of `count` deltas (with
    `thinking`, `count` pieces of a thought: message.reasoning, not message.delta). Returns the
    reader's figures plus the confabd CPU seconds the burst cost and its wall time."""
    daemon = Daemon(tmp, ctx.fake.port, fsync=False)
    try:
        client = Client(daemon.socket)
        cid = client.call("conversation.create", {"title": "fan-out"})["conversation"]["id"]
        watchers = Readers(ctx.helpers["fanout-reader"], "confab", daemon.socket, count, readers, [cid], stamps, timeout,
                           reasoning=thinking)
        content = "[[burst:%d]]" % count + (" [[stamp]]" if stamps else "") + (" [[delay-us:%d]]" % delay_us if delay_us else "") \
            + (" [[burst-thinking]]" if thinking else "")
        cpu0 = daemon.cpu_seconds()
        start_ns = time.monotonic_ns()
        client.call("message.send", {"conversation": cid, "content": content})
        figures = watchers.result(timeout + 30)
        figures["cpu"] = daemon.cpu_seconds() - cpu0
        figures["seconds"] = (figures["last_ns"] - start_ns) / 1e9 if figures["last_ns"] else float("nan")
        client.close()
        return figures
    finally:
        daemon.stop()


def redis_burst(ctx, redis, readers, count, timeout=120):
    channel = "bench%d" % readers
    watchers = Readers(ctx.helpers["fanout-reader"], "redis", redis.socket, count, readers, [channel], timeout=timeout)
    payload = "x" * delta_frame_bytes()
    cpu0 = cpu_seconds(redis.proc.pid)
    start_ns = time.monotonic_ns()
    # One publisher, pipelined: redis-benchmark with a fixed command publishes `count` times.
    subprocess.run(["redis-benchmark", "-s", redis.socket, "-c", "1", "-P", "40", "-n", str(count), "-q",
                    "PUBLISH", channel, payload], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=timeout, check=True)
    figures = watchers.result(timeout + 30)
    figures["cpu"] = cpu_seconds(redis.proc.pid) - cpu0
    figures["seconds"] = (figures["last_ns"] - start_ns) / 1e9 if figures["last_ns"] else float("nan")
    return figures


def redis_latency(ctx, redis, readers, count, gap_us, timeout=120):
    """The Redis side of the latency run: one PUBLISH every gap_us, its payload starting with
    the CLOCK_MONOTONIC time in ns it was sent at, padded to the size of a delta line."""
    channel = "stamps%d" % readers
    watchers = Readers(ctx.helpers["fanout-reader"], "redis", redis.socket, count, readers, [channel], stamps=True, timeout=timeout)
    size = delta_frame_bytes()
    with socket.socket(socket.AF_UNIX) as publisher:
        publisher.connect(redis.socket)
        publisher.settimeout(10)
        replies = publisher.makefile("rb")
        prefix = b"*3\r\n$7\r\nPUBLISH\r\n$%d\r\n%s\r\n$%d\r\n" % (len(channel), channel.encode(), size)
        next_at = time.monotonic_ns()
        for _ in range(count):
            next_at += gap_us * 1000
            stamp = time.monotonic_ns()
            publisher.sendall(prefix + (b"%d " % stamp).ljust(size, b"x") + b"\r\n")
            replies.readline()
            pause = next_at - time.monotonic_ns()
            if pause > 0:
                time.sleep(pause / 1e9)
    return watchers.result(timeout + 30)


def bench_fanout(ctx):
    print("fan-out: one reply's deltas to N readers (Benchmarks/fanout-reader.c, one process, N Unix-socket connections);"
          " Redis: PUBLISH of a %d-byte payload (the size of a delta line) to N subscribers of the same reader" % delta_frame_bytes())
    with tempfile.TemporaryDirectory(prefix="confab-bench-") as tmp:
        redis = Redis(tmp)
        try:
            for readers in ctx.fanout_readers:
                count = ctx.burst if readers < 100 else ctx.burst_100
                # Alternating rounds, the median of each side: one slow moment of a shared
                # machine should not decide the ratio.
                rounds = []
                thoughts = []
                for _ in range(ctx.rounds):
                    with tempfile.TemporaryDirectory(prefix="confab-bench-", dir=tmp) as run:
                        c = confab_burst(ctx, run, readers, count)
                    # The same burst as pieces of a thought (message.reasoning), in the same round.
                    with tempfile.TemporaryDirectory(prefix="confab-bench-", dir=tmp) as run:
                        t = confab_burst(ctx, run, readers, count, thinking=True)
                    r = redis_burst(ctx, redis, readers, count)
                    rounds.append((c["delivered"] / c["seconds"], c, r["delivered"] / r["seconds"], r))
                    thoughts.append((t["delivered"] / t["seconds"], t))
                c_rate = statistics.median(x[0] for x in rounds)
                r_rate = statistics.median(x[2] for x in rounds)
                c = sorted(rounds, key=lambda x: x[0])[len(rounds) // 2][1]
                r = sorted(rounds, key=lambda x: x[2])[len(rounds) // 2][3]
                ratio = c_rate / r_rate
                print("  %3d readers x %d deltas, median of %d: confab %.2f s, %.0f deliveries/s, %.2f us CPU/delivery%s | "
                      "Redis %.2f s, %.0f deliveries/s, %.2f us CPU/delivery%s | confab/Redis %.2fx" % (
                          readers, count, ctx.rounds, c["seconds"], c_rate, c["cpu"] * 1e6 / max(1, c["delivered"]),
                          "" if c["complete"] == readers else " (INCOMPLETE: %d of %d)" % (c["delivered"], c["expected"]),
                          r["seconds"], r_rate, r["cpu"] * 1e6 / max(1, r["delivered"]),
                          "" if r["complete"] == readers else " (INCOMPLETE: %d of %d)" % (r["delivered"], r["expected"]),
                          ratio))
                record("fan-out, %d reader%s × %s deltas" % (readers, "" if readers == 1 else "s", format(count, ",")),
                       "%s/s" % format(int(c_rate), ","), "Redis %s/s" % format(int(r_rate), ","), "%.2fx" % ratio,
                       "≥ 1.0× Redis", ratio >= 1.0 and c["complete"] == readers)
                t_rate = statistics.median(x[0] for x in thoughts)
                t = sorted(thoughts, key=lambda x: x[0])[len(thoughts) // 2][1]
                print("  %3d readers x %d pieces of a thought, median of %d: confab %.2f s, %.0f deliveries/s, %.2f us CPU/delivery%s"
                      " | text above %.0f deliveries/s | thought/text %.2fx" % (
                          readers, count, ctx.rounds, t["seconds"], t_rate, t["cpu"] * 1e6 / max(1, t["delivered"]),
                          "" if t["complete"] == readers else " (INCOMPLETE: %d of %d)" % (t["delivered"], t["expected"]),
                          c_rate, t_rate / c_rate))
                record("fan-out of a thought, %d reader%s × %s pieces" % (readers, "" if readers == 1 else "s", format(count, ",")),
                       "%s/s" % format(int(t_rate), ","), "text %s/s" % format(int(c_rate), ","), "%.2fx" % (t_rate / c_rate),
                       "as fast as text (≥ 0.9×)", t_rate >= 0.9 * c_rate and t["complete"] == readers)
        finally:
            redis.stop()


def bench_latency(ctx):
    print("broker-added latency: [[stamp]] deltas paced %d us apart; upstream write -> reader read, one CLOCK_MONOTONIC;"
          " Redis: a PUBLISH every %d us stamped the same way, to the same readers" % (ctx.latency_gap_us, ctx.latency_gap_us))
    with tempfile.TemporaryDirectory(prefix="confab-bench-") as tmp:
        redis = Redis(tmp)
        try:
            for readers in (10, 100):
                with tempfile.TemporaryDirectory(prefix="confab-bench-", dir=tmp) as run:
                    f = confab_burst(ctx, run, readers, ctx.latency_count, stamps=True, delay_us=ctx.latency_gap_us)
                r = redis_latency(ctx, redis, readers, ctx.latency_count, ctx.latency_gap_us)
                for name, x in (("confab", f), ("Redis ", r)):
                    print("  %3d readers x %d: %s p50 %.0f us, p99 %.0f us, p999 %.0f us, max %.0f us (%d samples)" % (
                        readers, ctx.latency_count, name, x["p50_us"], x["p99_us"], x["p999_us"], x["max_us"], x["samples"]))
                record("latency per delta, %d readers, p50/p99/p999" % readers,
                       "%.0f / %.0f / %.0f µs" % (f["p50_us"], f["p99_us"], f["p999_us"]),
                       "Redis %.0f / %.0f / %.0f µs" % (r["p50_us"], r["p99_us"], r["p999_us"]),
                       "p99 %.1fx" % (f["p99_us"] / r["p99_us"]), "p99 ≤ 200 µs",
                       f["p99_us"] <= 200 and f["complete"] == readers)
        finally:
            redis.stop()


def bench_cpu(ctx):
    streams, count = 100, ctx.cpu_count
    with tempfile.TemporaryDirectory(prefix="confab-bench-") as tmp:
        daemon = Daemon(tmp, ctx.fake.port, fsync=False, extra_config="[limits]\nmax_streams = %d\n" % streams)
        try:
            client = Client(daemon.socket)
            ids = [client.call("conversation.create", {"title": "cpu %d" % i})["conversation"]["id"] for i in range(streams)]
            watchers = Readers(ctx.helpers["fanout-reader"], "confab", daemon.socket, count, streams, ids, timeout=120)
            cpu0, upstream0 = daemon.cpu_seconds(), cpu_seconds(ctx.fake.proc.pid)
            start = time.monotonic()
            pending = [client.send("message.send", {"conversation": cid, "content": "[[burst:%d]]" % count}) for cid in ids]
            for rid in pending:
                client.response(rid)
            f = watchers.result(150)
            cpu = daemon.cpu_seconds() - cpu0
            upstream_cpu = cpu_seconds(ctx.fake.proc.pid) - upstream0
            wall = time.monotonic() - start
            client.close()
        finally:
            daemon.stop()
    per = cpu * 1e6 / max(1, f["delivered"])
    print("CPU: %d conversations streaming %d deltas each at once, one reader each: confabd %.2f s CPU in %.2f s, "
          "%.2f us per delta, %.0f deltas/s (the fake upstream used %.2f s CPU)%s" % (
              streams, count, cpu, wall, per, f["delivered"] / wall, upstream_cpu,
              "" if f["complete"] == streams else " (INCOMPLETE)"))
    record("confabd CPU per delta, 100 streams at once", "%.1f µs" % per)


def bench_allocs(ctx):
    count = ctx.alloc_count
    for readers in (1, 10):
        with tempfile.TemporaryDirectory(prefix="confab-bench-") as tmp:
            counts = os.path.join(tmp, "malloc-counts")
            env = dict(os.environ, LD_PRELOAD=ctx.helpers["malloc-count.so"], MALLOC_COUNT_FILE=counts)
            daemon = Daemon(tmp, ctx.fake.port, fsync=False, env=env)
            try:
                client = Client(daemon.socket)
                cid = client.call("conversation.create", {"title": "allocations"})["conversation"]["id"]
                watchers = Readers(ctx.helpers["fanout-reader"], "confab", daemon.socket, count, readers, [cid], timeout=120)

                def read_counts():
                    with open(counts, "rb") as f:
                        data = f.read(16)
                    return int.from_bytes(data[:8], "little"), int.from_bytes(data[8:], "little")

                before = read_counts()
                client.call("message.send", {"conversation": cid, "content": "[[burst:%d]]" % count})
                watchers.result(150)
                # The reply is over (saved, its stream closed) once the daemon reports no stream.
                deadline = time.monotonic() + 60
                while client.call("status")["streams"] > 0 and time.monotonic() < deadline:
                    time.sleep(0.01)
                after = read_counts()
                client.close()
            finally:
                daemon.stop()
        allocations = (after[0] - before[0]) / count
        print("allocations: one reply of %d deltas to %d reader%s, from send to end of stream: %.1f allocations and %.0f bytes per delta" % (
            count, readers, "" if readers == 1 else "s", allocations, (after[1] - before[1]) / count))
        record("allocations per delta, %d reader%s" % (readers, "" if readers == 1 else "s"), "%.1f" % allocations,
               goal="single digits", met=allocations < 10)


def bench_reuse(ctx):
    replies = 10
    with tempfile.TemporaryDirectory(prefix="confab-bench-") as tmp:
        daemon = Daemon(tmp, ctx.fake.port, fsync=False)
        try:
            client = Client(daemon.socket)
            cid = client.call("conversation.create", {"title": "reuse"})["conversation"]["id"]
            client.call("conversation.attach", {"conversation": cid, "history": 0})
            before = ctx.fake.stats()["connections"]
            for i in range(replies):
                reply = client.call("message.send", {"conversation": cid, "content": "[[reply:ok %d]]" % i})["reply"]
                client.until("message.completed", reply)
            # The stats request comes on a connection of its own.
            used = ctx.fake.stats()["connections"] - before - 1
            client.close()
        finally:
            daemon.stop()
    print("connection reuse: %d replies in a row made %d TCP connection%s to the upstream" % (replies, used, "" if used == 1 else "s"))
    record("upstream connections for %d replies in a row" % replies, str(used), goal="1", met=used == 1)


def bench_startup(ctx):
    sizes = [(1000, 100)]
    with tempfile.TemporaryDirectory(prefix="confab-bench-") as tmp:
        generated = {}
        for conversations, messages in sizes + [(10_000, 100)]:
            if (conversations, messages) not in sizes:
                # 10,000 x 100 only when asked, or when the smaller start-up says it fits the time bound.
                small = generated[(1000, 100)]
                projected = 10 * (small["generate"] + 3 * small["ready"])
                if ctx.big == "no" or (ctx.big == "auto" and projected > 240):
                    print("start-up with %s x %d conversations skipped: projected %.0f s (run with --big to force)" % (
                        format(conversations, ","), messages, projected))
                    continue
            data = os.path.join(tmp, "data-%d" % conversations)
            t0 = time.monotonic()
            subprocess.run([LOGGEN, "--data-dir", data, "--conversations", str(conversations), "--messages", str(messages)],
                           check=True, stdout=subprocess.DEVNULL, timeout=900)
            generate = time.monotonic() - t0
            size = sum(e.stat().st_size for e in os.scandir(os.path.join(data, "conversations")))
            ready, rss, lists, attaches = [], [], [], []
            for run in range(3):
                with tempfile.TemporaryDirectory(prefix="run-", dir=tmp) as run_dir:
                    daemon = Daemon(run_dir, ctx.fake.port, data=data)
                    try:
                        ready.append(daemon.ready_seconds)
                        rss.append(daemon.rss_kib())
                        client = Client(daemon.socket)
                        samples = []
                        for _ in range(20):
                            t = time.perf_counter()
                            listed = client.call("conversation.list")
                            samples.append((time.perf_counter() - t) * 1000)
                        lists.append(statistics.median(samples))
                        # A different conversation each run, so the attach is a first one.
                        target = listed["conversations"][10 + run]["id"]
                        t = time.perf_counter()
                        attached = client.call("conversation.attach", {"conversation": target, "history": 1000})
                        attaches.append((time.perf_counter() - t) * 1000)
                        assert len(attached["messages"]) == messages, "attach returned %d messages" % len(attached["messages"])
                        rss[-1] = max(rss[-1], daemon.rss_kib())
                        client.close()
                    finally:
                        daemon.stop()
            generated[(conversations, messages)] = {"generate": generate, "ready": statistics.median(ready)}
            label = "%s × %d" % (format(conversations, ","), messages)
            empty = getattr(ctx, "empty_rss_kib", None)
            print("start-up, %s conversations (%d MB of logs, written by confab-loggen in %.1f s), median of 3: ready %.0f ms, "
                  "RSS %.1f MiB, conversation.list %.2f ms, first attach of a %d-message conversation %.2f ms" % (
                      label, size / 1e6, generate, statistics.median(ready) * 1000, statistics.median(rss) / 1024,
                      statistics.median(lists), messages, statistics.median(attaches)))
            record("start-up to first `status`, %s" % label, "%.0f ms" % (statistics.median(ready) * 1000), goal="≤ 200 ms",
                   met=statistics.median(ready) <= 0.2)
            record("RSS after start-up, %s" % label, "%.1f MiB" % (statistics.median(rss) / 1024),
                   "empty %.1f MiB" % (empty / 1024) if empty else None,
                   "%.2fx" % (statistics.median(rss) / empty) if empty else None, "≤ 2× empty",
                   statistics.median(rss) <= 2 * empty if empty else None)
            record("`conversation.list` (100 of them), %s" % label, "%.2f ms" % statistics.median(lists), goal="≤ 10 ms",
                   met=statistics.median(lists) <= 10)
            record("first attach of a %d-message conversation, %s" % (messages, label), "%.2f ms" % statistics.median(attaches))
            shutil.rmtree(data)


def bench_long(ctx):
    """One long conversation (--long-messages messages of 1,000 bytes, written by confab-loggen):
    its first `conversation.history {limit: 20}` (read from the log's end), the page before it
    (which waits for the whole log's outline), the longest another client waited for `status`
    meanwhile, confabd's RSS with it loaded, and `confab export --format jsonl` of it, beside
    Python's json module parsing the same file, in the same run."""
    messages = ctx.long_messages
    with tempfile.TemporaryDirectory(prefix="confab-bench-") as tmp:
        data = os.path.join(tmp, "data")
        subprocess.run([LOGGEN, "--data-dir", data, "--conversations", "1", "--messages", str(messages), "--message-bytes", "1000"],
                       check=True, stdout=subprocess.DEVNULL, timeout=900)
        log = os.path.join(data, "conversations", os.listdir(os.path.join(data, "conversations"))[0])
        size = os.path.getsize(log)
        firsts, seconds, status_waits, pythons, before, after, idle, exports = [], [], [], [], [], [], [], []
        for _ in range(3):
            with tempfile.TemporaryDirectory(prefix="run-", dir=tmp) as run_dir:
                daemon = Daemon(run_dir, ctx.fake.port, data=data)
                try:
                    client = Client(daemon.socket)
                    cid = client.call("conversation.list")["conversations"][0]["id"]
                    before.append(daemon.rss_kib())
                    # Another client asks for `status` all through the reads: the loop must answer it meanwhile.
                    other, waits, stop = Client(daemon.socket), [], threading.Event()

                    def poll():
                        while not stop.is_set():
                            t0 = time.perf_counter()
                            other.call("status")
                            waits.append((time.perf_counter() - t0) * 1000)
                            time.sleep(0.002)
                    poller = threading.Thread(target=poll)
                    poller.start()
                    t = time.perf_counter()
                    page = client.call("conversation.history", {"conversation": cid, "limit": 20})
                    firsts.append((time.perf_counter() - t) * 1000)
                    assert len(page["messages"]) == 20, "history returned %d messages" % len(page["messages"])
                    # The page before it waits for the whole log's outline.
                    t = time.perf_counter()
                    older = client.call("conversation.history", {"conversation": cid, "limit": 20, "before": page["messages"][0]["id"]})
                    seconds.append((time.perf_counter() - t) * 1000)
                    assert len(older["messages"]) == 20, "history returned %d messages" % len(older["messages"])
                    stop.set()
                    poller.join()
                    other.close()
                    status_waits.append(max(waits) if waits else 0)
                    after.append(daemon.rss_kib())
                    # Attached (as a screen is) and idle: what it holds to serve the conversation.
                    client.call("conversation.attach", {"conversation": cid, "history": 50})
                    time.sleep(0.5)
                    idle.append(daemon.rss_kib())
                    # The whole conversation through the client, as a user exports it.
                    t = time.perf_counter()
                    exported = subprocess.run([CONFAB, "--socket", daemon.socket, "export", "--format", "jsonl", cid],
                                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=True, timeout=300).stdout
                    exports.append((time.perf_counter() - t) * 1000)
                    assert exported.count(b"\n") == messages, "export wrote %d lines" % exported.count(b"\n")
                    client.close()
                finally:
                    daemon.stop()
            t = time.perf_counter()
            with open(log, "rb") as f:
                for line in f:
                    json.loads(line)
            pythons.append((time.perf_counter() - t) * 1000)
        first, python, export = statistics.median(firsts), statistics.median(pythons), statistics.median(exports)
        print("long conversation, %s messages (%.1f MB log), median of 3: first history {limit: 20} %.0f ms "
              "(Python's json parses the file in %.0f ms), the page before it %.0f ms (after the whole outline), "
              "another client's status waited at most %.0f ms; RSS %.1f MiB before, %.1f MiB loaded, %.1f MiB attached and idle; "
              "confab export --format jsonl %.0f ms" % (
                  format(messages, ","), size / 1e6, first, python, statistics.median(seconds), max(status_waits),
                  statistics.median(before) / 1024, statistics.median(after) / 1024, statistics.median(idle) / 1024, export))
        record("first `history {limit: 20}`, %s-message conversation" % format(messages, ","), "%.0f ms" % first,
               "Python json %.0f ms" % python, "%.2fx" % (first / python), "≤ 50 ms", first <= 50)
        record("the page before it (after the whole outline)", "%.0f ms" % statistics.median(seconds))
        record("another client's `status` during those reads, longest wait", "%.0f ms" % max(status_waits))
        loaded = statistics.median(idle) / 1024
        bound = 12 + 0.3 * size / 2**20
        record("RSS with it attached and idle", "%.1f MiB" % loaded, None, None, "≤ 12 MB + 0.3× the log (%.1f MiB)" % bound, loaded <= bound)
        record("`confab export --format jsonl` of it", "%.0f ms" % export, "Python json %.0f ms" % python, "%.2fx" % (export / python),
               "≤ 2× Python", export <= 2 * python)


def bench_coldstart(ctx):
    """The first start on --cold-conversations × 100 messages written without an index (every log
    read, as after an upgrade from before the index), beside Python's json module parsing every
    line of the same logs, in the same run."""
    conversations = ctx.cold_conversations
    with tempfile.TemporaryDirectory(prefix="confab-bench-") as tmp:
        data = os.path.join(tmp, "data")
        subprocess.run([LOGGEN, "--data-dir", data, "--conversations", str(conversations), "--messages", "100", "--no-index"],
                       check=True, stdout=subprocess.DEVNULL, timeout=900)
        logs = os.path.join(data, "conversations")
        size = sum(e.stat().st_size for e in os.scandir(logs))
        readies, pythons = [], []
        for _ in range(3):
            # Each run on a copy without an index: a run's daemon writes one when it stops.
            copy = os.path.join(tmp, "copy")
            shutil.copytree(data, copy)
            assert not os.path.exists(os.path.join(copy, "index.jsonl"))
            subprocess.run(["sync"], check=False)
            with tempfile.TemporaryDirectory(prefix="run-", dir=tmp) as run_dir:
                daemon = Daemon(run_dir, ctx.fake.port, data=copy)
                try:
                    readies.append(daemon.ready_seconds * 1000)
                finally:
                    daemon.stop()
            shutil.rmtree(copy)
            t = time.perf_counter()
            for entry in os.scandir(logs):
                with open(entry.path, "rb") as f:
                    for line in f:
                        json.loads(line)
            pythons.append((time.perf_counter() - t) * 1000)
        ready, python = statistics.median(readies), statistics.median(pythons)
        label = "%s × 100" % format(conversations, ",")
        print("first start without an index, %s (%d MB of logs), median of 3: ready %.0f ms (Python's json parses the logs in %.0f ms)" % (
            label, size / 1e6, ready, python))
        record("first start without an index, %s" % label, "%.0f ms" % ready, "Python json %.0f ms" % python,
               "%.2fx" % (ready / python), "≤ Python", ready <= python)


def bench_cache(ctx):
    """The input tokens billed at full price over a scripted 50-turn conversation with an
    Anthropic provider: with the prompt cache's breakpoints (confabd's default) against the same
    conversation with prompt_cache = false, counted by confab-fake-upstream, which bills
    breakpointed requests by Anthropic's documented caching rules (docs/fake-upstream.md)."""
    turns = 50
    totals = {}
    for cache in (True, False):
        extra = ('[providers.claude]\napi = "anthropic"\nbase_url = "http://127.0.0.1:%d/anthropic/v1"\napi_key = "bench"\n'
                 'model = "claude-bench"\nprompt_cache = %s\n[profiles.long]\nprovider = "claude"\n'
                 'system = "%s"\n' % (ctx.fake.port, "true" if cache else "false", " ".join(["You are a careful assistant."] * 40)))
        with tempfile.TemporaryDirectory(prefix="confab-bench-") as tmp:
            daemon = Daemon(tmp, ctx.fake.port, fsync=False, extra_config=extra)
            try:
                client = Client(daemon.socket)
                cid = client.call("conversation.create", {"title": "cache", "profile": "long"})["conversation"]["id"]
                full = cached = written = 0
                for turn in range(turns):
                    question = "Question %d: %s [[words:120]] [[delay:0]]" % (turn, " ".join("detail%d" % i for i in range(60)))
                    reply = client.call("message.send", {"conversation": cid, "content": question})["reply"]
                    while True:
                        message = client.call("conversation.history", {"conversation": cid, "limit": 1})["messages"][-1]
                        if message["id"] == reply and message["status"] != "streaming":
                            break
                        time.sleep(0.01)
                    usage = message.get("usage") or {}
                    read, write = usage.get("cache_read_tokens", 0), usage.get("cache_write_tokens", 0)
                    # A cache write is billed at 1.25x input: counted as full price and a quarter.
                    full += usage.get("prompt_tokens", 0) - read - write
                    written += write
                    cached += read
                client.close()
            finally:
                daemon.stop()
        totals[cache] = (full + 1.25 * written, cached)
    with_cache, whole = totals[True][0], totals[False][0]
    print("prompt cache: %d turns to an Anthropic provider (fake upstream): input billed at full price (cache writes at 1.25x) "
          "%s tokens with breakpoints, %s sent whole every turn (%.1f%%); %s tokens read from the cache" % (
              turns, format(int(with_cache), ","), format(int(whole), ","), 100 * with_cache / whole, format(totals[True][1], ",")))
    record("input billed at full price, %d-turn Anthropic conversation" % turns, "%s tokens" % format(int(with_cache), ","),
           "sent whole: %s" % format(int(whole), ","), "%.2fx" % (with_cache / whole), "≤ 25%", with_cache <= 0.25 * whole)


def bench_search(ctx):
    conversations, messages = ctx.search_conversations, 100
    with tempfile.TemporaryDirectory(prefix="confab-bench-") as tmp:
        data = os.path.join(tmp, "data")
        t0 = time.monotonic()
        subprocess.run([LOGGEN, "--data-dir", data, "--conversations", str(conversations), "--messages", str(messages)],
                       check=True, stdout=subprocess.DEVNULL, timeout=900)
        generate = time.monotonic() - t0
        size = sum(e.stat().st_size for e in os.scandir(os.path.join(data, "conversations")))
        label = "%s × %d (%d MB)" % (format(conversations, ","), messages, size / 1e6)
        print("search: %s conversations written by confab-loggen in %.1f s; %d searches of each query, one client, "
              "the logs in the page cache (written just before)" % (label, generate, ctx.search_runs))
        daemon = Daemon(tmp, ctx.fake.port, data=data, fsync=False)
        try:
            client = Client(daemon.socket, timeout=120)
            # loggen's messages are random words from a vocabulary of 20, so a word of it is in
            # nearly every message, and a word outside it in none.
            queries = [("a word in no message: every log read", "zebra"),
                       ("a word in nearly every message", "socket"),
                       ("four words, each in nearly every message", "history turn upstream delta")]
            for name, query in queries:
                samples, found = [], 0
                for _ in range(ctx.search_runs):
                    t = time.perf_counter()
                    found = len(client.call("conversation.search", {"query": query, "limit": 50})["hits"])
                    samples.append((time.perf_counter() - t) * 1000)
                print("  %-45s %r: %s, %d hits" % (name, query, describe(samples), found))
                record("search, %s, %s" % (name, label), "%.0f ms" % statistics.median(samples), goal="< 1 s",
                       met=statistics.median(samples) < 1000)

            # Another conversation streams to a reader while searches that read every log run
            # back to back on another connection; the same stream without them, for comparison.
            count, gap = ctx.search_latency_count, ctx.latency_gap_us
            cid = client.call("conversation.create", {"title": "streaming meanwhile"})["conversation"]["id"]
            figures = {}
            for searching in (False, True):
                watchers = Readers(ctx.helpers["fanout-reader"], "confab", daemon.socket, count, 1, [cid], stamps=True, timeout=120)
                stop, done = threading.Event(), [0]

                def search_loop():
                    searcher = Client(daemon.socket, timeout=120)
                    while not stop.is_set():
                        searcher.call("conversation.search", {"query": "zebra"})
                        done[0] += 1
                    searcher.close()
                thread = threading.Thread(target=search_loop, daemon=True)
                if searching:
                    thread.start()
                    time.sleep(0.2)
                client.call("message.send", {"conversation": cid,
                                             "content": "[[burst:%d]] [[stamp]] [[delay-us:%d]]" % (count, gap)})
                f = watchers.result(180)
                stop.set()
                if searching:
                    thread.join(timeout=60)
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:
                    status = client.call("status")
                    if status["streams"] == 0 and status["queued"] == 0:
                        break
                    time.sleep(0.01)
                figures[searching] = f
                print("  deltas to a reader in another conversation, %d paced %d us apart, %s: p50 %.0f us, p99 %.0f us, "
                      "p999 %.0f us, max %.0f us%s" % (count, gap, "while searching" if searching else "no search",
                                                       f["p50_us"], f["p99_us"], f["p999_us"], f["max_us"],
                                                       " (%d searches ran)" % done[0] if searching else ""))
            quiet, busy = figures[False], figures[True]
            record("delta latency p50/p99 while searches run, %s" % label,
                   "%.0f / %.0f µs" % (busy["p50_us"], busy["p99_us"]),
                   "no search %.0f / %.0f µs" % (quiet["p50_us"], quiet["p99_us"]),
                   "p99 %.1fx" % (busy["p99_us"] / quiet["p99_us"]))
            client.close()
        finally:
            daemon.stop()


def bench_profile(ctx):
    """Where confabd's time goes during a burst to --profile-readers readers: perf record -g, top symbols."""
    if shutil.which("perf") is None:
        print("profile: perf not installed (Debian: linux-perf), skipped")
        return
    readers, count = ctx.profile_readers, ctx.profile_count
    with tempfile.TemporaryDirectory(prefix="confab-bench-") as tmp:
        daemon = Daemon(tmp, ctx.fake.port, fsync=False)
        try:
            client = Client(daemon.socket)
            cid = client.call("conversation.create", {"title": "profile"})["conversation"]["id"]
            watchers = Readers(ctx.helpers["fanout-reader"], "confab", daemon.socket, count, readers, [cid], timeout=120,
                               reasoning=ctx.profile_thinking)
            data = os.path.join(tmp, "perf.data")
            perf = subprocess.Popen(["perf", "record", "-q", "-g", "-F", str(ctx.profile_frequency), "-o", data, "-p", str(daemon.proc.pid)],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(0.5)
            client.call("message.send", {"conversation": cid, "content": "[[burst:%d]]" % count
                                         + (" [[burst-thinking]]" if ctx.profile_thinking else "")})
            watchers.result(150)
            perf.send_signal(signal.SIGINT)
            perf.wait(timeout=60)
            client.close()
        finally:
            daemon.stop()
        if ctx.profile_data:
            shutil.copyfile(data, ctx.profile_data)
        report = subprocess.run(["perf", "report", "-i", data, "--no-children", "--sort", "symbol", "--stdio", "-g", "none",
                                 "--percent-limit", "1.5"], capture_output=True, text=True, timeout=300).stdout
        demangled = subprocess.run(["swift", "demangle", "--simplified"], input=report, capture_output=True, text=True).stdout \
            if shutil.which("swift") else report
    print("profile: confabd during %d %s to %d readers (perf record -g -F %d; self time, symbols over 1.5%%):"
          % (count, "pieces of a thought" if ctx.profile_thinking else "deltas", readers, ctx.profile_frequency))
    for line in demangled.splitlines():
        if line.strip() and not line.startswith("#"):
            print("  " + " ".join(line.split()).removesuffix(" - -")[:160])

MCP_VENV = os.path.join(ROOT, ".build", "venv-mcp")
MCP_TIME_CALL = '[[delay:0]] [[tool:time__get_current_time {"timezone":"UTC"}]]'


def mcp_config(names):
    server = os.path.join(MCP_VENV, "bin", "mcp-server-time")
    tables = "".join('[mcp.%s]\ncommand = "%s"\nargs = ["--local-timezone", "UTC"]\napproval = "never"\n' % (name, server) for name in names)
    return tables + '[profiles.bench]\ntools = [%s]\n' % ", ".join('"%s"' % name for name in names)


def mcp_call(client, cid, timeout):
    """One message.send whose reply calls time__get_current_time once; the arrival times of
    tool.started, tool.completed and the chain's last message.completed, from the send."""
    deadline = time.monotonic() + timeout
    sent = time.monotonic()
    rid = client.send("message.send", {"conversation": cid, "content": MCP_TIME_CALL})
    started = completed = None
    while time.monotonic() < deadline:
        line = client.file.readline()
        if not line:
            raise RuntimeError("connection closed")
        now = time.monotonic()
        frame = json.loads(line)
        if frame.get("id") == rid and "error" in frame:
            raise RuntimeError(frame["error"])
        method, params = frame.get("method"), frame.get("params") or {}
        if method == "tool.started":
            started = now
        elif method == "tool.completed":
            completed = now
            if params["message"].get("status") != "complete":
                raise RuntimeError("the call did not complete: %r" % params["message"])
        elif method == "message.failed":
            raise RuntimeError("the reply failed: %r" % params)
        elif method == "message.completed" and params["message"].get("role") == "assistant" \
                and not params["message"].get("tool_calls") and completed is not None:
            return started - sent, completed - started, now - sent
    raise RuntimeError("no answer within %d s" % timeout)


def mcp_peer(kind, calls, warmup):
    python = os.path.join(MCP_VENV, "bin", "python")
    result = subprocess.run([python, os.path.join(HERE, "bench_mcp_peer.py"), kind, os.path.join(MCP_VENV, "bin", "mcp-server-time"),
                             str(calls), str(warmup), "300"], capture_output=True, text=True, timeout=360)
    if result.returncode != 0:
        raise RuntimeError("the %s peer failed: %s" % (kind, result.stderr[-2000:]))
    return json.loads(result.stdout.strip().splitlines()[-1])["samples_ms"]


def percentile(samples, fraction):
    samples = sorted(samples)
    return samples[min(len(samples) - 1, int(len(samples) * fraction))]


def bench_mcp(ctx):
    if not os.path.exists(os.path.join(MCP_VENV, "bin", "mcp-server-time")):
        print("mcp: skipped (needs mcp-server-time and the mcp SDK in %s: make .build/venv-mcp/.installed)" % MCP_VENV)
        return
    calls, warmup, rounds = ctx.mcp_calls, 5, max(1, ctx.mcp_rounds)
    per_round = max(1, calls // rounds)
    calls = per_round * rounds
    tool_ms, chain_ms, sdk_ms, raw_ms = [], [], [], []
    with tempfile.TemporaryDirectory(prefix="confab-bench-") as tmp:
        daemon = Daemon(tmp, ctx.fake.port, fsync=False, extra_config=mcp_config(["time"]))
        try:
            client = Client(daemon.socket)
            cid = client.call("conversation.create", {"title": "mcp", "profile": "bench"})["conversation"]["id"]
            client.call("conversation.attach", {"conversation": cid})
            for _ in range(warmup):
                mcp_call(client, cid, 120)
            # Rounds alternate confabd and the peers, so that each meets the same load.
            daemon_cpu = 0.0
            for _ in range(rounds):
                cpu_before = daemon.cpu_seconds()
                for _ in range(per_round):
                    _, call, chain = mcp_call(client, cid, 120)
                    tool_ms.append(call * 1000)
                    chain_ms.append(chain * 1000)
                daemon_cpu += daemon.cpu_seconds() - cpu_before
                # Each peer starts its own mcp-server-time.
                sdk_ms += mcp_peer("sdk", per_round, warmup)
                raw_ms += mcp_peer("raw", per_round, warmup)
            cpu_per_chain_ms = daemon_cpu * 1000 / calls
            client.close()
        finally:
            daemon.stop()
    confab_median, sdk_median, raw_median = statistics.median(tool_ms), statistics.median(sdk_ms), statistics.median(raw_ms)
    added = confab_median - raw_median
    print("mcp: get_current_time on mcp-server-time, %d calls after %d warm-up, in %d rounds alternating confabd and the peers:" % (calls, warmup, rounds))
    print("  through confabd, tool.started -> tool.completed: " + describe(tool_ms))
    print("  official SDK client (ClientSession over stdio_client): " + describe(sdk_ms))
    print("  raw client (one line written, one read): " + describe(raw_ms))
    print("  whole chain, message.send -> last message.completed (two fake-upstream turns, no delay between their pieces): " + describe(chain_ms))
    print("  confabd's added time per call (its median - the raw client's): %.2f ms (between the two notifications: confabd"
          " reading the call's answer, storing the result (fsync off here) and announcing it, and this client waking for each)" % added)
    print("  confabd CPU (utime+stime) per chain of two model turns and one call: %.2f ms" % cpu_per_chain_ms)
    record("MCP call through confabd, tool.started → tool.completed (median/p95)", "%.2f / %.2f ms" % (confab_median, percentile(tool_ms, 0.95)),
           "SDK client %.2f / %.2f ms" % (sdk_median, percentile(sdk_ms, 0.95)), "%.2fx" % (confab_median / sdk_median),
           "≤ SDK client", confab_median <= sdk_median)
    record("confabd's added time per MCP call (median − raw client's %.2f ms)" % raw_median, "%.2f ms" % added, goal="≤ 1 ms", met=added <= 1.0)
    record("confabd CPU per chain of two model turns and one MCP call", "%.2f ms" % cpu_per_chain_ms)
    record("message.send → last message.completed, one MCP call (median/p95)", "%.2f / %.2f ms" % (statistics.median(chain_ms), percentile(chain_ms, 0.95)))

    # Memory: the daemon alone, then with three servers started and idle (tools.list {start})
    with tempfile.TemporaryDirectory(prefix="confab-bench-") as tmp:
        alone = Daemon(tmp, ctx.fake.port)
        try:
            time.sleep(1.0)
            alone_kib = alone.rss_kib()
        finally:
            alone.stop()
    with tempfile.TemporaryDirectory(prefix="confab-bench-") as tmp:
        daemon = Daemon(tmp, ctx.fake.port, extra_config=mcp_config(["time1", "time2", "time3"]))
        try:
            client = Client(daemon.socket, timeout=120)
            servers = client.call("tools.list", {"start": True})["servers"]
            if [server["state"] for server in servers] != ["ready"] * 3:
                raise RuntimeError("the servers did not all start: %r" % servers)
            time.sleep(1.0)
            with_kib = daemon.rss_kib()
            servers_kib = sum(rss_kib(server["pid"]) or 0 for server in servers)
            client.close()
        finally:
            daemon.stop()
    print("  confabd RSS: %d KiB alone, %d KiB with 3 ready idle servers (+%d KiB); the servers themselves %d KiB together" % (
        alone_kib, with_kib, with_kib - alone_kib, servers_kib))
    record("confabd RSS with 3 idle MCP servers ready", "%.1f MiB" % (with_kib / 1024), "no servers %.1f MiB" % (alone_kib / 1024),
           "%.2fx" % (with_kib / alone_kib))



def bench_mcptrace(ctx):
    """confabd's own part of an MCP call, from its system calls: strace -ttt on confabd during
    calls, the time from reading the model turn's last bytes to writing the server's request,
    and from reading the server's answer to writing tool.completed. strace slows every system
    call it sees, so these are upper bounds."""
    if not shutil.which("strace") or not os.path.exists(os.path.join(MCP_VENV, "bin", "mcp-server-time")):
        print("mcptrace: skipped (needs strace and %s)" % MCP_VENV)
        return
    calls = ctx.mcp_trace_calls
    with tempfile.TemporaryDirectory(prefix="confab-bench-") as tmp:
        daemon = Daemon(tmp, ctx.fake.port, fsync=False, extra_config=mcp_config(["time"]))
        trace = os.path.join(tmp, "trace.txt")
        try:
            client = Client(daemon.socket)
            cid = client.call("conversation.create", {"title": "mcp", "profile": "bench"})["conversation"]["id"]
            client.call("conversation.attach", {"conversation": cid})
            for _ in range(5):
                mcp_call(client, cid, 120)
            tracer = subprocess.Popen(["strace", "-f", "-ttt", "-s", "120", "-e", "trace=read,write,writev,recvfrom",
                                       "-o", trace, "-p", str(daemon.proc.pid)], stderr=subprocess.DEVNULL)
            deadline = time.monotonic() + 20
            while not (os.path.exists(trace) and os.path.getsize(trace) > 0) and time.monotonic() < deadline:
                client.call("status")
                time.sleep(0.05)
            for _ in range(calls):
                mcp_call(client, cid, 120)
            tracer.send_signal(signal.SIGINT)
            tracer.wait(timeout=30)
            client.close()
        finally:
            daemon.stop()
        outgoing, server, incoming = [], [], []
        last_upstream = request = answer = None
        for line in open(trace, errors="replace"):
            fields = line.split(None, 2)
            if len(fields) < 3:
                continue
            at, call = float(fields[1]), fields[2]
            if call.startswith("recvfrom("):
                last_upstream = at
            elif call.startswith("write(") and "tools/call" in call:
                request = at
                if last_upstream is not None:
                    outgoing.append((at - last_upstream) * 1e6)
            elif call.startswith("read(") and '\\"result\\"' in call and request is not None:
                server.append((at - request) * 1e6)
                answer, request = at, None
            elif call.startswith(("write(", "writev(")) and "tool.completed" in call and answer is not None:
                incoming.append((at - answer) * 1e6)
                answer = None
    if not outgoing or not incoming:
        print("mcptrace: no calls found in the trace")
        return
    print("mcptrace: confabd's system calls during %d MCP calls (strace -f -ttt: upper bounds)" % calls)
    print("  model turn's last bytes read -> the server's request written: " + describe(outgoing, "us"))
    print("  request written -> answer read (the server, and confabd waking): " + describe(server, "us"))
    print("  answer read -> tool.completed written: " + describe(incoming, "us"))
    both = statistics.median(outgoing) + statistics.median(incoming)
    record("confabd's own part of an MCP call, under strace (medians: turn end → request + answer → tool.completed)",
           "%.0f + %.0f µs" % (statistics.median(outgoing), statistics.median(incoming)), goal="≤ 1 ms", met=both <= 1000)

SECTIONS = ["idle", "client", "complete", "fanout", "latency", "cpu", "allocs", "reuse", "startup", "long", "coldstart", "cache", "search", "profile", "web", "mcp", "mcptrace"]
# The search and the cold start need data directories of hundreds of MB written first: only when named.
DEFAULT_SECTIONS = [name for name in SECTIONS if name not in ("profile", "search", "mcptrace", "coldstart")]


def bench_web(ctx):
    venv = os.path.join(ROOT, ".build", "venv", "bin", "python")
    if not os.path.exists(os.path.join(BIN, "confab-web")) or not os.path.exists(venv) or not os.path.exists("/usr/bin/chromium"):
        print("web: skipped (needs confab-web in %s, make test-web-deps and Debian's chromium)" % BIN)
        return
    env = dict(os.environ, CONFAB_BIN_DIR=BIN)
    result = subprocess.run([venv, os.path.join(HERE, "bench_web.py")], capture_output=True, text=True, env=env, timeout=600)
    if result.returncode != 0:
        print("web: failed\n" + result.stderr[-2000:])
        record("delta to browser page, 10 pages", "failed", goal="p99 ≤ 5 ms", met=False)
        return
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    print("web: delta at a terminal to text in %d pages: p50 %.1f ms, p99 %.1f ms (%d samples); gateway RSS with the pages idle %d KiB" % (
        figures["pages"], figures["p50_ms"], figures["p99_ms"], figures["samples"], figures["idle_rss_kib"]))
    record("delta at a terminal to text in a browser page, 10 pages", "p50 %.1f ms, p99 %.1f ms" % (figures["p50_ms"], figures["p99_ms"]),
           goal="p99 ≤ 5 ms", met=figures["p99_ms"] <= 5)
    record("confab-web RSS, 10 pages idle", "%.1f MiB" % (figures["idle_rss_kib"] / 1024))


def main():
    parser = argparse.ArgumentParser(description="confab benchmarks (release build)")
    parser.add_argument("--only", help="comma-separated sections: " + ",".join(SECTIONS) + " (search, profile and mcptrace only when named)")
    parser.add_argument("--burst", type=int, default=100_000, help="deltas per fan-out burst at 1 and 10 readers")
    parser.add_argument("--burst-100", type=int, default=100_000, help="deltas per fan-out burst at 100 readers")
    parser.add_argument("--fanout-readers", type=lambda text: [int(n) for n in text.split(",")], default=[1, 10, 100],
                        help="reader counts of the fan-out section, comma-separated (default 1,10,100)")
    parser.add_argument("--profile-data", help="with --only profile: also keep perf.data at this path, for perf report")
    parser.add_argument("--rounds", type=int, default=3, help="alternating confab/Redis rounds per fan-out size")
    parser.add_argument("--latency-count", type=int, default=3000, help="stamped deltas per latency run")
    parser.add_argument("--latency-gap-us", type=int, default=2000, help="microseconds between stamped deltas")
    parser.add_argument("--cpu-count", type=int, default=1000, help="deltas per stream in the 100-stream run")
    parser.add_argument("--profile-readers", type=int, default=10, help="attached readers during the profile")
    parser.add_argument("--profile-frequency", type=int, default=999, help="perf record's samples per second")
    parser.add_argument("--profile-thinking", action="store_true", help="profile the burst as a thought's pieces (message.reasoning)")
    parser.add_argument("--profile-count", type=int, default=300_000, help="deltas in the profiled burst (enough samples)")
    parser.add_argument("--alloc-count", type=int, default=10_000, help="deltas in the allocation count")
    big = parser.add_mutually_exclusive_group()
    big.add_argument("--big", dest="big", action="store_const", const="yes", help="always measure start-up with 10,000 x 100")
    big.add_argument("--no-big", dest="big", action="store_const", const="no", help="never measure start-up with 10,000 x 100")
    parser.set_defaults(big="auto")
    parser.add_argument("--long-messages", type=int, default=20_000, help="messages in the long conversation")
    parser.add_argument("--cold-conversations", type=int, default=10_000, help="conversations of 100 messages for --only coldstart")
    parser.add_argument("--search-conversations", type=int, default=10_000, help="conversations of 100 messages to search")
    parser.add_argument("--search-runs", type=int, default=5, help="searches of each query")
    parser.add_argument("--search-latency-count", type=int, default=3000, help="stamped deltas streamed while searching")
    parser.add_argument("--mcp-calls", type=int, default=200, help="timed MCP tool calls through confabd and through each peer")
    parser.add_argument("--mcp-trace-calls", type=int, default=50, help="MCP calls traced with --only mcptrace")
    parser.add_argument("--mcp-rounds", type=int, default=4, help="rounds the MCP calls are split into, alternating confabd and the peers")
    parser.add_argument("--markdown", metavar="FILE", help="also write the closing table to FILE as Markdown")
    ctx = parser.parse_args()
    sections = ctx.only.split(",") if ctx.only else DEFAULT_SECTIONS
    unknown = set(sections) - set(SECTIONS)
    if unknown:
        parser.error("unknown section(s): " + ", ".join(sorted(unknown)))

    started = time.monotonic()
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    print("confab benchmarks, %s, commit %s, release binaries in %s, %d cores, Linux %s, load average %.1f" % (
        time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), commit or "?", os.path.realpath(BIN), os.cpu_count(),
        os.uname().release, os.getloadavg()[0]))

    server = ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    ctx.py_port = server.server_address[1]
    with tempfile.TemporaryDirectory(prefix="confab-bench-") as tmp:
        ctx.helpers = compile_helpers(tmp)
        ctx.fake = FakeUpstream(tmp)
        try:
            for name in SECTIONS:
                if name in sections:
                    t = time.monotonic()
                    globals()["bench_" + name](ctx)
                    sys.stdout.flush()
                    print("  (%s: %.0f s)" % (name, time.monotonic() - t))
        finally:
            ctx.fake.stop()
            server.shutdown()

    print("\nsummary (%.0f s in all)" % (time.monotonic() - started))
    headers = ("figure", "confab", "peer, same run", "ratio", "goal", "")
    widths = [max(len(str(row[i])) for row in results + [headers]) for i in range(len(headers))]
    for row in [headers] + results:
        print("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)).rstrip())
    if ctx.markdown:
        with open(ctx.markdown, "w") as f:
            f.write("| " + " | ".join(headers[:-1]) + " | met |\n|" + "---|" * len(headers) + "\n")
            for row in results:
                f.write("| " + " | ".join(str(cell) for cell in row) + " |\n")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Measures confab on a release build and prints the figures.

- idle RSS of confabd: empty, and with 200 conversations of 20 messages loaded
- wall time of `confab ls` and `confab status` (client start-up plus one round trip)
- latency from the upstream's last byte to an attached client's message.completed,
  with fsync on and off (the upstream here is a thread of this script, so both
  timestamps come from one monotonic clock)
- fan-out: deltas per second delivered to each of N attached clients

Everything runs on loopback and temporary directories, bounded in count and time.
"""
import json, os, signal, socket, statistics, subprocess, sys, tempfile, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

BIN = os.environ.get("CONFAB_BIN_DIR", os.path.join(os.path.dirname(__file__), "..", ".build", "release"))
CONFABD, CONFAB = os.path.join(BIN, "confabd"), os.path.join(BIN, "confab")

last_byte = {}           # reply content -> monotonic time the upstream finished writing
PIECES = int(os.environ.get("BENCH_PIECES", "50"))


class Upstream(BaseHTTPRequestHandler):
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
    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(path)
        self.sock.settimeout(60)
        self.file = self.sock.makefile("rb")
        self.next_id = 1

    def call(self, method, params=None):
        rid = self.next_id
        self.next_id += 1
        self.sock.sendall((json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params or {}}) + "\n").encode())
        while True:
            frame = json.loads(self.file.readline())
            if frame.get("id") == rid:
                if "error" in frame:
                    raise RuntimeError(frame["error"])
                return frame["result"]

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


class Daemon:
    def __init__(self, tmp, port, fsync=True):
        self.tmp = tmp
        self.socket = os.path.join(tmp, "confabd.sock")
        config = os.path.join(tmp, "config.toml")
        with open(config, "w") as f:
            f.write('[upstream]\nbase_url = "http://127.0.0.1:%d/v1"\nmodel = "bench"\n[storage]\nfsync = %s\n' % (port, "true" if fsync else "false"))
        self.proc = subprocess.Popen([CONFABD, "--socket", self.socket, "--data-dir", os.path.join(tmp, "data"), "--config", config,
                                      "--log-level", "warning"], stdin=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "confabd.log"), "ab"))
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                Client(self.socket).close()
                return
            except OSError:
                time.sleep(0.01)
        raise RuntimeError("confabd did not start")

    def rss_kib(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])

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


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    print("confab benchmarks, release binaries in %s, %d cores" % (os.path.realpath(BIN), os.cpu_count()))

    with tempfile.TemporaryDirectory(prefix="confab-bench-") as tmp:
        daemon = Daemon(tmp, port)
        time.sleep(0.3)
        print("idle RSS, no conversations: %d KiB" % daemon.rss_kib())

        client = Client(daemon.socket)
        client.call("hello", {"client": "bench"})
        ids = []
        for i in range(200):
            cid = client.call("conversation.create", {"title": "bench %d" % i})["conversation"]["id"]
            ids.append(cid)
        client.call("conversation.attach", {"conversation": ids[0], "history": 0})
        for i in range(10):
            reply = client.call("message.send", {"conversation": ids[0], "content": "pieces:20 %d" % i})["reply"]
            client.until("message.completed", reply)
        client.close()
        daemon.stop()
        # Restart so all 200 conversations are loaded from their logs, as after a reboot.
        daemon = Daemon(tmp, port)
        time.sleep(0.3)
        print("idle RSS, 200 conversations loaded (one with 20 messages): %d KiB" % daemon.rss_kib())

        env = dict(os.environ, CONFAB_SOCKET=daemon.socket)
        timed([CONFAB, "ls"], env, 5)  # warm the page cache
        ls_samples = timed([CONFAB, "ls"], env, 50)
        print("confab ls (200 conversations): " + describe(ls_samples))
        # The same request from a minimal C client is the floor a client's cold start can reach.
        rpcclient = os.path.join(tmp, "rpcclient")
        subprocess.run(["cc", "-O2", "-o", rpcclient, os.path.join(os.path.dirname(__file__), "..", "Benchmarks", "rpcclient.c")], check=True)
        request = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "conversation.list", "params": {}})
        timed([rpcclient, daemon.socket, request], env, 5)
        c_samples = timed([rpcclient, daemon.socket, request], env, 50)
        print("C client, same conversation.list: " + describe(c_samples))
        print("confab ls / C client (medians): %.2fx" % (statistics.median(ls_samples) / statistics.median(c_samples)))
        print("confab --version: " + describe(timed([CONFAB, "--version"], env, 50)))
        print("confab status: " + describe(timed([CONFAB, "status"], env, 50)))
        daemon.stop()

    for fsync in (True, False):
        with tempfile.TemporaryDirectory(prefix="confab-bench-") as tmp:
            daemon = Daemon(tmp, port, fsync=fsync)
            client = Client(daemon.socket)
            client.call("hello", {"client": "bench"})
            cid = client.call("conversation.create", {"title": "latency"})["conversation"]["id"]
            client.call("conversation.attach", {"conversation": cid, "history": 0})
            samples = []
            for i in range(60):
                prompt = "pieces:%d run %d" % (PIECES, i)
                reply = client.call("message.send", {"conversation": cid, "content": prompt})["reply"]
                arrived, _ = client.until("message.completed", reply)
                samples.append((arrived - last_byte[prompt]) * 1000)
            print("upstream last byte -> message.completed (fsync %s): %s" % ("on" if fsync else "off", describe(samples[10:])))
            client.close()
            daemon.stop()

    with tempfile.TemporaryDirectory(prefix="confab-bench-") as tmp:
        daemon = Daemon(tmp, port, fsync=False)
        watchers = []
        first = Client(daemon.socket)
        cid = first.call("conversation.create", {"title": "fan-out"})["conversation"]["id"]
        for _ in range(8):
            w = Client(daemon.socket)
            w.call("conversation.attach", {"conversation": cid, "history": 0})
            watchers.append(w)
        pieces = 20000
        start = time.monotonic()
        reply = first.call("message.send", {"conversation": cid, "content": "pieces:%d" % pieces})["reply"]
        results = [None] * len(watchers)
        def drain(n):
            results[n] = watchers[n].until("message.completed", reply)
        threads = [threading.Thread(target=drain, args=(n,)) for n in range(len(watchers))]
        for t in threads: t.start()
        for t in threads: t.join(timeout=60)
        elapsed = max(r[0] for r in results) - start
        total = sum(r[1] for r in results)
        print("fan-out: %d deltas to each of %d clients in %.2f s (%.0f deltas/s delivered in all; the Python readers are the bottleneck)" %
              (pieces, len(watchers), elapsed, total / elapsed))
        print("RSS after fan-out: %d KiB" % daemon.rss_kib())
        for w in watchers: w.close()
        first.close()
        daemon.stop()
    server.shutdown()


if __name__ == "__main__":
    main()

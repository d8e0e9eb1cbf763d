#!/usr/bin/env python3
"""Idle memory, start-up time and size of confabd builds, side by side with redis-server.

  scripts/memory-and-linking.py [--rounds N] [--client LABEL=PATH ...] LABEL=PATH [LABEL=PATH ...]

Each LABEL=PATH is a confabd binary. In every round, each confabd (and one redis-server on
a Unix socket, as the peer for ratios) is started with an empty data directory; the time
from exec to the first answered `status` is taken, then RSS, PSS and private memory from
/proc/PID/smaps_rollup once the process is idle (private dirty: what it alone costs), and which Foundation/ICU libraries its
maps hold. The order of the binaries rotates from round to round, so a noisy neighbour
hits all of them alike. Each --client binary is timed running `--version`, with its peak RSS.
Figures are medians over the rounds. Bounded: at most --rounds rounds and 10 s per start.
Docs: docs/performance.md, "Memory and linking".
"""
import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import tempfile
import time

START_LIMIT = 10.0


def rollup(pid):
    """(RSS, PSS, private dirty) in KiB from smaps_rollup. Private dirty is what this process
    alone costs (heap, stacks, relocated data); clean file pages are page cache, shared or not."""
    fields = {}
    with open("/proc/%d/smaps_rollup" % pid) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 2 and parts[0].endswith(":") and parts[1].isdigit():
                fields[parts[0][:-1]] = int(parts[1])
    return fields["Rss"], fields["Pss"], fields["Private_Dirty"]


def heavy_libraries(pid):
    names = set()
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            path = line.split()[-1] if len(line.split()) >= 6 else ""
            base = os.path.basename(path)
            if "Foundation" in base or "icu" in base.lower() or "ICU" in base:
                names.add(base)
    return sorted(names)


def ask_status(path, deadline):
    """Connects (retrying until the socket answers) and returns once `status` is answered."""
    while True:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(path)
            break
        except OSError:
            s.close()
            if time.monotonic() > deadline:
                raise RuntimeError("no socket at %s" % path)
            time.sleep(0.0002)
    with s:
        s.sendall(b'{"jsonrpc":"2.0","id":1,"method":"status"}\n')
        data = b""
        while b"\n" not in data:
            chunk = s.recv(65536)
            if not chunk:
                raise RuntimeError("closed before answering")
            data += chunk
        answer = json.loads(data.split(b"\n")[0])
        if "result" not in answer:
            raise RuntimeError("status: %r" % answer)


def ask_redis(path, deadline):
    while True:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(path)
            break
        except OSError:
            s.close()
            if time.monotonic() > deadline:
                raise RuntimeError("no redis socket")
            time.sleep(0.0002)
    with s:
        s.sendall(b"PING\r\n")
        if not s.recv(64).startswith(b"+PONG"):
            raise RuntimeError("redis did not answer PING")


def run_confabd(binary, tmp):
    work = tempfile.mkdtemp(dir=tmp)
    config = os.path.join(work, "config.toml")
    with open(config, "w") as f:
        # An upstream on loopback that is never called: the daemon stays idle.
        f.write('[upstream]\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\n')
    sock = os.path.join(work, "s.sock")
    start = time.monotonic()
    proc = subprocess.Popen([binary, "--socket", sock, "--data-dir", os.path.join(work, "data"), "--config", config,
                             "--log-level", "warning"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        ask_status(sock, start + START_LIMIT)
        ready = time.monotonic() - start
        time.sleep(0.5)
        memory = rollup(proc.pid)
        libraries = heavy_libraries(proc.pid)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(work, ignore_errors=True)
    return ready, memory, libraries


def run_redis(tmp):
    work = tempfile.mkdtemp(dir=tmp)
    sock = os.path.join(work, "redis.sock")
    start = time.monotonic()
    proc = subprocess.Popen(["redis-server", "--port", "0", "--unixsocket", sock, "--save", "", "--appendonly", "no",
                             "--dir", work], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        ask_redis(sock, start + START_LIMIT)
        ready = time.monotonic() - start
        time.sleep(0.5)
        memory = rollup(proc.pid)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(work, ignore_errors=True)
    return ready, memory, []


def run_client(binary):
    """Wall time of `binary --version`, and its peak RSS through GNU time (a child forked from
    this script would report the script's own RSS, from before the exec)."""
    start = time.monotonic()
    subprocess.run([binary, "--version"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    elapsed = time.monotonic() - start
    peak = 0
    if os.path.exists("/usr/bin/time"):
        run = subprocess.run(["/usr/bin/time", "-f", "%M", binary, "--version"], stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, check=True, text=True)
        peak = int(run.stderr.strip().splitlines()[-1])
    return elapsed, peak


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--client", action="append", default=[], metavar="LABEL=PATH")
    parser.add_argument("daemons", nargs="+", metavar="LABEL=PATH")
    args = parser.parse_args()
    daemons = [tuple(d.split("=", 1)) for d in args.daemons]
    clients = [tuple(c.split("=", 1)) for c in args.client]

    # A binary copied or linked moments ago sits in the page cache as dirty pages, which its
    # process would show as private dirty until writeback: write everything back first.
    os.sync()
    results = {label: [] for label, _ in daemons}
    results["redis-server"] = []
    client_results = {label: [] for label, _ in clients}
    libraries = {}
    with tempfile.TemporaryDirectory(prefix="confab-mem-") as tmp:
        for round_number in range(args.rounds):
            order = daemons[round_number % len(daemons):] + daemons[:round_number % len(daemons)]
            for label, binary in order:
                ready, memory, libs = run_confabd(binary, tmp)
                results[label].append((ready, memory))
                libraries[label] = libs
            results["redis-server"].append(run_redis(tmp)[:2])
            for label, binary in clients:
                client_results[label].append(run_client(binary))

    redis_rss = statistics.median(m[0] for _, m in results["redis-server"])
    print("%d rounds; medians. RSS, PSS and private dirty from smaps_rollup 0.5 s after the first answer." % args.rounds)
    print("%-22s %10s %9s %9s %9s %8s %12s  %s" % ("", "size KiB", "RSS KiB", "PSS KiB", "dirty KiB", "÷ redis", "ready ms", "Foundation/ICU mapped"))
    for label, binary in daemons + [("redis-server", shutil.which("redis-server"))]:
        rows = results[label]
        rss = statistics.median(m[0] for _, m in rows)
        pss = statistics.median(m[1] for _, m in rows)
        private = statistics.median(m[2] for _, m in rows)
        ready = statistics.median(r for r, _ in rows) * 1000
        size = os.path.getsize(binary) // 1024
        print("%-22s %10d %9d %9d %9d %8.2f %12.1f  %s" % (label, size, rss, pss, private, rss / redis_rss, ready,
                                                        ", ".join(libraries.get(label, [])) or "-"))
    for label, binary in clients:
        rows = client_results[label]
        print("%-22s %10d  --version: %.1f ms, peak RSS %d KiB" % (label, os.path.getsize(binary) // 1024,
              statistics.median(r[0] for r in rows) * 1000, statistics.median(r[1] for r in rows)))


if __name__ == "__main__":
    main()

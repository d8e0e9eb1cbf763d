#!/usr/bin/env python3
"""Cold start of two confab client binaries, A and B, against one release confabd holding 200
conversations: `confab ls`, `confab --version` and `confab status`, each run interleaved in
ABBA order (both see the same load and go first as often), medians printed.

    scripts/client-ab.py OLD_CONFAB NEW_CONFAB [.build/release/confabd] [ROUNDS]
"""
import json, os, socket, statistics, subprocess, sys, tempfile, time

if len(sys.argv) < 3:
    sys.exit(__doc__)
first, second = sys.argv[1], sys.argv[2]
daemon_binary = sys.argv[3] if len(sys.argv) > 3 else ".build/release/confabd"
rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 200

with tempfile.TemporaryDirectory(prefix="confab-client-ab-") as tmp:
    path = tmp + "/confabd.sock"
    open(tmp + "/config.toml", "w").close()
    env = dict(os.environ, CONFAB_SOCKET=path, XDG_RUNTIME_DIR=tmp, XDG_CONFIG_HOME=tmp + "/config")
    daemon = subprocess.Popen([daemon_binary, "--socket", path, "--data-dir", tmp + "/data", "--config", tmp + "/config.toml"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        for _ in range(200):  # at most 10 s
            if os.path.exists(path):
                break
            time.sleep(0.05)
        connection = socket.socket(socket.AF_UNIX)
        connection.connect(path)
        stream = connection.makefile("rwb")
        for number in range(1, 201):
            request = {"jsonrpc": "2.0", "id": number, "method": "conversation.create", "params": {"title": "bench %d" % number}}
            stream.write((json.dumps(request) + "\n").encode())
            stream.flush()
            while json.loads(stream.readline()).get("id") != number:
                pass
        connection.close()

        def once(binary, arguments):
            start = time.perf_counter()
            subprocess.run([binary] + arguments, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=True)
            return (time.perf_counter() - start) * 1000

        for arguments in (["ls"], ["--version"], ["status"]):
            once(first, arguments), once(second, arguments)  # the page cache
            samples = {first: [], second: []}
            for turn in range(rounds):
                for binary in ((first, second) if turn % 2 == 0 else (second, first)):
                    samples[binary].append(once(binary, arguments))
            a, b = statistics.median(samples[first]), statistics.median(samples[second])
            print("confab %-10s A %.2f ms  B %.2f ms  B/A %.2f  (medians of %d each)" % (" ".join(arguments), a, b, b / a, rounds))
    finally:
        daemon.terminate()
        daemon.wait()

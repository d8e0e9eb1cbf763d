#!/usr/bin/env python3
"""Runs the XCTest suites of the build `make test` made, in parallel worker processes.

Most of the suite's time is the integration tests waiting on a real confabd, a tmux pane or a
fake server, so one process at a time leaves the cores idle. Each worker runs the test binary
(`confabPackageTests.xctest`) on one batch of test classes at a time: every integration class
alone (they are the slow ones, and one class's set-up stays in one process as before), the
unit-test classes a module per batch. Classes are handed out longest first, by the times of
the last run on this machine (kept under the build directory), integration classes first when
there are none. Every test already runs on its own socket, data directory and tmux server, so
classes in different processes do not meet.

A batch's output is printed whole when it ends, so batches never interleave. The run ends with
the totals, every failed test by name, and one line naming every test that skipped: a
developer's run may skip what the machine lacks (root, a tool, the MCP environment) and must
say so; under CI=true such a test fails instead (Tests/IntegrationTests/Unavailable.swift).

    scripts/xctest-pool.py [--jobs N] [--filter REGEX]
"""

import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time

INTEGRATION = "IntegrationTests."


def bin_path(swift):
    out = subprocess.run([swift, "build", "--show-bin-path"], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def list_classes(binary):
    out = subprocess.run([binary, "--list-tests"], capture_output=True, text=True, check=True)
    classes = []
    for line in out.stdout.splitlines():
        name = line.strip().split("/")[0]
        if name and "." in name and name not in classes:
            classes.append(name)
    return classes


def batches_of(classes, times):
    """Integration classes one by one, other classes one batch per module; longest first."""
    batches = [[name] for name in classes if name.startswith(INTEGRATION)]
    modules = {}
    for name in classes:
        if not name.startswith(INTEGRATION):
            modules.setdefault(name.split(".")[0], []).append(name)
    batches += list(modules.values())

    def weight(batch):
        known = [times[name] for name in batch if name in times]
        if known:
            return sum(known)
        return 5.0 if batch[0].startswith(INTEGRATION) else 0.5
    return sorted(batches, key=weight, reverse=True)


SUITE_LINE = re.compile(r"^Test Suite '([^']+)' (started|passed|failed) at (\S+ \S+)")
EXECUTED = re.compile(r"Executed (\d+) tests?, with (\d+) failures? \((\d+) unexpected\)")
FAILED_CASE = re.compile(r"^Test Case '([^']+)' failed")
SKIPPED_CASE = re.compile(r"^Test Case '([^']+)' skipped")


def suite_seconds(output):
    """Each class's wall time from its started/passed lines, for the next run's order."""
    started, seconds = {}, {}
    for line in output.splitlines():
        match = SUITE_LINE.match(line)
        if not match:
            continue
        name, state, stamp = match.groups()
        try:
            moment = time.mktime(time.strptime(stamp.split(".")[0], "%Y-%m-%d %H:%M:%S")) + float("0." + stamp.split(".")[1])
        except (ValueError, IndexError):
            continue
        if state == "started":
            started[name] = moment
        elif name in started:
            seconds[name] = moment - started[name]
    return seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=int(os.environ.get("XCTEST_JOBS", "0")) or os.cpu_count() or 1)
    parser.add_argument("--filter", help="only the test classes whose Module.Class name matches this regex")
    args = parser.parse_args()

    swift = os.environ.get("SWIFT", "swift")
    directory = bin_path(swift)
    binary = os.path.join(directory, "confabPackageTests.xctest")
    classes = list_classes(binary)
    if args.filter:
        pattern = re.compile(args.filter)
        classes = [name for name in classes if pattern.search(name)]
    if not classes:
        print("no test class matches", file=sys.stderr)
        return 1

    times_file = os.path.join(directory, "xctest-times.json")
    try:
        with open(times_file) as f:
            times = json.load(f)
    except (OSError, ValueError):
        times = {}
    queue = batches_of(classes, times)
    lock = threading.Lock()
    totals = {"executed": 0, "failures": 0, "unexpected": 0}
    failed, skipped, broken = [], [], []
    began = time.monotonic()

    def worker():
        while True:
            with lock:
                if not queue:
                    return
                batch = queue.pop(0)
            run = subprocess.run([binary, ",".join(batch)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 text=True, errors="replace")
            output = run.stdout
            with lock:
                sys.stdout.write(output)
                sys.stdout.flush()
                for line in output.splitlines():
                    case = FAILED_CASE.match(line)
                    if case:
                        failed.append(case.group(1))
                    case = SKIPPED_CASE.match(line)
                    if case:
                        skipped.append(case.group(1))
                counts = EXECUTED.findall(output)
                if counts:
                    executed, failures, unexpected = (int(n) for n in counts[-1])
                    totals["executed"] += executed
                    totals["failures"] += failures
                    totals["unexpected"] += unexpected
                batch_failed = any(FAILED_CASE.match(line) for line in output.splitlines())
                if run.returncode != 0 and not batch_failed:
                    # Killed by a signal or ended by a crash: the tests after it never ran.
                    broken.append("%s (exit status %d)" % (",".join(batch), run.returncode))
                elif not counts:
                    broken.append("%s (no totals printed)" % ",".join(batch))
                times.update(suite_seconds(output))

    threads = [threading.Thread(target=worker) for _ in range(max(1, args.jobs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    try:
        with open(times_file + ".new", "w") as f:
            json.dump(times, f, sort_keys=True, indent=0)
        os.replace(times_file + ".new", times_file)
    except OSError:
        pass

    elapsed = time.monotonic() - began
    print("\nExecuted %d tests, with %d failures (%d unexpected) in %.1f s over %d workers"
          % (totals["executed"], totals["failures"], totals["unexpected"], elapsed, max(1, args.jobs)))
    if failed:
        print("failed: %d tests (%s)" % (len(failed), " ".join(sorted(set(failed)))))
    for batch in broken:
        print("ended abnormally: %s" % batch)
    unique_skips = sorted(set(skipped))
    if unique_skips:
        print("skipped: %d tests (%s): this machine lacks what they need" % (len(unique_skips), " ".join(unique_skips)))
    return 1 if failed or broken or totals["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())

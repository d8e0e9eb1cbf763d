#!/usr/bin/env python3
"""confab-web's figures for `make bench` (run by scripts/bench.py's "web" section, with the
Python of .build/venv, which has Playwright): with 10 pages of headless Chromium attached to
one conversation, the time from a delta reaching an attached terminal client to its text
appearing in each page, and the gateway's RSS with those 10 pages open and idle.

Both ends read one clock: the terminal client takes time.time() when it reads a delta, the
pages take performance.timeOrigin + performance.now() when a MutationObserver sees the
reply's text grow (the DOM change, before paint). Prints one JSON object on stdout.
Bounded: one reply of --deltas pieces, each page watched at most 120 s."""
import argparse, json, os, sys, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Tests", "web"))
from conftest import World, wait_for, CHROMIUM  # noqa: E402
from playwright.sync_api import sync_playwright  # noqa: E402

WATCH = """reply => {
  window.seen = [];
  const box = document.getElementById("messages");
  const observe = () => {
    const body = document.querySelector("#msg-" + reply + " .body");
    if (!body) return;
    const length = body.textContent.trim().length;
    const last = window.seen.length ? window.seen[window.seen.length - 1][0] : -1;
    if (length > last) window.seen.push([length, performance.timeOrigin + performance.now()]);
  };
  new MutationObserver(observe).observe(box, {subtree: true, childList: true, characterData: true});
}"""


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--pages", type=int, default=10)
    parser.add_argument("--deltas", type=int, default=300)
    parser.add_argument("--gap-ms", type=int, default=10)
    args = parser.parse_args()
    world = World()
    try:
        terminal = world.terminal()
        conversation = terminal.call("conversation.create", {"title": "bench"})["conversation"]["id"]
        terminal.call("conversation.attach", {"conversation": conversation})
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=[
                "--no-sandbox", "--disable-gpu",
                # Ten tabs, one in front: none of them may be slowed as a background tab.
                "--disable-background-timer-throttling", "--disable-renderer-backgrounding",
                "--disable-backgrounding-occluded-windows"])
            context = browser.new_context()
            first = context.new_page()
            first.goto(world.owner_url)
            first.wait_for_url(world.base + "/")
            pages = []
            for _ in range(args.pages):
                page = context.new_page()
                page.goto(world.base + "/c/" + conversation)
                page.wait_for_selector("#status:text('live')")
                pages.append(page)
            wait_for(lambda: len(terminal.call("conversation.attach", {"conversation": conversation})["clients"]) >= args.pages,
                     "every page attached")
            time.sleep(2.0)  # settling before the idle reading, not a condition
            idle_kib = rss_kib(world.gateway.pid)
            reply = terminal.call("message.send", {"conversation": conversation,
                                                   "content": "[[words:%d]] [[chunk:4]] [[delay:%d]]" % (args.deltas, args.gap_ms)})["reply"]
            for page in pages:
                page.evaluate(WATCH, reply)
            received = []  # (stripped length of the text so far, terminal's wall-clock ms)
            text = ""
            done = False
            deadline = time.monotonic() + 120
            while not done and time.monotonic() < deadline:
                before = len(terminal.events)
                terminal.poll()
                now = time.time() * 1000
                for event in terminal.events[before:]:
                    if event["method"] == "message.delta" and event["params"]["message"] == reply:
                        text += event["params"]["content"]
                        received.append((len(text.strip()), now))
                    if event["method"] == "message.completed" and event["params"]["message"]["id"] == reply:
                        done = True
            final = len(text.strip())
            latencies = []
            for page in pages:
                wait_for(lambda: page.evaluate("window.seen.length && window.seen[window.seen.length - 1][0]") >= final,
                         "the whole reply on a page", timeout=120)
                seen = page.evaluate("window.seen")
                index = 0
                for length, at in received:
                    while index < len(seen) and seen[index][0] < length:
                        index += 1
                    if index < len(seen):
                        latencies.append(seen[index][1] - at)
            browser.close()
        print(json.dumps({
            "pages": args.pages, "deltas": len(received), "samples": len(latencies),
            "p50_ms": percentile(latencies, 0.50), "p99_ms": percentile(latencies, 0.99),
            "idle_rss_kib": idle_kib,
        }))
    finally:
        world.close()


if __name__ == "__main__":
    main()
